"""Reduced precision compiled: every bfloat16 convolution and pooling compiles (no abort inside LLVM), bfloat16
results keep subnormals on every host (``backend/bf16.py``), and float64 -> float16 rounds once, as NumPy does
(``legalize/core.py::f64_to_f32_odd``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import relax_mlir
from relax_mlir.script import from_source

ROOT = Path(__file__).resolve().parents[3]
BF16 = np.dtype(ml_dtypes.bfloat16)

#: Output sizes 1..16, square and not (``(o, 17 - o)``): conv2d, conv2d_transpose, max and average pooling, all in
#: one module (one compile), each function against the interpreter; then a float32 convolution through
#: ToMixedPrecision(dtype="bfloat16"). Before the fix LLVM aborted the process on the bf16 conv2d of a 7x7 output and
#: others (``Do not know how to soft promote this operator's operand!``).
SWEEP = '''
import numpy as np, ml_dtypes, relax_mlir
from relax_mlir import op as O
from relax_mlir.ir import BindingBlock, Function, IRModule, SeqExpr, Var, VarBinding
from relax_mlir.ir.struct_info import TensorStructInfo as T

def function(make, shapes, **attrs):
    params = [Var(f"a{i}", T(s, "bfloat16")) for i, s in enumerate(shapes)]
    call = make(*params, **attrs)
    out = Var("out", call.struct_info)
    return Function(params, SeqExpr([BindingBlock([VarBinding(out, call)])], out), call.struct_info), shapes

cases = {}
for h in range(1, 17):
    for w in sorted({h, 17 - h}):
        cases[f"conv_{h}x{w}"] = function(O.nn.conv2d, [(1, 2, h + 2, w + 2), (3, 2, 3, 3)])
        kh, kw = min(h, 3), min(w, 3)  # a smaller kernel where the output is smaller than 3
        cases[f"convt_{h}x{w}"] = function(O.nn.conv2d_transpose, [(1, 2, h - kh + 1, w - kw + 1), (2, 3, kh, kw)])
        cases[f"maxpool_{h}x{w}"] = function(O.nn.max_pool2d, [(2, 3, 2 * h, 2 * w)], pool_size=[2, 2],
                                             strides=[2, 2])
        cases[f"avgpool_{h}x{w}"] = function(O.nn.avg_pool2d, [(2, 3, h + 2, w + 2)], pool_size=[3, 3])
mod = IRModule({name: fn for name, (fn, _) in cases.items()})
vm = relax_mlir.VirtualMachine(relax_mlir.compile(mod))
rng = np.random.default_rng(0)
for name, (_, shapes) in cases.items():
    args = [rng.uniform(-2, 2, s).astype(np.float32).astype(ml_dtypes.bfloat16) for s in shapes]
    got, want = vm[name](*args), relax_mlir.interpret(mod, name, *args)
    assert got.shape == want.shape, (name, got.shape, want.shape)
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2**-7, atol=2**-7, err_msg=name)

# the same abort was reached from a float32 model through ToMixedPrecision(dtype="bfloat16")
from relax_mlir.script import from_source
from relax_mlir.transform import ToMixedPrecision
f32 = from_source("""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3, 9, 9), "float32"), w: R.Tensor((4, 3, 3, 3), "float32")):
        y = R.nn.conv2d(x, w)
        return y
""")
mixed = ToMixedPrecision(dtype="bfloat16")(f32)
x, w = rng.uniform(-2, 2, (2, 3, 9, 9)).astype(np.float32), rng.uniform(-1, 1, (4, 3, 3, 3)).astype(np.float32)
got = relax_mlir.VirtualMachine(relax_mlir.compile(mixed))["main"](x, w)
np.testing.assert_allclose(got, relax_mlir.interpret(mixed, "main", x, w), rtol=1e-6, atol=1e-6)
print("ok", len(cases) + 1)
'''


def test_bf16_convolutions_and_poolings_of_every_small_size_compile_and_match_the_interpreter():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-c", SWEEP], capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0 and proc.stdout.strip().startswith("ok"), \
        f"exit {proc.returncode}:\n{proc.stderr[-3000:]}"


def _module(params: str, body: str) -> object:
    return from_source(f"""
@I.ir_module
class Module:
    @R.function
    def main({params}):
        y = {body}
        return y
""")


def _conv(dtype: str, out: int) -> object:
    x, w = f'R.Tensor((2, 3, {out + 2}, {out + 2}), "{dtype}")', f'R.Tensor((4, 3, 3, 3), "{dtype}")'
    return _module(f"x: {x}, w: {w}", "R.nn.conv2d(x, w)")


def test_a_half_float_convolution_is_scheduled_on_f32_operands():
    """Widened to f32 before the schedules: no f16/bf16 element moves between vector lanes (the im2col
    contraction's peeled tiles did that in bf16, which LLVM could not select), and the values stay the
    interpreter's (f32 sums either way)."""
    from relax_mlir.backend.build import lower_to

    rng = np.random.default_rng(1)
    for dtype in ("bfloat16", "float16"):
        mod = _conv(dtype, 7)
        scheduled = str(lower_to(mod, "scheduled"))
        assert not re.findall(r"vector<[0-9x]*b?f16>", scheduled), dtype
        np_dtype = BF16 if dtype == "bfloat16" else np.float16
        x = rng.uniform(-2, 2, (2, 3, 9, 9)).astype(np.float32).astype(np_dtype)
        w = rng.uniform(-1, 1, (4, 3, 3, 3)).astype(np.float32).astype(np_dtype)
        got = relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"](x, w)
        assert got.dtype == np_dtype
        want = relax_mlir.interpret(mod, "main", x, w)
        np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint16)


def test_float32_to_bfloat16_is_rounded_to_nearest_even_with_subnormals_on_every_host():
    """ml_dtypes' bits (the interpreter's), subnormals included: AVX512-BF16's vcvtneps2bf16 flushed them to 0."""
    mod = _module('x: R.Tensor(("n",), "float32")', 'R.astype(x, "bfloat16")')
    f = relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"]
    edges = np.array([1e-39, -3e-40, 1.1754942e-38, -1.1754942e-38, 2.0**-133, 2.0**-134, 2.0**-134 * 1.5, 0.0, -0.0,
                      1.0 + 2**-8, 1.0 + 3 * 2**-8, 3.4028235e38, 3.3961776e38, np.inf, -np.inf, np.nan, -np.nan],
                     np.float32)
    # 1e-39 -> 1.0102e-39 (a bf16 subnormal); the largest f32 subnormal rounds up to 2**-126; 2**-134 is the tie
    # half-way to the smallest bf16 subnormal (to even: 0), 1.5 * 2**-134 past it; 1 + 2**-8 ties down to 1
    np.testing.assert_array_equal(_bits(f(edges))[:5], [0x000B, 0x8003, 0x0080, 0x8080, 0x0001])
    assert _bits(f(edges))[5:7].tolist() == [0x0000, 0x0001] and float(f(edges)[9]) == 1.0
    rng = np.random.default_rng(0)
    x = np.concatenate([edges, rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32).view(np.float32)])
    with np.errstate(invalid="ignore"):  # (NumPy warns on casting NaN bit patterns)
        want = x.astype(BF16)
    np.testing.assert_array_equal(_bits(f(x)), _bits(want))


def test_bfloat16_arithmetic_keeps_subnormal_results():
    """Each bf16 op is computed in f32 and rounded back in integer ops: ``2**-126 * 0.5`` is the subnormal
    ``2**-127`` (PyTorch's and ml_dtypes' value), not 0; bf16 subnormal operands are read exactly."""
    mod = _module('x: R.Tensor((4,), "bfloat16"), y: R.Tensor((4,), "bfloat16")', "R.add(R.multiply(x, y), x)")
    x = np.array([2.0**-126, 2.0**-130, -(2.0**-133), 1.0], np.float32).astype(BF16)
    y = np.array([0.5, 1.5, 0.5, 2.0**-127], np.float32).astype(BF16)
    got = relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"](x, y)
    # 2**-126 * 0.5 + 2**-126 = 1.5 * 2**-126; 2**-130 * 1.5 + 2**-130 = 2.5 * 2**-130; -2**-133 * 0.5 is the tie
    # -2**-134, rounded to even (-0.0), + -2**-133; 1 + 2**-127 rounds to 1
    want = np.array([1.5 * 2.0**-126, 2.5 * 2.0**-130, -(2.0**-133), 1.0], np.float32).astype(BF16)
    np.testing.assert_array_equal(_bits(got), _bits(want))
    np.testing.assert_array_equal(_bits(got), _bits(relax_mlir.interpret(mod, "main", x, y)))


def test_float64_to_float16_rounds_once_as_numpy():
    """Through f32 rounded to odd: ``1 + 2**-11 + 2**-40`` is 1.001 (NumPy), not the 1.0 that two roundings to
    nearest gave; near-half-way values, overflow, f16 and f32 subnormals, values past the f32 range, NaN and inf
    all as NumPy's astype."""
    mod = _module('x: R.Tensor(("n",), "float64")', 'R.astype(x, "float16")')
    f = relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"]
    assert float(f(np.array([1 + 2**-11 + 2**-40]))[0]) == float(np.float16(1.0009765625 + 2**-40))
    rng = np.random.default_rng(0)
    halves = rng.integers(0, 0x7BFF, 50_000)  # (to the largest finite: the next is inf).astype(np.uint16)
    low, high = halves.view(np.float16).astype(np.float64), (halves + 1).view(np.float16).astype(np.float64)
    mid = (low + high) / 2
    nudge = rng.choice([-1.0, 1.0], mid.size) * np.ldexp(np.maximum(mid, 2.0**-24), rng.integers(-60, -20, mid.size))
    edges = [np.nan, -np.nan, np.inf, -np.inf, 65504.0, 65519.99, 65520.0, 1e39, -1e39, 1e300, 1e-50, -1e-50, 0.0,
             -0.0, 2.0**-25, 2.0**-25 * (1 + 2**-40), 1.5 * 2.0**-24, 3.4028235677973366e38 * (1 + 2**-30), 5e-324]
    x = np.concatenate([mid, mid + nudge, -(mid - nudge), edges])
    with np.errstate(over="ignore"):
        want = x.astype(np.float16)
    got = f(x)
    nan = np.isnan(want)
    np.testing.assert_array_equal(_bits(got)[~nan], _bits(want)[~nan])
    assert np.isnan(got[nan]).all() and (np.signbit(got[nan]) == np.signbit(want[nan])).all()


def test_float64_to_bfloat16_rounds_as_ml_dtypes():
    """Through f32 rounded to nearest, twice as ml_dtypes' astype (the interpreter's) and PyTorch do:
    ``1 + 2**-8 + 2**-40`` is 1.0, the tie ``1 + 2**-8`` rounded to even."""
    mod = _module('x: R.Tensor(("n",), "float64")', 'R.astype(x, "bfloat16")')
    x = np.array([1 + 2**-8 + 2**-40, 1e-39, -1e-40, 1e39, np.inf, 3.0, -0.1])
    with np.errstate(over="ignore"):
        want = x.astype(BF16)
    got = relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"](x)
    np.testing.assert_array_equal(_bits(got), _bits(want))
    assert float(got[0]) == 1.0


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precision_adaptive_average_pooling_averages_in_float32(dtype):
    """The averaging weights were constants of the data's dtype (1/3 is 0.33398 in bfloat16): a mean of nine 3.0s
    was 3.0156. Averaged in float32 and rounded once, each output is the correctly rounded mean (the interpreter's)."""
    mod = from_source(f'''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor((2, 3, 6, 6), "{dtype}")) -> R.Tensor((2, 3, 4, 2), "{dtype}"):
        y = R.nn.adaptive_avg_pool2d(x, output_size=[4, 2])
        return y
''')
    np_dtype = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float16
    x = np.random.default_rng(0).uniform(-4, 4, (2, 3, 6, 6)).astype(np_dtype)
    xs = x.astype(np.float64)
    want = np.empty((2, 3, 4, 2))
    for i in range(4):
        for j in range(2):
            rows = slice(i * 6 // 4, -(-(i + 1) * 6 // 4))
            cols = slice(j * 6 // 2, -(-(j + 1) * 6 // 2))
            want[:, :, i, j] = xs[:, :, rows, cols].mean(axis=(2, 3))
    got = relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"](x)
    # one rounding of a float32 mean of at most 6 values: within one half-ulp of the exact mean, plus float32's error
    np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float32).astype(np_dtype).astype(np.float64))
    np.testing.assert_array_equal(relax_mlir.interpret(mod, "main", x), got)
