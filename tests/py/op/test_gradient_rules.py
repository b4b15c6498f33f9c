"""The gradient rules of the core families beyond finite differences: their conventions at ties and kinks
(where finite differences say nothing), symbolic shapes, and the cleanliness of the adjoint IR they emit."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from relax_mlir import op as relax_op
from relax_mlir.interpreter import interpret
from relax_mlir.ir import Var
from relax_mlir.ir.expr import Call, Constant, VarBinding
from relax_mlir.ir.struct_info import StructInfo, TensorStructInfo, TupleStructInfo, free_vars, substitute
from relax_mlir.testing.gradcheck import as_float64, vjp_module
from relax_mlir.op.registry import NOT_DIFFERENTIABLE, SECOND_ORDER_UNSUPPORTED, substitute_attrs
from relax_mlir.testing import roundtrip

from ..conftest import random_inputs
from .test_registry import SIZES

_T = TensorStructInfo
CORE = [o for o in relax_op.list_ops() if not o.name.startswith("relax.nn.")
        and o.gradient not in (None, NOT_DIFFERENTIABLE, SECOND_ORDER_UNSUPPORTED)]


def _vjp(op, sinfos, attrs, *arrays):
    """The rule's gradients at ``arrays`` (the last one the output adjoint), through the interpreter."""
    return interpret(vjp_module(op, sinfos, attrs), "vjp", *arrays)


def _f64(*shapes):
    return [_T(s, "float64") for s in shapes]


# -- conventions at ties and kinks -------------------------------------------------------------------------

def test_abs_gradient_at_zero_is_plus_one():
    x = np.array([-1.0, 0.0, 2.0])
    (gx,) = _vjp(relax_op.abs, _f64((3,)), {}, x, np.ones(3))
    np.testing.assert_array_equal(gx, [-1.0, 1.0, 1.0])


def test_maximum_ties_go_to_x1_and_minimum_ties_to_x2():
    a, b, g = np.array([1.0, 2.0, 3.0]), np.array([2.0, 2.0, 1.0]), np.array([10.0, 20.0, 30.0])
    ga, gb = _vjp(relax_op.maximum, _f64((3,), (3,)), {}, a, b, g)
    np.testing.assert_array_equal(ga, [0, 20, 30])
    np.testing.assert_array_equal(gb, [10, 0, 0])
    ga, gb = _vjp(relax_op.minimum, _f64((3,), (3,)), {}, a, b, g)
    np.testing.assert_array_equal(ga, [10, 0, 0])
    np.testing.assert_array_equal(gb, [0, 20, 30])


def test_clip_passes_the_gradient_on_its_bounds():
    x = np.array([-1.0, -0.5, 0.2, 1.0, 1.5])
    (gx,) = _vjp(relax_op.clip, _f64((5,)), {"min": -0.5, "max": 1.0}, x, np.ones(5))
    np.testing.assert_array_equal(gx, [0, 1, 1, 1, 0])


@pytest.mark.parametrize("name", ["max", "min"])
def test_reduction_extremum_splits_the_gradient_among_ties(name):
    x = np.array([[3.0, 1.0, 3.0, 3.0], [0.0, 0.0, 2.0, 1.0]]) * (1 if name == "max" else -1)
    (gx,) = _vjp(relax_op.get_op(name), _f64((2, 4)), {"axis": 1}, x, np.array([6.0, 5.0]))
    np.testing.assert_array_equal(gx, [[2, 0, 2, 2], [0, 0, 5, 0]])
    (gx,) = _vjp(relax_op.get_op(name), _f64((2, 4)), {}, x, np.array(4.0))
    np.testing.assert_array_equal(gx, [[4 / 3, 0, 4 / 3, 4 / 3], [0, 0, 0, 0]])


def test_take_gradient_accumulates_repeated_indices():
    x, idx = np.zeros((4, 2)), np.array([1, 3, 1, -3])
    gx, _ = _vjp(relax_op.take, [_T((4, 2), "float64"), _T((4,), "int64")], {"axis": 0}, x, idx, np.ones((4, 2)))
    np.testing.assert_array_equal(gx, [[0, 0], [3, 3], [0, 0], [1, 1]])


def test_floor_ceil_and_value_independent_ops_give_no_gradient():
    x = Var("x", _T((2,), "float64"))
    for op in (relax_op.floor, relax_op.ceil, relax_op.zeros_like, relax_op.ones_like):
        call = op(x)
        assert op.gradient(Var("y", call.struct_info), call, Var("g", call.struct_info)) == [None]
    call = relax_op.zeros((2,), "float32")
    assert relax_op.zeros.gradient(Var("y", call.struct_info), call, Var("g", call.struct_info)) == []


def test_integer_operands_get_no_gradient():
    a, b = Var("a", _T((2, 3), "int32")), Var("b", _T((3, 4), "float32"))
    call = relax_op.matmul(a, b, out_dtype="float32")
    ga, gb = relax_op.matmul.gradient(Var("y", call.struct_info), call, Var("g", call.struct_info))
    assert ga is None and gb.struct_info == b.struct_info
    call = relax_op.add(a, a)
    assert relax_op.add.gradient(Var("y", call.struct_info), call, Var("g", call.struct_info)) == [None, None]


def test_mixed_precision_matmul_gradient_is_cast_back():
    a, b = Var("a", _T((2, 3), "float16")), Var("b", _T((3, 4), "float16"))
    call = relax_op.matmul(a, b, out_dtype="float32")
    ga, gb = relax_op.matmul.gradient(Var("y", call.struct_info), call, Var("g", call.struct_info))
    assert ga.struct_info == a.struct_info and gb.struct_info == b.struct_info
    arrays = [np.arange(6.0).reshape(2, 3), np.arange(12.0).reshape(3, 4), np.ones((2, 4))]
    got = _vjp(relax_op.matmul, _f64((2, 3), (3, 4)), {"out_dtype": "float64"}, *arrays)
    np.testing.assert_allclose(got[0], np.ones((2, 4)) @ arrays[1].T)
    np.testing.assert_allclose(got[1], arrays[0].T @ np.ones((2, 4)))


# -- symbolic shapes ---------------------------------------------------------------------------------------

def _sinfo(arg) -> StructInfo:
    return as_float64(TupleStructInfo(arg) if isinstance(arg, (list, tuple)) else arg)


def _symbolic_cases():
    for op in CORE:
        for i, sample in enumerate(op.samples):
            sinfos = [_sinfo(a) for a in sample.args]
            if not sample.sizes and any(free_vars(s) for s in sinfos):
                yield pytest.param(op, sample, id=f"{op.name}-{i}")


@pytest.mark.parametrize("op,sample", list(_symbolic_cases()))
def test_rule_on_symbolic_shapes_agrees_with_static_shapes(op, sample):
    """The rule builds on the symbolic struct info the Gradient pass sees, and computes what it computes on
    the static one (which the finite-difference test checks)."""
    sinfos = [_sinfo(a) for a in sample.args]
    env = {name: SIZES[name] for s in sinfos for name in free_vars(s)}
    static = [substitute(s, env) for s in sinfos]
    attrs = op.complete_attrs(sample.attrs)
    if (attrs.get("dtype") or "float64").startswith(("float16", "bfloat16", "float32")):
        attrs = {**attrs, "dtype": "float64"}
    if (attrs.get("out_dtype") or "float64").startswith(("float16", "bfloat16", "float32")):
        attrs = {**attrs, "out_dtype": "float64"}
    symbolic_mod = roundtrip(vjp_module(op, sinfos, attrs))
    static_mod = vjp_module(op, static, substitute_attrs(attrs, env))
    rng = np.random.default_rng(zlib.crc32(op.name.encode()))
    arrays = (sample.make(rng, static, substitute_attrs(attrs, env)) if sample.make
              else random_inputs(rng, static, sample.low, sample.high))
    w_sinfo = static_mod["vjp"].params[-1].struct_info
    w = random_inputs(rng, [w_sinfo])[0] if isinstance(w_sinfo, TupleStructInfo) or w_sinfo.dtype.startswith(
        "float") else np.zeros(tuple(w_sinfo.shape), w_sinfo.dtype)
    want = interpret(static_mod, "vjp", *arrays, w)
    got = interpret(symbolic_mod, "vjp", *arrays, w)
    for g, s in zip(_flat(got), _flat(want)):
        np.testing.assert_allclose(g, s, rtol=1e-12, atol=1e-12)


def _flat(value):
    if isinstance(value, (tuple, list)):
        return [x for v in value for x in _flat(v)]
    return [value]


CONCAT_OF_SYMBOLIC_PIECES = '''
@I.ir_module
class M:
    @R.function
    def f(x: R.Tensor(("n", 4), "float64"), y: R.Tensor(("m", 4), "float64"),
          w: R.Tensor(("2 * n + m", 4), "float64")):
        with R.dataflow():
            a = R.concat((x, y), axis=0)
            s1 = R.sum(R.multiply(a, a))
            b = R.concat((x, y, x), axis=0)
            s2 = R.sum(R.multiply(R.sin(b), w))
            c = R.concat((y, x), axis=None)
            s3 = R.sum(R.multiply(R.multiply(c, c), c))
            s = R.add(R.add(s1, s2), s3)
            R.output(s)
        return s
'''


def test_concat_of_pieces_of_symbolic_sizes_is_differentiated_interpreted_and_compiled():
    """concat's adjoint splits at the sums of the sizes before each piece: ``n`` between pieces of sizes ``n``
    and ``m`` (symbolic from both ends), ``n`` and ``n + m`` around a middle piece, ``4 * m`` in a flattened
    concat; the slices take those bounds as sizes. Refused before ("symbolic from both ends")."""
    from relax_mlir import VirtualMachine, compile, transform
    from relax_mlir.script import from_source
    from relax_mlir.testing import finite_difference_gradients

    mod = from_source(CONCAT_OF_SYMBOLIC_PIECES)
    after = roundtrip(transform.Gradient("f")(mod))
    rng = np.random.default_rng(11)
    n, m = 3, 5
    args = [rng.standard_normal((n, 4)), rng.standard_normal((m, 4)), rng.standard_normal((2 * n + m, 4))]
    want = finite_difference_gradients(mod, "f", args, [0, 1, 2])
    loss, grads = interpret(after, "f_adjoint", *args)
    np.testing.assert_allclose(loss, interpret(mod, "f", *args), rtol=1e-12)
    compiled_loss, compiled_grads = VirtualMachine(compile(after))["f_adjoint"](*args)
    np.testing.assert_allclose(np.asarray(compiled_loss), loss, rtol=1e-12)
    for i, w in enumerate(want):
        np.testing.assert_allclose(grads[i], w, rtol=1e-5, atol=1e-6, err_msg=f"interpreted, argument {i}")
        np.testing.assert_allclose(np.asarray(compiled_grads[i]), w, rtol=1e-5, atol=1e-6,
                                   err_msg=f"compiled, argument {i}")


def test_mean_over_a_symbolic_axis_divides_by_its_size():
    x = Var("x", _T(("n", 4), "float64"))
    call = relax_op.mean(x, 0)
    (gx,) = relax_op.mean.gradient(Var("y", call.struct_info), call, Var("g", call.struct_info))
    assert _calls(gx, "relax.ones"), f"the count of a symbolic axis is a sum of ones: {gx}"
    mod = vjp_module(relax_op.mean, [x.struct_info], {"axis": 0})
    (got,) = interpret(mod, "vjp", np.zeros((5, 4)), np.arange(4.0))
    np.testing.assert_allclose(got, np.tile(np.arange(4.0) / 5, (5, 1)))


def _calls(expr, name) -> bool:
    if isinstance(expr, Call):
        return expr.op.name == name or any(_calls(a, name) for a in expr.args)
    return False


# -- clean adjoint IR ----------------------------------------------------------------------------------------

def _bindings(mod):
    return [b for block in mod["vjp"].body.blocks for b in block.bindings if isinstance(b, VarBinding)]


def _shape(e):
    s = e.struct_info
    return None if not isinstance(s, TensorStructInfo) or s.shape is None else tuple(s.shape)


def _waste(binding, producers) -> str:
    """What is pointless about one binding of the adjoint, or ''."""
    v = binding.value
    if not isinstance(v, Call) or not hasattr(v.op, "name"):
        return ""
    name, args = v.op.name, v.args
    if name in ("relax.collapse_sum_to", "relax.broadcast_to", "relax.reshape") and \
            _shape(args[0]) == tuple(v.attrs["shape"]):
        return f"{name} to the shape it already has"
    if name == "relax.astype" and args[0].struct_info.dtype == v.attrs["dtype"]:
        return "astype to the dtype it already has"
    if name == "relax.multiply" and any(isinstance(a, Constant) and np.all(a.data == 1) for a in args):
        return "multiplication by 1"
    if name == "relax.collapse_sum_to":
        source = producers.get(args[0])
        if source is not None and isinstance(source, Call) and source.op.name == "relax.broadcast_to":
            return "broadcast_to summed straight back"
    return ""


def _clean_cases():
    for op in CORE:
        for i, sample in enumerate(op.samples):
            yield pytest.param(op, sample, id=f"{op.name}-{i}")


@pytest.mark.parametrize("op,sample", list(_clean_cases()))
def test_adjoint_ir_is_clean(op, sample):
    sinfos = [_sinfo(a) for a in sample.args]
    env = {name: SIZES[name] for s in sinfos for name in free_vars(s)} | sample.sizes
    static = [substitute(s, env) for s in sinfos]
    mod = vjp_module(op, static, substitute_attrs(op.complete_attrs(sample.attrs), env))
    bindings = _bindings(mod)
    producers = {b.var: b.value for b in bindings}
    adjoint = bindings[1:]  # the first binding is the forward call itself
    waste = [f"{b.var.name_hint} = {b.value}: {w}" for b in adjoint if (w := _waste(b, producers))]
    assert not waste, f"{op.name}: " + "; ".join(waste)


def test_same_shape_operands_emit_no_collapse_and_broadcast_ones_one():
    same = vjp_module(relax_op.add, _f64((3, 4), (3, 4)), {})
    assert not any(b.value.op.name == "relax.collapse_sum_to" for b in _bindings(same) if isinstance(b.value, Call))
    bcast = vjp_module(relax_op.multiply, _f64((3, 4), (4,)), {})
    collapses = [b for b in _bindings(bcast) if isinstance(b.value, Call) and b.value.op.name == "relax.collapse_sum_to"]
    assert len(collapses) == 1 and collapses[0].value.attrs["shape"] == (4,)

