"""The functions-and-parameters passes and Normalize keep random well-formed programs' values (hypothesis).

The programs are ``test_random_programs.programs()``. For the passes that change signatures, the random function
``main`` becomes an internal helper (an unused extra parameter, ``num_input = 1``) called twice by an entry
function ``caller``; the result must print, parse back equal, be well formed and give the interpreter's values
of ``caller``, exactly (none of these passes touches arithmetic).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings

import relax_mlir
from relax_mlir import transform
from relax_mlir.ir import Call, IRModule, Var
from relax_mlir.testing import roundtrip
from tests.py.test_random_programs import Program, _same, programs

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True, database=None)


@pytest.mark.parametrize("the_pass", [transform.Normalize(), transform.NormalizeGlobalVar()],
                         ids=["Normalize", "NormalizeGlobalVar"])
@SETTINGS
@given(p=programs())
def test_normal_forms_keep_values(the_pass, p: Program):
    after = the_pass(p.mod)
    roundtrip(after)
    want = relax_mlir.interpret(p.mod, "main", *p.args)
    _same(relax_mlir.interpret(after, "main", *p.args), want, rtol=0.0, atol=0.0, where=after.script())


# -- functions and parameters: the random function becomes an internal helper of an entry point ---------------------

def with_caller(p: Program) -> IRModule:
    """``main`` (given an unused extra parameter and ``num_input = 1``) called twice by an entry ``caller``
    returning both results."""
    from relax_mlir import BlockBuilder
    from relax_mlir.ir import Function, Tuple

    main = p.mod["main"]
    spare = Var("spare", main.params[0].struct_info)
    helper = Function(list(main.params) + [spare], main.body, main.ret_struct_info, {"num_input": 1})
    params = [Var(f"a{i}", x.struct_info) for i, x in enumerate(main.params)]
    bb = BlockBuilder(IRModule({"main": helper}))
    with bb.function("caller", params):
        with bb.dataflow():
            args = params + [params[0]]
            first = bb.emit(Call(bb.get_global_var("main"), args))
            second = bb.emit(Call(bb.get_global_var("main"), args))
            out = bb.emit_output(Tuple([first, second]))  # main may return a tuple (the generator's (loss, tuple))
        bb.emit_func_output(out)
    return bb.get()


MODULE_PASSES = {
    "RemoveUnusedParameters": transform.RemoveUnusedParameters(),
    "InlinePrivateFunctions": transform.InlinePrivateFunctions(),
    "AttachGlobalSymbol": transform.AttachGlobalSymbol(),
    "BundleModelParams": transform.BundleModelParams(),
    "ExpandTupleArguments after BundleModelParams": transform.Sequential([transform.BundleModelParams(),
                                                                          transform.ExpandTupleArguments()]),
    "RemoveUnusedOutputs": transform.RemoveUnusedOutputs(),
    "UpdateParamStructInfo": transform.UpdateParamStructInfo(lambda v: v.struct_info),
}


@pytest.mark.parametrize("name", list(MODULE_PASSES))
@SETTINGS
@given(p=programs())
def test_function_pass_keeps_the_callers_values(name: str, p: Program):
    mod = with_caller(p)
    after = MODULE_PASSES[name](mod)
    roundtrip(after)
    want = relax_mlir.interpret(mod, "caller", *p.args)
    _same(relax_mlir.interpret(after, "caller", *p.args), want, rtol=0.0, atol=0.0,
          where=f"{name} gave\n{after.script()}")
    if name == "RemoveUnusedParameters":
        assert "spare" not in [v.name_hint for v in after["main"].params], after.script()
    if name == "InlinePrivateFunctions":
        assert list(after) == ["caller"], after.script()
