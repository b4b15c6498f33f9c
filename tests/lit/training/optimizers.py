# RUN: %python %s | filecheck %s
# The optimizer functions as printed: TVM's binding names, constant-first multiplications, `1 - beta` constants
# computed in Decimal, the weight-decay binding only when weight_decay != 0, and num_steps an int64 state.
from relax_mlir.ir import IRModule, TensorStructInfo, Var
from relax_mlir.testing import roundtrip
from relax_mlir.training import SGD, Adam, AdamW, MomentumSGD

x = Var("x", TensorStructInfo((3, 3), "float32"))
y = Var("y", TensorStructInfo((3,), "float32"))


def show(test, opt):
    print(f"TEST: {test}")
    func = opt.init([x, y]).get_function()
    roundtrip(IRModule({opt.name: func}))
    print(func.script())


show("sgd", SGD(0.01))
show("sgd_weight_decay", SGD(0.01, weight_decay=0.02))
show("momentum_nesterov", MomentumSGD(0.01, 0.9, dampening=0.15, weight_decay=0.02, nesterov=True))
show("adam", Adam(0.001, betas=(0.85, 0.99)))
show("adamw", AdamW(0.001, weight_decay=0.01))

# CHECK-LABEL: TEST: sgd
# CHECK: def SGD(
# CHECK-NEXT: params: R.Tuple(R.Tensor((3, 3), dtype="float32"), R.Tensor((3,), dtype="float32")),
# CHECK-NEXT: gradients: R.Tuple(R.Tensor((3, 3), dtype="float32"), R.Tensor((3,), dtype="float32")),
# CHECK-NEXT: optim_states: R.Tuple(R.Tensor((), dtype="int64")),
# CHECK-NEXT: ) -> R.Tuple(R.Tuple(R.Tensor((3, 3), dtype="float32"), R.Tensor((3,), dtype="float32")), R.Tuple(R.Tensor((), dtype="int64"))):
# CHECK-NEXT: R.func_attr({"global_symbol": "SGD"})
# CHECK-NEXT: with R.dataflow():
# CHECK-NEXT: num_steps: R.Tensor((), dtype="int64") = optim_states[0]
# CHECK-NEXT: num_steps_new: R.Tensor((), dtype="int64") = R.add(num_steps, R.const(1, "int64"))
# CHECK-NEXT: x: R.Tensor((3, 3), dtype="float32") = params[0]
# CHECK-NEXT: x_grad: R.Tensor((3, 3), dtype="float32") = gradients[0]
# CHECK-NEXT: lv: R.Tensor((3, 3), dtype="float32") = R.multiply(R.const(0.01, "float32"), x_grad)
# CHECK-NEXT: x_new: R.Tensor((3, 3), dtype="float32") = R.subtract(x, lv)
# CHECK-NEXT: y: R.Tensor((3,), dtype="float32") = params[1]
# CHECK-NEXT: y_grad: R.Tensor((3,), dtype="float32") = gradients[1]
# CHECK-NEXT: lv1: R.Tensor((3,), dtype="float32") = R.multiply(R.const(0.01, "float32"), y_grad)
# CHECK-NEXT: y_new: R.Tensor((3,), dtype="float32") = R.subtract(y, lv1)
# CHECK-NEXT: params_new: R.Tuple(R.Tensor((3, 3), dtype="float32"), R.Tensor((3,), dtype="float32")) = (x_new, y_new)
# CHECK-NEXT: optim_states_new: R.Tuple(R.Tensor((), dtype="int64")) = (num_steps_new,)
# CHECK-NEXT: R.output(params_new, optim_states_new)
# CHECK-NEXT: return (params_new, optim_states_new)

# The coupled weight decay: x_grad_new = wd * x + x_grad, only now that weight_decay != 0.
# CHECK-LABEL: TEST: sgd_weight_decay
# CHECK: x_grad: R.Tensor((3, 3), dtype="float32") = gradients[0]
# CHECK-NEXT: lv: R.Tensor((3, 3), dtype="float32") = R.multiply(R.const(0.02, "float32"), x)
# CHECK-NEXT: x_grad_new: R.Tensor((3, 3), dtype="float32") = R.add(lv, x_grad)
# CHECK-NEXT: lv1: R.Tensor((3, 3), dtype="float32") = R.multiply(R.const(0.01, "float32"), x_grad_new)
# CHECK-NEXT: x_new: R.Tensor((3, 3), dtype="float32") = R.subtract(x, lv1)

# Velocities follow num_steps in the state; 1 - 0.15 is the float32 of exactly 0.85.
# CHECK-LABEL: TEST: momentum_nesterov
# CHECK: def MomentumSGD(
# CHECK: optim_states: R.Tuple(R.Tensor((), dtype="int64"), R.Tensor((3, 3), dtype="float32"), R.Tensor((3,), dtype="float32")),
# CHECK: R.func_attr({"global_symbol": "MomentumSGD"})
# CHECK: x_grad: R.Tensor((3, 3), dtype="float32") = gradients[0]
# CHECK-NEXT: lv: R.Tensor((3, 3), dtype="float32") = R.multiply(R.const(0.02, "float32"), x)
# CHECK-NEXT: x_grad_new: R.Tensor((3, 3), dtype="float32") = R.add(lv, x_grad)
# CHECK-NEXT: x_v: R.Tensor((3, 3), dtype="float32") = optim_states[1]
# CHECK-NEXT: lv1: R.Tensor((3, 3), dtype="float32") = R.multiply(R.const(0.9, "float32"), x_v)
# CHECK-NEXT: lv2: R.Tensor((3, 3), dtype="float32") = R.multiply(R.const(0.85, "float32"), x_grad_new)
# CHECK-NEXT: x_v_new: R.Tensor((3, 3), dtype="float32") = R.add(lv1, lv2)
# CHECK-NEXT: lv3: R.Tensor((3, 3), dtype="float32") = R.multiply(R.const(0.9, "float32"), x_v_new)
# CHECK-NEXT: x_g_nest: R.Tensor((3, 3), dtype="float32") = R.add(x_grad_new, lv3)
# CHECK-NEXT: lv4: R.Tensor((3, 3), dtype="float32") = R.multiply(R.const(0.01, "float32"), x_g_nest)
# CHECK-NEXT: x_new: R.Tensor((3, 3), dtype="float32") = R.subtract(x, lv4)
# CHECK-NEXT: y: R.Tensor((3,), dtype="float32") = params[1]
# CHECK: y_v: R.Tensor((3,), dtype="float32") = optim_states[2]
# CHECK: optim_states_new: {{.*}} = (num_steps_new, x_v_new, y_v_new)

# Adam: the running products of the betas, then m, v, their bias corrections and the step; 1 - 0.85 = 0.15 and
# 1 - 0.99 = 0.01 (their float32 values).
# CHECK-LABEL: TEST: adam
# CHECK: def Adam(
# CHECK: optim_states: R.Tuple(R.Tensor((), dtype="int64"), R.Tensor((), dtype="float32"), R.Tensor((), dtype="float32"), R.Tensor((3, 3), dtype="float32"), R.Tensor((3,), dtype="float32"), R.Tensor((3, 3), dtype="float32"), R.Tensor((3,), dtype="float32")),
# CHECK: with R.dataflow():
# CHECK-NEXT: num_steps: R.Tensor((), dtype="int64") = optim_states[0]
# CHECK-NEXT: num_steps_new: R.Tensor((), dtype="int64") = R.add(num_steps, R.const(1, "int64"))
# CHECK-NEXT: lv: R.Tensor((), dtype="float32") = optim_states[1]
# CHECK-NEXT: beta1_prod: R.Tensor((), dtype="float32") = R.multiply(lv, R.const(0.85, "float32"))
# CHECK-NEXT: lv1: R.Tensor((), dtype="float32") = optim_states[2]
# CHECK-NEXT: beta2_prod: R.Tensor((), dtype="float32") = R.multiply(lv1, R.const(0.99, "float32"))
# CHECK-NEXT: x: R.Tensor((3, 3), dtype="float32") = params[0]
# CHECK-NEXT: x_grad: R.Tensor((3, 3), dtype="float32") = gradients[0]
# CHECK-NEXT: x_m: R.Tensor((3, 3), dtype="float32") = optim_states[3]
# CHECK-NEXT: x_v: R.Tensor((3, 3), dtype="float32") = optim_states[5]
# CHECK-NEXT: lv2: R.Tensor((3, 3), dtype="float32") = R.multiply(R.const(0.85, "float32"), x_m)
# CHECK-NEXT: lv3: R.Tensor((3, 3), dtype="float32") = R.multiply(R.const(0.15, "float32"), x_grad)
# CHECK-NEXT: x_m_new: R.Tensor((3, 3), dtype="float32") = R.add(lv2, lv3)
# CHECK-NEXT: lv4: R.Tensor((3, 3), dtype="float32") = R.multiply(R.const(0.99, "float32"), x_v)
# CHECK-NEXT: lv5: R.Tensor((3, 3), dtype="float32") = R.multiply(x_grad, x_grad)
# CHECK-NEXT: lv6: R.Tensor((3, 3), dtype="float32") = R.multiply(R.const(0.01, "float32"), lv5)
# CHECK-NEXT: x_v_new: R.Tensor((3, 3), dtype="float32") = R.add(lv4, lv6)
# CHECK-NEXT: lv7: R.Tensor((), dtype="float32") = R.subtract(R.const(1.0, "float32"), beta1_prod)
# CHECK-NEXT: x_m_hat: R.Tensor((3, 3), dtype="float32") = R.divide(x_m_new, lv7)
# CHECK-NEXT: lv8: R.Tensor((), dtype="float32") = R.subtract(R.const(1.0, "float32"), beta2_prod)
# CHECK-NEXT: x_v_hat: R.Tensor((3, 3), dtype="float32") = R.divide(x_v_new, lv8)
# CHECK-NEXT: lv9: R.Tensor((3, 3), dtype="float32") = R.sqrt(x_v_hat)
# CHECK-NEXT: lv10: R.Tensor((3, 3), dtype="float32") = R.add(lv9, R.const(1.0e-08, "float32"))
# CHECK-NEXT: lv11: R.Tensor((3, 3), dtype="float32") = R.divide(x_m_hat, lv10)
# CHECK-NEXT: lv12: R.Tensor((3, 3), dtype="float32") = R.multiply(R.const(0.001, "float32"), lv11)
# CHECK-NEXT: x_new: R.Tensor((3, 3), dtype="float32") = R.subtract(x, lv12)
# CHECK: optim_states_new: {{.*}} = (num_steps_new, beta1_prod, beta2_prod, x_m_new, y_m_new, x_v_new, y_v_new)

# AdamW: the parameter (not the gradient) is decayed, by the one constant 1 - lr * wd, and the step starts from it.
# CHECK-LABEL: TEST: adamw
# CHECK: R.func_attr({"global_symbol": "AdamW"})
# CHECK: x_grad: R.Tensor((3, 3), dtype="float32") = gradients[0]
# CHECK-NEXT: x_decayed: R.Tensor((3, 3), dtype="float32") = R.multiply(R.const(0.99999, "float32"), x)
# CHECK-NEXT: x_m: R.Tensor((3, 3), dtype="float32") = optim_states[3]
# CHECK-NOT: x_grad_new
# CHECK: lv3: R.Tensor((3, 3), dtype="float32") = R.multiply(R.const(0.1, "float32"), x_grad)
# CHECK: x_new: R.Tensor((3, 3), dtype="float32") = R.subtract(x_decayed, lv12)
