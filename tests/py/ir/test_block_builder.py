"""BlockBuilder: emitting, naming, normalisation to A-normal form, struct-info inference, misuse errors."""

from __future__ import annotations

import pytest

from relax_mlir import op
from relax_mlir.ir import (BlockBuilder, BlockBuilderError, Call, DataflowBlock, DataflowVar, Function, GlobalVar,
                           TensorStructInfo, TupleStructInfo, Var, const)
from relax_mlir.ir.sym import SizeVar
from relax_mlir.testing import roundtrip


def _x(shape=(2, 3), dtype="float32", name="x"):
    return Var(name, TensorStructInfo(shape, dtype))


def test_emit_infers_struct_info_and_names_like_tvm():
    x = _x(("n", 3))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(op.exp(x))
            b = bb.emit(op.add(a, x))
            gv = bb.emit_output(op.multiply(a, b))
        bb.emit_func_output(gv)
    mod = bb.get()
    assert [a.name_hint, b.name_hint, gv.name_hint] == ["lv", "lv1", "gv"]
    assert isinstance(a, DataflowVar) and not isinstance(gv, DataflowVar)
    assert gv.struct_info == TensorStructInfo((SizeVar("n"), 3), "float32")
    f = mod["main"]
    assert isinstance(f, Function) and isinstance(f.body.blocks[0], DataflowBlock)
    assert f.ret_struct_info == gv.struct_info
    roundtrip(mod)


def test_nested_calls_are_bound_first():
    x = _x()
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(op.add(op.exp(op.negative(x)), const(1.0)))
        bb.emit_func_output(out)
    bindings = bb.get()["main"].body.blocks[0].bindings
    assert [b.value.op.name for b in bindings] == ["relax.negative", "relax.exp", "relax.add"]
    assert all(not isinstance(arg, Call) for b in bindings for arg in b.value.args)
    roundtrip(bb.get())


def test_calls_between_functions_bind_size_variables():
    bb = BlockBuilder()
    y = _x(("n", 4), name="y")
    with bb.function("inner", [y]):
        bb.emit_func_output(bb.emit(op.exp(y)))
    z = _x((6, 4), name="z")
    with bb.function("outer", [z]):
        gv = bb.get_global_var("inner")
        r = bb.emit(Call(gv, [z]))
        bb.emit_func_output(r)
    mod = bb.get()
    assert isinstance(mod["outer"].body.blocks[0].bindings[0].value.op, GlobalVar)
    assert mod["outer"].ret_struct_info == TensorStructInfo((6, 4), "float32")
    roundtrip(mod)


def test_tuple_outputs_and_params_given_at_the_end():
    x, w = _x(), _x((3,), name="w")
    bb = BlockBuilder()
    with bb.function("main"):
        with bb.dataflow():
            a = bb.emit(op.add(x, w))
            gv = bb.emit_output((a, x))
        bb.emit_func_output(gv, params=[x, w])
    f = bb.get()["main"]
    assert f.params == (x, w)
    assert f.ret_struct_info == TupleStructInfo([x.struct_info, x.struct_info])
    roundtrip(bb.get())


def test_misuse_is_reported():
    x = _x()
    bb = BlockBuilder()
    with pytest.raises(BlockBuilderError, match="not inside `with bb.function"):
        bb.emit(op.exp(x))
    with pytest.raises(BlockBuilderError, match="emit_output: only inside a dataflow block"):
        with bb.function("f", [x]):
            bb.emit_output(op.exp(x))
    with pytest.raises(BlockBuilderError, match="close the dataflow block first"):
        with bb.function("g", [x]):
            with bb.dataflow():
                bb.emit_func_output(x)
    with pytest.raises(BlockBuilderError, match="ended without emit_func_output"):
        with bb.function("h", [x]):
            bb.emit(op.exp(x))
    with pytest.raises(BlockBuilderError, match="functions do not nest"):
        with bb.function("i", [x]):
            with bb.function("j", [x]):
                pass
    with pytest.raises(ValueError, match=r"relax.matmul: .*"):
        with bb.function("k", [x]):
            bb.emit(op.matmul(x, x))
