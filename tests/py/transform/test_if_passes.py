"""Passes across R.If: DeadCodeElimination, CanonicalizeBindings, EliminateCommonSubexpr, Normalize and
ConvertToDataflow work inside the branches, as TVM's do; the other passes (Gradient among them, as TVM's) refuse a
module with an If, naming themselves and where it is."""

from __future__ import annotations

import numpy as np
import pytest

from relax_mlir import interpret, op
from relax_mlir.ir import (BindingBlock, Function, If, IRModule, SeqExpr, TensorStructInfo, Var, VarBinding,
                           assert_structural_equal, check_well_formed)
from relax_mlir.script import from_source
from relax_mlir.transform import (CanonicalizeBindings, ConvertToDataflow, DeadCodeElimination, LambdaLift,
                                  EliminateCommonSubexpr, FuseOps, Gradient, LegalizeOps, Normalize, function_pass)

HEAD = '''
@I.ir_module
class Module:
    @R.function
    def main(c: R.Tensor((), "bool"), x: R.Tensor((3,), "float32")):
'''


def _mod(body: str) -> IRModule:
    return from_source(HEAD + body)


def _same_results(before: IRModule, after: IRModule) -> None:
    x = np.array([0.5, -1.0, 2.0], "float32")
    for c in (True, False):
        np.testing.assert_allclose(interpret(after, "main", np.array(c), x), interpret(before, "main", np.array(c), x),
                                   rtol=1e-6)


def test_dead_code_elimination_prunes_inside_branches_and_keeps_what_they_read():
    before = _mod('''
        unused = R.exp(x)
        read = R.negative(x)
        if c:
            dead = R.exp(read)
            y = R.add(read, x)
        else:
            dead2 = R.multiply(x, x)
            y = x
        return y
''')
    after = DeadCodeElimination()(before)
    assert_structural_equal(after, _mod('''
        read = R.negative(x)
        if c:
            y = R.add(read, x)
        else:
            y = x
        return y
'''))
    _same_results(before, after)


def test_dead_code_elimination_keeps_a_branchs_effect_and_the_if_holding_it():
    before = from_source('''
@I.ir_module
class Module:
    @R.function(pure=False)
    def main(c: R.Tensor((), "bool"), x: R.Tensor((3,), "float32")):
        if c:
            e = R.call_packed("test_if.effect", x, sinfo_args=R.Tensor((3,), "float32"))
            y = x
        else:
            y = x
        return x
''')
    assert_structural_equal(DeadCodeElimination()(before), before)


def test_dead_code_elimination_drops_an_unused_pure_if():
    before = _mod('''
        if c:
            y = R.exp(x)
        else:
            y = x
        return x
''')
    after = DeadCodeElimination()(before)
    assert not after["main"].body.blocks


def test_canonicalize_bindings_removes_aliases_inside_branches_and_across_the_if():
    before = _mod('''
        a = x
        if c:
            b = a
            y = R.add(b, a)
        else:
            y = a
        return y
''')
    after = CanonicalizeBindings()(before)
    assert_structural_equal(after, _mod('''
        if c:
            y = R.add(x, x)
        else:
            y = x
        return y
'''))
    _same_results(before, after)


def test_cse_reuses_a_value_of_before_the_if_in_a_branch_but_not_one_branchs_in_the_other_or_after():
    before = _mod('''
        e = R.exp(x)
        if c:
            e2 = R.exp(x)
            n = R.negative(x)
            y = R.add(e2, n)
        else:
            n2 = R.negative(x)
            y = R.multiply(n2, n2)
        n3 = R.negative(x)
        z = R.add(y, n3)
        return z
''')
    after = EliminateCommonSubexpr()(before)
    assert_structural_equal(after, _mod('''
        e = R.exp(x)
        if c:
            n = R.negative(x)
            y = R.add(e, n)
        else:
            n2 = R.negative(x)
            y = R.multiply(n2, n2)
        n3 = R.negative(x)
        z = R.add(y, n3)
        return z
'''))
    _same_results(before, after)


def test_convert_to_dataflow_converts_inside_branches_and_leaves_the_if_outside():
    before = _mod('''
        a = R.exp(x)
        b = R.negative(a)
        if c:
            p = R.exp(b)
            q = R.add(p, b)
            y = q
        else:
            y = b
        return y
''')
    after = ConvertToDataflow()(before)
    assert_structural_equal(after, _mod('''
        with R.dataflow():
            a = R.exp(x)
            b = R.negative(a)
            R.output(b)
        if c:
            with R.dataflow():
                p = R.exp(b)
                q = R.add(p, b)
                R.output(q)
            y = q
        else:
            y = b
        return y
'''))
    _same_results(before, after)


def test_normalize_binds_a_nested_call_inside_its_branch():
    c, x = Var("c", TensorStructInfo((), "bool")), Var("x", TensorStructInfo((3,), "float32"))
    y = Var("y", TensorStructInfo((3,), "float32"))
    inner = Var("t", TensorStructInfo((3,), "float32"))
    then = SeqExpr([BindingBlock([VarBinding(inner, op.add(op.exp(x), x))])], inner)  # a nested call
    mod = IRModule({"main": Function([c, x], SeqExpr([BindingBlock([VarBinding(y, If(c, then, x))])], y))})
    after = Normalize()(mod)
    check_well_formed(after)
    branch = after["main"].body.blocks[0].bindings[0].value.true_branch
    assert [b.value.op.name for b in branch.blocks[0].bindings] == ["relax.exp", "relax.add"]
    _same_results(mod, after)


@pytest.mark.parametrize("make_pass", [LegalizeOps, FuseOps], ids=["LegalizeOps", "FuseOps"])
def test_a_pass_that_does_not_handle_if_refuses_it_naming_itself_and_where(make_pass):
    mod = _mod('''
        if c:
            y = R.exp(x)
        else:
            y = x
        return y
''')
    with pytest.raises(ValueError, match=rf"{make_pass.__name__}: does not support R.If \(function 'main', binding "
                                         r"'y'\); the passes that do: .*DeadCodeElimination"):
        make_pass()(mod)


def test_gradient_refuses_an_if():
    mod = from_source('''
@I.ir_module
class Module:
    @R.function
    def main(c: R.Tensor((), "bool"), x: R.Tensor((3,), "float32")) -> R.Tensor((), "float32"):
        if c:
            y = R.sum(x)
        else:
            y = R.max(x)
        return y
''')
    with pytest.raises(ValueError, match=r"Gradient: does not support R.If \(function 'main', binding 'y'\)"):
        Gradient("main")(mod)


def test_a_users_pass_runs_on_a_module_with_an_if():
    seen = []

    @function_pass(opt_level=0)
    def record(func, mod, ctx):
        seen.append(func)
        return func

    mod = _mod('''
        if c:
            y = x
        else:
            y = x
        return y
''')
    assert record(mod) is not None and len(seen) == 1


_LOCAL_AND_IF = '''
@R.function
def main(c: R.Tensor((), "bool"), x: R.Tensor((3,), "float32"), w: R.Tensor((3,), "float32")):
    @R.function
    def pick(d: R.Tensor((), "bool"), y: R.Tensor((3,), "float32")):
        if d:
            r = R.multiply(y, w)
        else:
            r = R.add(y, w)
        return r

    if c:
        @R.function
        def twice(z: R.Tensor((3,), "float32")):
            t = R.add(z, z)
            return t

        a = pick(c, x)
        out = twice(a)
    else:
        out = pick(c, x)
    return out
'''


@pytest.mark.parametrize("cond", [True, False])
def test_lambda_lift_lifts_local_functions_holding_an_if_or_defined_in_a_branch(cond):
    """A local function holding an ``R.If``, and one a branch defines, were refused by LambdaLift (which compile
    runs), though both interpret; lifted, the module compiles and computes what the interpreter does."""
    import relax_mlir

    mod = IRModule.from_expr(from_source(_LOCAL_AND_IF))
    lifted = LambdaLift()(mod)
    assert sorted(name for name, _ in lifted.items()) == ["main", "main_pick", "main_twice"]
    c = np.array(cond)
    x, w = np.array([1.0, -2.0, 3.0], np.float32), np.array([0.5, 4.0, -1.0], np.float32)
    want = (x * w) * 2 if cond else x + w
    np.testing.assert_allclose(relax_mlir.interpret(mod, "main", c, x, w), want, rtol=1e-6)
    np.testing.assert_allclose(relax_mlir.interpret(lifted, "main", c, x, w), want, rtol=1e-6)
    vm = relax_mlir.VirtualMachine(relax_mlir.compile(mod))
    np.testing.assert_allclose(vm["main"](c, x, w), want, rtol=1e-6)


def test_normalize_binds_a_branch_result_that_is_a_call_so_the_text_parses_back_equal():
    """Normalize left an If branch's result a bare call; the printer writes it as an assignment, which parses back
    as a binding, so print -> parse changed Normalize's output (TVM's normaliser binds it)."""
    from relax_mlir.ir import assert_structural_equal

    c, x, y = Var("c", TensorStructInfo((), "bool")), Var("x", TensorStructInfo((2,), "float32")), \
        Var("y", TensorStructInfo((2,), "float32"))
    func = Function([c, x], SeqExpr([BindingBlock([VarBinding(y, If(c, op.add(x, x), op.multiply(x, x)))])], y))
    after = Normalize()(IRModule.from_expr(func))
    branch = after["main"].body.blocks[0].bindings[0].value.true_branch
    assert isinstance(branch.body, Var) and len(branch.blocks) == 1
    assert_structural_equal(from_source(after.script()), after)
    for cond in (True, False):
        x_val = np.array([1.5, -2.0], np.float32)
        np.testing.assert_array_equal(interpret(after, "main", np.array(cond), x_val),
                                      x_val + x_val if cond else x_val * x_val)
