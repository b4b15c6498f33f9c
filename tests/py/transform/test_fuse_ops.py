"""FuseOps: anchor + elementwise chains of dataflow blocks become Primitive functions computing the same values;
values read twice and opaque ops break chains; fuse_opt_level 0 fuses nothing."""

from __future__ import annotations

import numpy as np

import relax_mlir as rm
from relax_mlir import transform
from relax_mlir.ir.struct_info import TensorStructInfo
from relax_mlir.models import cnn
from relax_mlir.script import from_source
from relax_mlir.testing import roundtrip
from relax_mlir.training import SGD, CrossEntropyLoss, SetupTrainer, Trainer

SOURCE = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 4), "float32"), w: R.Tensor((4, 4), "float32"), b: R.Tensor((4,), "float32")):
        with R.dataflow():
            lv = R.matmul(x, w)
            lv1 = R.add(lv, b)
            h = R.nn.relu(lv1)
            e = R.exp(h)
            t = R.sum(e)
            u = R.multiply(h, R.const(2.0, "float32"))
            v = R.tanh(u)
            R.output(t, v)
        return (t, v)
"""


def test_chains_become_primitive_functions_with_the_same_values():
    mod = from_source(SOURCE)
    fused = roundtrip(transform.FuseOps()(mod))
    # h is read twice (exp and multiply): the chain matmul-add-relu ends there; multiply-tanh is a chain of its own;
    # exp alone stays (a group of one), sum is opaque
    assert sorted(fused) == ["fused_matmul_add_relu", "fused_multiply_tanh", "main"]
    assert fused["fused_matmul_add_relu"].attrs["Primitive"]
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype("float32") for s in [(2, 4), (4, 4), (4,)]]
    want = rm.interpret(mod, "main", *args)
    for got, expected in zip(rm.interpret(fused, "main", *args), want):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(expected))
    compiled = rm.VirtualMachine(rm.compile(fused))["main"](*args)
    for got, expected in zip(compiled, want):
        np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=1e-5, atol=1e-6)


def test_opt_level_zero_and_plain_blocks_fuse_nothing():
    mod = from_source(SOURCE)
    assert transform.FuseOps(fuse_opt_level=0)(mod) is mod
    with transform.PassContext(opt_level=0):
        assert transform.FuseOps()(mod) is mod
    plain = from_source(SOURCE.replace("        with R.dataflow():\n", "").replace("            R.output(t, v)\n", "")
                        .replace("            ", "        "))
    assert transform.FuseOps()(plain) is plain  # TVM fuses inside dataflow blocks only


def test_a_fused_cnn_trains_the_same():
    setup = SetupTrainer(CrossEntropyLoss(reduction="sum"), SGD(0.01),
                         [TensorStructInfo((4, 10), "float32"), TensorStructInfo((4,), "int64")])
    mod = setup(cnn(4, (1, 8, 8), (2, 4), 10))
    fused = transform.FuseOps()(mod)
    assert any(n.startswith("fused_") for n in fused)
    rng = np.random.default_rng(1)
    batches = [(rng.standard_normal((4, 1, 8, 8)).astype("float32"), rng.integers(0, 10, 4)) for _ in range(3)]
    losses = {}
    for key, m in (("plain", mod), ("fused", fused)):
        trainer = Trainer(m).build()
        trainer.xavier_uniform_init_params(seed=2)
        losses[key] = [float(np.asarray(trainer.update_params(x, y))) for x, y in batches]
    np.testing.assert_allclose(losses["fused"], losses["plain"], rtol=1e-6)


def test_a_value_read_twice_by_the_group_is_one_parameter():
    text = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3,), "float64")):
        with R.dataflow():
            c = R.less(x, x)
            y = R.where(c, x, x)
            R.output(y)
        return y
"""
    fused = roundtrip(transform.FuseOps()(from_source(text)))
    (name,) = [n for n in fused if n != "main"]
    assert [p.name_hint for p in fused[name].params] == ["x"]
    x = np.array([1.0, -2.0, 3.0])
    np.testing.assert_array_equal(rm.interpret(fused, "main", x), rm.interpret(from_source(text), "main", x))
