# RUN: %python %s | filecheck %s
# A linear layer written as matmul(x, permute_dims(w)): the gradient with respect to x needs w^T^T, which is
# w itself — no transpose is emitted for it.
from relax_mlir import op, transform
from relax_mlir.ir import BlockBuilder, TensorStructInfo, Var
from relax_mlir.testing import roundtrip

x, w = Var("x", TensorStructInfo((2, 3), "float32")), Var("w", TensorStructInfo((4, 3), "float32"))
bb = BlockBuilder()
with bb.function("f", [x, w]):
    with bb.dataflow():
        wt = bb.emit(op.permute_dims(w), "wt")
        y = bb.emit(op.matmul(x, wt), "y")
        out = bb.emit_output(op.sum(y), "out")
    bb.emit_func_output(out)
print(roundtrip(transform.Gradient("f")(bb.get()))["f_adjoint"].script("f_adjoint"))
# CHECK: y_adjoint: R.Tensor((2, 4), dtype="float32") = R.broadcast_to(out_adjoint, (2, 4))
# CHECK-NEXT: x_adjoint: R.Tensor((2, 3), dtype="float32") = R.matmul(y_adjoint, w)
# CHECK-NEXT: [[XT:[a-z0-9_]+]]: R.Tensor((3, 2), dtype="float32") = R.permute_dims(x, axes=(1, 0))
# CHECK-NEXT: wt_adjoint: R.Tensor((3, 4), dtype="float32") = R.matmul([[XT]], y_adjoint)
# CHECK-NEXT: w_adjoint: R.Tensor((4, 3), dtype="float32") = R.permute_dims(wt_adjoint)
