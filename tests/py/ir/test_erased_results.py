"""A function's result erased to the sizes its parameters define (TVM's ``EraseToWellDefined``) on every path that
infers it: a ``Function`` built without a return struct info (as passes build them), the ``ExprMutator`` rebuilding
one, the well-formedness check of a call to a local function, and the compiler's refusal of such a result.

A size only the body's ``R.match_cast`` defines (``n`` below) is no size of a caller's: kept in the result, two calls
on 4 and 3 elements would both give ``(n,)``."""

import numpy as np
import pytest

import relax_mlir
from relax_mlir import op, transform
from relax_mlir.ir import (BindingBlock, Call, Function, IRModule, MatchCast, SeqExpr, TensorStructInfo, Tuple,
                           TupleStructInfo, Var, VarBinding)
from relax_mlir.ir.visitor import ExprMutator
from relax_mlir.ir.well_formed import WellFormedError, check_well_formed
from relax_mlir.script import from_source

_F32_1D = TensorStructInfo(None, "float32", ndim=1)
_N = TensorStructInfo(("n",), "float32")  # n: defined by a match_cast only
_M = TensorStructInfo(("m",), "float32")  # m: defined by the parameter x


def _cast_function(result_of=lambda x, z: Tuple([x, z])) -> Function:
    """``f(x: (m,), y: ndim=1)``: ``z`` is ``y`` match_cast to ``(n,)``; the result is ``result_of(x, z)``."""
    x, y, z = Var("x", _M), Var("y", _F32_1D), Var("z", _N)
    return Function([x, y], SeqExpr([BindingBlock([MatchCast(z, y, _N)])], result_of(x, z)), None)


def test_a_function_without_return_struct_info_erases_the_sizes_a_match_cast_defines():
    f = _cast_function()
    assert f.body.struct_info == TupleStructInfo([_M, _N])
    assert f.ret_struct_info == TupleStructInfo([_M, _F32_1D])  # m kept: the parameter x defines it
    assert f.struct_info.ret == f.ret_struct_info
    assert _cast_function(lambda x, z: x).ret_struct_info == _M


def test_remove_unused_outputs_rebuilds_the_result_erased():
    """The pass rebuilds the helper with no return struct info: it kept the match_cast's ``(n,)``."""
    mod = from_source('''
@I.ir_module
class Mod:
    @R.function(private=True)
    def helper(x: R.Tensor(("m",), "float32"), y: R.Tensor(ndim=1, dtype="float32")):
        n = T.int64()
        z = R.match_cast(y, R.Tensor((n,), "float32"))
        return (x, z)

    @R.function
    def main(x: R.Tensor((4,), "float32"), y: R.Tensor((3,), "float32")):
        t = Mod.helper(x, y)
        u = t[1]
        return u
''')
    out = transform.RemoveUnusedOutputs()(mod)
    assert out["helper"].ret_struct_info == TupleStructInfo([_F32_1D])
    assert out["main"].ret_struct_info == _F32_1D
    check_well_formed(out)


def test_append_loss_erases_an_other_output_a_match_cast_sizes():
    """The joined function is built with no return struct info; the backbone's second output is sized by its
    match_cast."""
    mod = from_source('''
@I.ir_module
class Mod:
    @R.function
    def predict(x: R.Tensor((2, 3), "float32"), y: R.Tensor(ndim=1, dtype="float32")):
        n = T.int64()
        with R.dataflow():
            out = R.exp(x)
            z = R.match_cast(y, R.Tensor((n,), "float32"))
            R.output(out, z)
        return (out, z)
''')

    loss = from_source('''
@R.function
def loss(pred: R.Tensor((2, 3), "float32"), target: R.Tensor((2, 3), "float32")):
    with R.dataflow():
        lv = R.subtract(pred, target)
        gv = R.sum(lv)
        R.output(gv)
    return gv
''')
    out = transform.AppendLoss("predict", loss, num_backbone_outputs=1)(mod)
    assert out["predict_loss"].ret_struct_info == TupleStructInfo([TensorStructInfo((), "float32"), _F32_1D])
    check_well_formed(out)


class _UseTheCast(ExprMutator):
    """Rewrites ``R.exp(y)`` into ``R.exp(z)``, ``z`` the match_cast of ``y``: the result becomes ``(n,)``."""

    def __init__(self, cast: Var):
        super().__init__()
        self.cast = cast

    def visit_call_(self, call):
        call = self.visit_expr_post_order(call)
        return op.exp(self.cast) if call.op is op.exp else call


def _exp_of_the_uncast_input() -> tuple[Function, Var]:
    """``f(y: ndim=1)``: ``z`` is ``y`` match_cast to ``(n,)``, the result ``R.exp(y)`` (of rank 1 only)."""
    y, z = Var("y", _F32_1D), Var("z", _N)
    w = Var("w", _F32_1D)
    body = SeqExpr([BindingBlock([MatchCast(z, y, _N), VarBinding(w, op.exp(y))])], w)
    return Function([y], body, None), z


def test_a_mutator_erases_the_result_it_rebuilds():
    f, z = _exp_of_the_uncast_input()
    assert f.ret_struct_info == _F32_1D
    g = _UseTheCast(z).visit_expr(f)
    assert g.body.struct_info == _N  # the rewritten result names the cast's n ...
    assert g.ret_struct_info == _F32_1D  # ... which the return does not: the parameter does not define it


def test_a_mutator_keeps_an_annotation_naming_a_cast_size_following_the_body():
    """An annotation that restated the unerased result (the parser keeps one as written) still follows it."""
    x, y, z = Var("x", _F32_1D), Var("y", _F32_1D), Var("z", _N)
    w = Var("w", _N)
    f = Function([x, y], SeqExpr([BindingBlock([MatchCast(z, y, _N), VarBinding(w, op.exp(z))])], w), _N)
    g = _UseTheCast(z).visit_expr(f)  # exp(z) -> exp(z): rebuilt, unchanged struct info
    assert g.ret_struct_info == _N


def test_a_mutator_infers_the_erased_result_again_from_the_new_body():
    """A result inferred erased (rank 1) follows the rewritten body: a new, static result is no longer erased."""
    f = _cast_function(lambda x, z: z)
    assert f.ret_struct_info == _F32_1D

    class Static(ExprMutator):
        def visit_var_(self, var):
            return op.zeros((5,), "float32") if var.name_hint == "z" else var

    g = Static().visit_expr(f)
    assert g.ret_struct_info == TensorStructInfo((5,), "float32")


# -- a call of a local function ------------------------------------------------------------------------------------

_LOCAL_CALL = '''
@I.ir_module
class Mod:
    @R.function
    def main(x: R.Tensor((4,), "float32")):
        @R.function
        def f(y: R.Tensor(("n",), "float32")):
            z = R.add(y, y)
            return z

        a = f(x)
        return a
'''


def test_a_local_function_call_binds_its_sizes_in_the_well_formedness_check():
    """The check took f's ``(n,)`` for the result of ``f(x)`` and reported the parser's ``(4,)`` ill-formed."""
    mod = from_source(_LOCAL_CALL)
    assert mod["main"].ret_struct_info == TensorStructInfo((4,), "float32")
    check_well_formed(mod)
    vm = relax_mlir.VirtualMachine(relax_mlir.compile(mod))
    np.testing.assert_array_equal(vm["main"](np.arange(4, dtype="float32")), 2 * np.arange(4, dtype="float32"))


def _main_calling_local_f(x_sinfo: TensorStructInfo, nargs: int = 1) -> Function:
    """``main(x)``: binds the local ``f(y: (n,)) = y + y`` and returns ``f(x, ...)`` (``nargs`` times ``x``), the
    call's struct info ``(4,)``."""
    y, z = Var("y", TensorStructInfo(("n",), "float32")), Var("z", TensorStructInfo(("n",), "float32"))
    inner = Function([y], SeqExpr([BindingBlock([VarBinding(z, op.add(y, y))])], z), None)
    f, x = Var("f", inner.struct_info), Var("x", x_sinfo)
    four = TensorStructInfo((4,), "float32")
    a = Var("a", four)
    call = Call(f, [x] * nargs, {}, four)
    return Function([x], SeqExpr([BindingBlock([VarBinding(f, inner), VarBinding(a, call)])], a), four)


def _check_main(func: Function) -> None:
    check_well_formed(IRModule({"main": func}))


def test_a_local_function_call_is_checked_as_a_global_one_is():
    _check_main(_main_calling_local_f(TensorStructInfo((4,), "float32")))
    with pytest.raises(WellFormedError, match=r"main, binding 'a': call to f: argument 0: expected rank 1, got rank 2"):
        _check_main(_main_calling_local_f(TensorStructInfo((4, 2), "float32")))
    with pytest.raises(WellFormedError, match=r"main, binding 'a': call to f: expected 1 argument\(s\), got 2"):
        _check_main(_main_calling_local_f(TensorStructInfo((4,), "float32"), nargs=2))
    # an argument of unknown length binds nothing: the result is f's (n,) erased, not the call's (4,)
    with pytest.raises(WellFormedError, match=r"main, binding 'a': struct info R.Tensor\(\(4,\), dtype=\"float32\"\) "
                                              r"disagrees with its value's R.Tensor\(dtype=\"float32\", ndim=1\)"):
        _check_main(_main_calling_local_f(_F32_1D))


# -- the compiler's refusal --------------------------------------------------------------------------------------

def test_compiling_a_result_a_match_cast_sizes_says_how_to_size_it():
    mod = from_source('''
@I.ir_module
class Mod:
    @R.function
    def main(y: R.Tensor(ndim=1, dtype="float32")):
        n = T.int64()
        z = R.match_cast(y, R.Tensor((n,), "float32"))
        return z
''')
    with pytest.raises(ValueError, match=r"main: result has an unknown shape \(Tensor\(ndim=1, float32\)\); a compiled "
                                         r"function must be able to allocate its results: match_cast it to sizes the "
                                         r"parameters define, or return a value whose shape they do"):
        relax_mlir.compile(mod)
