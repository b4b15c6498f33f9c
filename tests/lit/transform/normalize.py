# RUN: %python %s | filecheck %s
# Normalize binds the nested call of IR built node by node (the text format and the BlockBuilder already
# normalise), in every function, keeping a symbolic size.
from relax_mlir import IRModule, op, transform
from relax_mlir.ir import BindingBlock, Function, SeqExpr, TensorStructInfo, Var, VarBinding

x = Var("x", TensorStructInfo((2, "n"), "float32"))
nested = op.add(op.exp(x), x)  # R.add(R.exp(x), x): not A-normal form
gv = Var("gv", nested.struct_info)
mod = IRModule({"main": Function([x], SeqExpr([BindingBlock([VarBinding(gv, nested)])], gv)),
                "again": Function([x], SeqExpr([], op.sum(op.exp(x))))})
print(transform.Normalize()(mod).script())
# CHECK-LABEL: def main(
# CHECK: [[E:gv[_0-9]*]]: R.Tensor((2, "n"), dtype="float32") = R.exp(x)
# CHECK-NEXT: [[G:gv[_0-9]*]]: R.Tensor((2, "n"), dtype="float32") = R.add([[E]], x)
# CHECK-NEXT: return [[G]]
# CHECK-LABEL: def again(
# CHECK: [[E2:gv[_0-9]*]]: R.Tensor((2, "n"), dtype="float32") = R.exp(x)
# CHECK-NEXT: return R.sum([[E2]])
