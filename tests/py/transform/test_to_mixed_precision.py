"""ToMixedPrecision: compiled, the low-precision module computes what the interpreter computes on it, and differs
from the float32 original by no more than rounding each operand and each stored product to float16 (or bfloat16)
can cause."""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir as rm
from relax_mlir import transform
from relax_mlir.ir.struct_info import TensorStructInfo
from relax_mlir.models import mlp
from relax_mlir.script import from_source
from relax_mlir.testing import roundtrip
from relax_mlir.training import SGD, CrossEntropyLoss, SetupTrainer, Trainer

#: Unit roundoff of each low-precision type (round to nearest: half the spacing at 1).
UNIT = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}

SOURCE = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((8, 32), "float32"), w: R.Tensor((32, 16), "float32"), k: R.Tensor((4, 3, 3, 3), "float32"),
             img: R.Tensor((2, 3, 6, 6), "float32")):
        with R.dataflow():
            y = R.matmul(x, w)
            z = R.nn.relu(y)
            c = R.nn.conv2d(img, k, padding=(1, 1, 1, 1))
            s = R.sum(c)
            R.output(z, s)
        return (z, s)
"""


def _args(seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype("float32") for s in [(8, 32), (32, 16), (4, 3, 3, 3), (2, 3, 6, 6)]]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("out_dtype", ["float32", "low"])
def test_compiled_matches_the_interpreter_and_rounding_bounds(dtype, out_dtype):
    out_dtype = dtype if out_dtype == "low" else out_dtype
    mod = from_source(SOURCE)
    mixed = roundtrip(transform.ToMixedPrecision(out_dtype=out_dtype, dtype=dtype)(mod))
    assert f'R.astype(x, "{dtype}")' in mixed.script() and f'out_dtype="{out_dtype}"' in mixed.script()
    args = _args()
    want_mixed = rm.interpret(mixed, "main", *args)
    got = rm.VirtualMachine(rm.compile(mixed))["main"](*args)
    for g, w in zip(got, want_mixed):  # float32 sums in another order
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)
    exact = rm.interpret(mod, "main", *args)
    x, w = (a.astype(np.float64) for a in args[:2])
    u = UNIT[dtype]
    # |x'w' - xw| <= (2u + u^2) |x||w| per product, summed over K = 32; float32 sums add 32 * 2^-24 of the same;
    # the product is stored in the low precision either way (rounded by the matmul itself or cast down at once, as
    # TVM's pass does, before relu reads it in the low precision), one more rounding, u of the result.
    bound = (2 * u + u * u + 32 * 2.0 ** -24) * (np.abs(x) @ np.abs(w)) + u * np.abs(x @ w)
    z_diff = np.abs(np.asarray(want_mixed[0], np.float64) - np.asarray(exact[0], np.float64))
    assert np.all(z_diff <= bound + 1e-30), float((z_diff - bound).max())
    assert abs(float(want_mixed[1]) - float(exact[1])) < 0.02 * max(1.0, abs(float(exact[1])))


def test_low_precision_inputs_are_taken_as_they_are():
    mod = from_source(SOURCE)
    mixed = transform.ToMixedPrecision(fp16_input_names=["x"])(mod)
    params = {p.name_hint: p.struct_info.dtype for p in mixed["main"].params}
    assert params == {"x": "float16", "w": "float32", "k": "float32", "img": "float32"}
    assert 'R.astype(x, "float16")' not in mixed.script()
    args = _args()
    args[0] = args[0].astype(np.float16)
    got = rm.VirtualMachine(rm.compile(mixed))["main"](*args)
    want = rm.interpret(mixed, "main", *args)
    np.testing.assert_allclose(np.asarray(got[0]), np.asarray(want[0]), rtol=1e-5, atol=1e-5)
    with pytest.raises(TypeError, match="expected a list of input names"):
        transform.ToMixedPrecision(fp16_input_names="x")
    with pytest.raises(ValueError, match="dtype must be one of float16, bfloat16"):
        transform.ToMixedPrecision(dtype="int8")


def test_a_mixed_precision_training_step_trains_like_float32():
    """The tutorial MLP's training module, mixed: the same losses as in float32 to float16's rounding."""
    setup = SetupTrainer(CrossEntropyLoss(reduction="sum"), SGD(0.01),
                         [TensorStructInfo((16, 10), "float32"), TensorStructInfo((16,), "int64")])
    mod = setup(mlp(16, (64, 32, 10)))
    mixed = transform.ToMixedPrecision()(mod)
    assert "float16" in mixed["update_params"].script()
    rng = np.random.default_rng(5)
    batches = [(rng.standard_normal((16, 64)).astype("float32"), rng.integers(0, 10, 16)) for _ in range(4)]
    losses = {}
    for key, m in (("fp32", mod), ("mixed", mixed)):
        trainer = Trainer(m).build()
        trainer.xavier_uniform_init_params(seed=1)
        losses[key] = [float(np.asarray(trainer.update_params(x, y))) for x, y in batches]
    # a summed loss of ~40 from 16x64x32 products with float16 operands: a relative 1e-2 holds with a wide margin
    np.testing.assert_allclose(losses["mixed"], losses["fp32"], rtol=1e-2)
    assert losses["mixed"] != losses["fp32"]  # the casts did take effect


_FLOAT64_OUT = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 8), "float32"), w: R.Tensor((8, 3), "float32")):
        with R.dataflow():
            a = R.matmul(x, w, out_dtype="float64")
            b = R.multiply(a, R.const(2.0, "float64"))
            R.output(b)
        return b
"""


@pytest.mark.parametrize("options", [{}, {"out_dtype": "float16"}, {"fp16_input_names": ["w"]}])
def test_an_explicit_out_dtype_keeps_the_results_dtype(options):
    # the pass's out_dtype replaced float64, and a (declared float64) was bound to a float32 product: not well formed
    mixed = transform.ToMixedPrecision(**options)(from_source(_FLOAT64_OUT))
    a = next(b for b in mixed["main"].body.blocks[-1].bindings if b.var.name_hint == "a")
    assert a.var.struct_info == a.value.struct_info == TensorStructInfo((4, 3), "float64")
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((4, 8)).astype("float32"), rng.standard_normal((8, 3)).astype("float32")
    w_in = w.astype("float16") if options.get("fp16_input_names") else w
    low = x.astype("float16").astype("float32") @ w.astype("float16").astype("float32")
    if options.get("out_dtype") == "float16":
        low = low.astype("float16")
    for got in (rm.interpret(mixed, "main", x, w_in), rm.VirtualMachine(rm.compile(mixed))["main"](x, w_in)):
        assert np.asarray(got).dtype == np.float64
        np.testing.assert_allclose(np.asarray(got), 2 * low.astype("float64"), rtol=1e-6, atol=1e-6)
