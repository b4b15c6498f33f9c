"""The registry tests itself: every registered op's samples are inferred and evaluated, its bad samples refused.

For each sample the inferred struct info (with symbolic dims bound to concrete sizes) must equal the shape and
dtype of the NumPy reference's output (only rank and dtype where the inferred shape is unknown); inference on
the concrete shapes must agree too. The reference gets the call's attributes with the size variables bound
(``substitute_attrs``), and the stored attributes must already be canonical. Every sample's call, bound in a
function, is printed and parsed back (``roundtrip``), symbolic and static.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from relax_mlir import op as relax_op
from relax_mlir.ir import BindingBlock, Function, IRModule, SeqExpr, Var, VarBinding
from relax_mlir.ir.dtype import from_numpy
from relax_mlir.ir.struct_info import ShapeStructInfo, StructInfo, TensorStructInfo, TupleStructInfo, free_vars, substitute
from relax_mlir.ir.sym import SizeVar, SymDim
from relax_mlir.op import Op, substitute_attrs
from relax_mlir.testing import roundtrip

from ..conftest import random_inputs

OPS = relax_op.list_ops()
SIZES = {"n": 3, "m": 5, "k": 2, "b": 4, "c": 6, "h": 7, "w": 8}


def _sinfo(arg) -> StructInfo:
    return TupleStructInfo(arg) if isinstance(arg, (list, tuple)) else arg


def _cases(kind: str):
    for op in OPS:
        for i, sample in enumerate(op.samples if kind == "good" else op.bad_samples):
            yield pytest.param(op, sample, id=f"{op.name}-{i}")


def _check_output(sinfo: StructInfo, value, where: str) -> None:
    if isinstance(sinfo, TupleStructInfo):
        assert isinstance(value, (tuple, list)), f"{where}: expected a tuple result, got {type(value).__name__}"
        assert len(value) == len(sinfo.fields), where
        for i, (f, v) in enumerate(zip(sinfo.fields, value)):
            _check_output(f, v, f"{where}[{i}]")
        return
    assert isinstance(sinfo, TensorStructInfo), where
    value = np.asarray(value)
    if sinfo.shape is None:  # unknown shape: the rank, if known, must still agree
        assert sinfo.ndim in (-1, value.ndim), f"{where}: inferred rank {sinfo.ndim}, reference gave {value.shape}"
    else:
        assert tuple(sinfo.shape) == value.shape, f"{where}: inferred {sinfo.shape}, reference gave {value.shape}"
    assert sinfo.dtype == from_numpy(value.dtype), f"{where}: inferred {sinfo.dtype}, reference gave {value.dtype}"


@pytest.mark.parametrize("op", OPS, ids=lambda o: o.name)
def test_record_is_complete(op):
    assert op.name.startswith("relax."), op.name
    assert op.doc, f"{op.name} has no documentation"
    assert op.samples, f"{op.name} has no samples, so nothing tests it"
    assert op.bad_samples, f"{op.name} has no bad samples, so its errors are untested"
    assert relax_op.get_op(op.name) is op


def _has_sym(value) -> bool:
    if isinstance(value, SymDim):
        return True
    if isinstance(value, (tuple, list)):
        return any(_has_sym(v) for v in value)
    return isinstance(value, dict) and any(_has_sym(v) for v in value.values())


@pytest.mark.parametrize("op,sample", list(_cases("good")))
def test_inference_matches_reference(op, sample):
    rng = np.random.default_rng(zlib.crc32(op.name.encode()))
    sinfos = [_sinfo(a) for a in sample.args]
    args = [Var(f"a{i}", s) for i, s in enumerate(sinfos)]
    call = op(*args, **sample.attrs)
    assert op.complete_attrs(call.attrs) == call.attrs, f"{op.name}: canonicalization is not idempotent"
    env = {name: SIZES[name] for s in sinfos for name in free_vars(s)} | sample.sizes
    attrs = substitute_attrs(call.attrs, env)
    assert not _has_sym(attrs), f"{op.name}: the sample leaves size variables in {attrs} unbound (Sample.sizes)"
    concrete = [substitute(s, env) for s in sinfos]
    arrays = (sample.make(rng, concrete, attrs) if sample.make
              else random_inputs(rng, concrete, sample.low, sample.high))
    result = op.reference(*arrays, **attrs)
    _check_output(substitute(call.struct_info, env), result, f"{op.name} symbolic")
    static = op(*[Var(f"a{i}", s) for i, s in enumerate(concrete)], **attrs).struct_info
    _check_output(static, result, f"{op.name} static")


def _defined_sizes(sinfo: StructInfo) -> set[str]:
    """Size variables a parameter of struct info ``sinfo`` defines: those that are a whole dimension."""
    if isinstance(sinfo, TupleStructInfo):
        return set().union(*(_defined_sizes(f) for f in sinfo.fields))
    if isinstance(sinfo, TensorStructInfo) and sinfo.shape is not None:
        return {v for d in sinfo.shape if isinstance(d, SymDim) and d.is_var() for v in d.free_vars()}
    return set()


def _one_call_module(op: Op, sinfos: list, attrs: dict) -> IRModule:
    params = [Var(f"a{i}", s) for i, s in enumerate(sinfos)]
    call = op(*params, **attrs)
    # Size variables no parameter defines (only the attributes mention them, as in ``zeros(("n", 4))``, or only
    # expressions such as ``2 * h`` use them) are bound by a shape parameter, as TVM does.
    used = free_vars(call.struct_info).union(*(free_vars(s) for s in sinfos))
    unbound = used - set().union(*(_defined_sizes(s) for s in sinfos))
    if unbound:
        params.append(Var("sizes", ShapeStructInfo(sorted(unbound))))
    out = Var("out", call.struct_info)
    return IRModule({"main": Function(params, SeqExpr([BindingBlock([VarBinding(out, call)])], out))})


@pytest.mark.parametrize("op,sample", list(_cases("good")))
def test_sample_round_trips_through_the_text_format(op, sample):
    sinfos = [_sinfo(a) for a in sample.args]
    roundtrip(_one_call_module(op, sinfos, sample.attrs))
    env = {name: SIZES[name] for s in sinfos for name in free_vars(s)} | sample.sizes
    attrs = substitute_attrs(op(*[Var(f"a{i}", s) for i, s in enumerate(sinfos)], **sample.attrs).attrs, env)
    roundtrip(_one_call_module(op, [substitute(s, env) for s in sinfos], attrs))


def test_substitute_attrs_binds_nested_size_variables():
    n, m = SizeVar("n"), SizeVar("m")
    attrs = {"shape": (n, 2 * m + 1), "nested": {"pads": ((n, 1), (m * n, 0))}, "name": "n", "axis": None}
    assert substitute_attrs(attrs, {"n": 3, "m": 5}) == {
        "shape": (3, 11), "nested": {"pads": ((3, 1), (15, 0))}, "name": "n", "axis": None}
    partly = substitute_attrs(attrs, {"n": 3})
    assert partly["shape"] == (3, 2 * m + 1) and partly["nested"]["pads"][1] == (3 * m, 0)


def test_attributes_are_frozen_and_canonical():
    x = Var("x", TensorStructInfo((2, 3, 4), "float32"))
    call = relax_op.sum(x, [np.int64(0), 2], np.bool_(True))
    assert call.attrs == {"axis": (0, 2), "keepdims": True}
    assert all(type(a) is int for a in call.attrs["axis"]) and type(call.attrs["keepdims"]) is bool
    frozen = relax_op.get_op("relax.clip").complete_attrs({"min": np.float32(0.5), "max": np.int32(2)})
    assert type(frozen["min"]) is float and type(frozen["max"]) is int
    table = Op("test.table", ("x",), infer=lambda args, attrs: args[0], reference=None, attrs={"table": None})
    assert table.complete_attrs({"table": {"a": [np.int64(1), [np.float64(2.0)]]}}) == {"table": {"a": (1, (2.0,))}}
    assert relax_op.zeros(["n", np.int32(4)], "float32").attrs["shape"] == (n := SizeVar("n"), 4)
    assert relax_op.reshape(Var("y", TensorStructInfo(("n", 4), "float32")), (n, -1)).attrs["shape"] == (n, -1)


def test_canonicalize_runs_before_check_attrs_and_errors_name_the_op():
    seen = []
    rec = Op("test.order", ("x",), infer=lambda args, attrs: args[0], reference=None, attrs={"k": 1},
             canonicalize=lambda attrs: seen.append("canonicalize") or dict(attrs, k=attrs["k"] * 2),
             check_attrs=lambda attrs: seen.append(("check", attrs["k"])))
    assert rec.complete_attrs({"k": 3}) == {"k": 6} and seen == ["canonicalize", ("check", 6)]
    bad = Op("test.bad", ("x",), infer=lambda args, attrs: args[0], reference=None, attrs={"k": 1},
             canonicalize=lambda attrs: int("nope"))
    with pytest.raises(ValueError, match=r"^test.bad: invalid literal"):
        bad.complete_attrs({})


@pytest.mark.parametrize("op,sample", list(_cases("bad")))
def test_bad_input_is_refused(op, sample):
    args = [Var(f"a{i}", _sinfo(a)) for i, a in enumerate(sample.args)]
    with pytest.raises((ValueError, TypeError), match=sample.error) as info:
        op(*args, **sample.attrs)
    assert op.name in str(info.value), f"the error should name the op: {info.value}"


def test_a_numpy_array_argument_becomes_a_constant():
    """`None in tensors` compared an array with None element-wise ("truth value ... is ambiguous")."""
    x = Var("x", TensorStructInfo((2, 3), "float32"))
    for arg in (np.ones(3, "float32"), np.ones((), "float32")):
        call = relax_op.add(x, arg)
        np.testing.assert_array_equal(call.args[1].data, arg)
        assert call.struct_info == TensorStructInfo((2, 3), "float32")


def test_a_python_number_in_an_elementwise_op_takes_the_dtype_of_the_tensor_beside_it():
    """As ``x + 1`` does; with TVM's ``R.const`` default (int32) ``relax_op.add(x_int64, 1)`` would not type-check."""
    x = Var("x", TensorStructInfo((2,), "float32"))
    i = Var("i", TensorStructInfo((2,), "int64"))
    c = Var("c", TensorStructInfo((2,), "bool"))
    assert relax_op.add(i, 1).args[1].struct_info.dtype == "int64"
    assert relax_op.multiply(2, x).args[0].struct_info.dtype == "float32"
    assert relax_op.where(c, x, 0).args[2].struct_info.dtype == "float32"  # the bool condition is not the partner
    assert relax_op.take(x, 0).args[1].struct_info.dtype == "int32"  # not elementwise: R.const's int32 index
    with pytest.raises(ValueError, match=r"1.5 is not representable in int64"):
        relax_op.add(i, 1.5)
