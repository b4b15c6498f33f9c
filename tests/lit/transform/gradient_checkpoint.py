# RUN: %python %s | filecheck %s
# A 4-layer MLP checkpointed in 2 segments: in the adjoint the markers are gone (the forward runs straight
# through), the second segment's activations are kept, and the backward recomputes the first segment's
# activations (the *_recompute bindings) from x right before their gradients are needed.
from relax_mlir import transform
from relax_mlir.models import deep_mlp
from relax_mlir.testing import roundtrip

mod = deep_mlp(4, width=4, batch=2, segments=2)
print(mod["f"].script("f"))
# CHECK: def f(
# CHECK: lv: R.Tensor((2, 4), dtype="float32") = R.grad.start_checkpoint(x)
# CHECK: lv4: R.Tensor((2, 4), dtype="float32") = R.nn.relu(lv3)
# CHECK-NEXT: lv5: R.Tensor((2, 4), dtype="float32") = R.grad.end_checkpoint(lv4)

after = roundtrip(transform.Gradient("f")(mod))
print(after["f_adjoint"].script("f_adjoint"))
# CHECK: def f_adjoint(
# CHECK-NOT: checkpoint
# CHECK: lv1: R.Tensor((2, 4), dtype="float32") = R.matmul(x, w0)
# CHECK: lv4: R.Tensor((2, 4), dtype="float32") = R.nn.relu(lv3)
# CHECK-NEXT: lv6: R.Tensor((2, 4), dtype="float32") = R.matmul(lv4, w2)
# CHECK: gv_adjoint: R.Tensor((), dtype="float32") = R.ones((), "float32")
# The second segment's activations were kept: its gradients use them directly.
# CHECK: w3_adjoint: R.Tensor((4, 4), dtype="float32") = R.matmul({{.*}}, lv8_adjoint)
# CHECK: w2_adjoint
# The first segment is recomputed from x, once, before its gradients.
# CHECK: lv1_recompute: R.Tensor((2, 4), dtype="float32") = R.matmul(x, w0)
# CHECK-NEXT: lv2_recompute: R.Tensor((2, 4), dtype="float32") = R.nn.relu(lv1_recompute)
# CHECK-NEXT: lv3_recompute: R.Tensor((2, 4), dtype="float32") = R.matmul(lv2_recompute, w1)
# CHECK-NOT: lv4_recompute
# CHECK: w1_adjoint: R.Tensor((4, 4), dtype="float32") = R.matmul({{.*}})
# CHECK: w0_adjoint: R.Tensor((4, 4), dtype="float32") = R.matmul({{.*}})
# CHECK: R.output(gv, w3_adjoint, w2_adjoint, w1_adjoint, w0_adjoint, x_adjoint)
# CHECK-NEXT: return (gv, (x_adjoint, w0_adjoint, w1_adjoint, w2_adjoint, w3_adjoint))
