"""ToMixedPrecision as TVM's pass: its op categories ("always" products, "follow" elementwise ops, "never" ops such
as softmax) decide which values are float16, and the result has the structure TVM's tests expect
(tests/python/relax/test_transform_to_mixed_precision.py, whose parseable cases all pass through the TVM shim).
Then numerics: converted models compiled stay within float16's rounding of the float32 ones."""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir as rm
from relax_mlir import ir, transform
from relax_mlir.models import cnn, mlp
from relax_mlir.script import from_source

U16 = 2.0 ** -11  # float16's unit roundoff


def _mod(params: str, ret: str, body: str):
    lines = "\n".join("            " + line for line in body.strip().splitlines())
    return from_source(f"""
@I.ir_module
class Module:
    @R.function
    def main({params}) -> {ret}:
        with R.dataflow():
{lines}
        return gv
""")


CONV_PARAMS = 'x: R.Tensor((2, 3, 8, 8), "float32"), w: R.Tensor((4, 3, 3, 3), "float32")'
OUT = 'R.Tensor((2, 4, 6, 6), "float32")'

CONV_RELU = (CONV_PARAMS, 'R.Tensor(ndim=4, dtype="float32")', """
a = R.nn.conv2d(x, w)
gv = R.nn.relu(a)
R.output(gv)
""")
# The product is cast down at once, relu runs in float16, and only the block's output goes back to float32; the
# return type becomes the body's static one (TVM's Expected has it).
CONV_RELU_F32 = (CONV_PARAMS, OUT, """
xl = R.astype(x, "float16")
wl = R.astype(w, "float16")
p = R.nn.conv2d(xl, wl, out_dtype="float32")
a = R.astype(p, "float16")
r = R.nn.relu(a)
gv = R.astype(r, "float32")
R.output(gv)
""")
CONV_RELU_F16 = (CONV_PARAMS, OUT, """
xl = R.astype(x, "float16")
wl = R.astype(w, "float16")
a = R.nn.conv2d(xl, wl, out_dtype="float16")
r = R.nn.relu(a)
gv = R.astype(r, "float32")
R.output(gv)
""")
# x is read by relu too: cast after relu, not at the top; w only by the convolution: cast once at the top.
RELU_CONV_RELU = (CONV_PARAMS, "R.Tensor(ndim=4, dtype=\"float32\")", """
x0 = R.nn.relu(x)
a = R.nn.conv2d(x0, w)
gv = R.nn.relu(a)
R.output(gv)
""")
RELU_CONV_RELU_F32 = (CONV_PARAMS, OUT, """
wl = R.astype(w, "float16")
x0 = R.nn.relu(x)
x0l = R.astype(x0, "float16")
p = R.nn.conv2d(x0l, wl, out_dtype="float32")
a = R.astype(p, "float16")
r = R.nn.relu(a)
gv = R.astype(r, "float32")
R.output(gv)
""")
GEMM_PARAMS = 'x: R.Tensor((2, 8), "float32"), w1: R.Tensor((8, 16), "float32"), w2: R.Tensor((2, 16), "float32")'
# add reads a float32 parameter, so it runs in float32 (the product cast up again), and silu after it too.
GEMM_ADD_SILU = (GEMM_PARAMS, 'R.Tensor(ndim=2, dtype="float32")', """
a = R.matmul(x, w1)
b = R.add(a, w2)
gv = R.nn.silu(b)
R.output(gv)
""")
GEMM_ADD_SILU_F32 = (GEMM_PARAMS, 'R.Tensor((2, 16), "float32")', """
xl = R.astype(x, "float16")
wl = R.astype(w1, "float16")
p = R.matmul(xl, wl, out_dtype="float32")
a = R.astype(p, "float16")
up = R.astype(a, "float32")
b = R.add(up, w2)
gv = R.nn.silu(b)
R.output(gv)
""")
SOFTMAX_PARAMS = 'x: R.Tensor((2, 3, 8, 8), "float32"), w: R.Tensor((3, 3, 3, 3), "float32")'
# softmax is a "never" op: it reads x as it is, so x is cast where the convolution reads it.
CONV_SOFTMAX = (SOFTMAX_PARAMS, 'R.Tensor(ndim=4, dtype="float32")', """
a = R.nn.conv2d(x, w, padding=(1, 1))
s = R.nn.softmax(x, axis=1)
gv = R.add(a, s)
R.output(gv)
""")
CONV_SOFTMAX_F16 = (SOFTMAX_PARAMS, 'R.Tensor((2, 3, 8, 8), "float32")', """
wl = R.astype(w, "float16")
xl = R.astype(x, "float16")
a = R.nn.conv2d(xl, wl, padding=(1, 1), out_dtype="float16")
s = R.nn.softmax(x, axis=1)
up = R.astype(a, "float32")
gv = R.add(up, s)
R.output(gv)
""")
SPLIT_PARAMS = ('x: R.Tensor((1, 4, 8, 8), "float32"), w: R.Tensor((8, 4, 3, 3), "float32"), '
                'bias: R.Tensor((8, 1, 1), "float32")')
SPLIT_RET = 'R.Tensor((1, 4, 7, 7), "float32")'
# A tuple keeps its fields' float16 (TVM's test_tuple_get, its return annotation corrected to the real shape).
SPLIT = (SPLIT_PARAMS, SPLIT_RET, """
c = R.nn.conv2d(x, w, padding=(0, 0, 1, 1))
b = R.add(c, bias)
t = R.split(b, indices_or_sections=2, axis=1)
gv = R.add(t[0], t[1])
R.output(gv)
""")
SPLIT_F16 = (SPLIT_PARAMS, SPLIT_RET, """
xl = R.astype(x, "float16")
wl = R.astype(w, "float16")
c = R.nn.conv2d(xl, wl, padding=(0, 0, 1, 1), out_dtype="float16")
up = R.astype(c, "float32")
b = R.add(up, bias)
t = R.split(b, indices_or_sections=2, axis=1)
t0 = t[0]
t1 = t[1]
gv = R.add(t0, t1)
R.output(gv)
""")
SIG_PARAMS = ('x: R.Tensor((1, 4, 8, 8), "float32"), w: R.Tensor((8, 4, 3, 3), "float32"), '
              'bias: R.Tensor((8,), "float32")')
SIG_RET = 'R.Tensor((1, 8, 6, 6), "float32")'
CONV_BIAS = (SIG_PARAMS, SIG_RET, """
c = R.nn.conv2d(x, w)
r = R.reshape(bias, (1, 8, 1, 1))
gv = R.add(c, r)
R.output(gv)
""")
# fp16_input_names: w and bias arrive in float16, and reshape and add follow them (TVM's test_convert_sig).
CONV_BIAS_SIG = (SIG_PARAMS.replace('w: R.Tensor((8, 4, 3, 3), "float32")', 'w: R.Tensor((8, 4, 3, 3), "float16")')
                 .replace('bias: R.Tensor((8,), "float32")', 'bias: R.Tensor((8,), "float16")'), SIG_RET, """
xl = R.astype(x, "float16")
c = R.nn.conv2d(xl, w, out_dtype="float16")
r = R.reshape(bias, (1, 8, 1, 1))
s = R.add(c, r)
gv = R.astype(s, "float32")
R.output(gv)
""")
CONV_RELU_BF16 = (CONV_PARAMS, OUT, CONV_RELU_F32[2].replace("float16", "bfloat16"))


@pytest.mark.parametrize("before, options, after", [
    (CONV_RELU, {}, CONV_RELU_F32),
    (CONV_RELU, {"out_dtype": "float16"}, CONV_RELU_F16),
    (RELU_CONV_RELU, {}, RELU_CONV_RELU_F32),
    (GEMM_ADD_SILU, {}, GEMM_ADD_SILU_F32),
    (CONV_SOFTMAX, {"out_dtype": "float16"}, CONV_SOFTMAX_F16),
    (SPLIT, {"out_dtype": "float16"}, SPLIT_F16),
    (CONV_BIAS, {"out_dtype": "float16", "fp16_input_names": ["w", "bias"]}, CONV_BIAS_SIG),
    (CONV_RELU, {"dtype": "bfloat16"}, CONV_RELU_BF16),
], ids=["conv2d_relu", "conv2d_relu_f16", "relu_conv2d_relu", "gemm_add_silu", "conv2d_softmax_f16", "tuple_get_f16",
        "convert_sig", "conv2d_relu_bf16"])
def test_the_result_is_tvms(before, options, after):
    got = transform.ToMixedPrecision(**options)(_mod(*before))
    ir.assert_structural_equal(got, _mod(*after))


@pytest.mark.parametrize("big, bias_cast", [(False, True), (True, False)])
def test_a_constant_joins_a_float16_op_only_within_float16s_range(big, bias_cast):
    """TVM's test_conv2d_bias_fp32: a bound bias within 65504 is cast down and the bias addition runs in float16;
    one of 70000 (inf in float16) keeps the reshape and the addition in float32."""
    rng = np.random.default_rng(0)
    bias = rng.uniform(size=8).astype("float32")
    if big:
        bias[0] = 70000
    bound = transform.BindParams("main", {"bias": bias})(_mod(*CONV_BIAS))
    func = transform.ToMixedPrecision(out_dtype="float16")(bound)["main"]
    calls = {b.value.op.name: b.value for b in func.body.blocks[0].bindings if hasattr(b.value, "op")}
    low = "float32" if big else "float16"
    assert calls["relax.reshape"].struct_info.dtype == calls["relax.add"].struct_info.dtype == low
    assert [a.struct_info.dtype for a in calls["relax.add"].args] == [low, low]
    assert calls["relax.nn.conv2d"].struct_info.dtype == "float16"


def test_a_plain_block_gets_the_products_only():
    """relax-mlir's extension (TVM rewrites dataflow blocks only): every value of a plain block keeps its dtype."""
    mod = from_source(f"""
@I.ir_module
class Module:
    @R.function
    def main({CONV_PARAMS}):
        a = R.nn.conv2d(x, w)
        gv = R.nn.relu(a)
        return gv
""")
    func = transform.ToMixedPrecision()(mod)["main"]
    values = {b.var.name_hint: b.value for blk in func.body.blocks for b in blk.bindings}
    assert values["gv"].args[0].struct_info.dtype == "float32"  # relu reads the product cast back to float32
    assert func.ret_struct_info.dtype == "float32"
    conv = next(v for v in values.values() if getattr(v.op, "name", "") == "relax.nn.conv2d")
    assert [a.struct_info.dtype for a in conv.args] == ["float16", "float16"]


def _half(a):
    return np.asarray(a, np.float32).astype(np.float16).astype(np.float64)


def test_a_converted_mlp_compiled_is_within_float16s_rounding():
    """Oracle: NumPy replaying the plan (operands rounded to float16, float32 products rounded to float16, bias
    addition and relu in float16). Compiled code sums in another order, so a result may land one float16 step away:
    tolerance 2^-10 relative. Against float32, every rounding is at most u = 2^-11 of the magnitudes it came from;
    per layer x, w, the product, the bias and the sum are rounded (5u), and relu and later layers do not enlarge an
    error by more than |W| does, so |mixed - exact| <= 5u * layers * (the network on |x|, |W|, |b|), with 6u margin."""
    sizes = (16, 32, 32, 10)
    mod = mlp(8, sizes)
    mixed = transform.ToMixedPrecision()(mod)
    rng = np.random.default_rng(2)
    args = [rng.standard_normal((8, 16)).astype("float32")]
    for a, b in zip(sizes[:-1], sizes[1:]):
        args += [(rng.standard_normal((a, b)) / np.sqrt(a)).astype("float32"), rng.standard_normal(b).astype("float32")]
    got = np.asarray(rm.VirtualMachine(rm.compile(mixed))["backbone"](*args), np.float64)

    h, mag = _half(args[0]), np.abs(args[0]).astype(np.float64)
    for i in range(3):
        w, b = args[1 + 2 * i], args[2 + 2 * i]
        h = _half(_half(h @ _half(w)) + _half(b))
        mag = mag @ np.abs(w) + np.abs(b)
        if i < 2:
            h = np.maximum(h, 0)
    np.testing.assert_allclose(got, h, rtol=2.0 ** -10, atol=2.0 ** -10 * np.abs(h).max())
    exact = np.asarray(rm.interpret(mod, "backbone", *args), np.float64)
    assert np.all(np.abs(got - exact) <= 6 * U16 * 3 * mag)
    assert not np.array_equal(got, exact)  # float16 did take effect


def test_a_converted_cnn_compiled_is_within_float16s_rounding():
    """The CNN: convolutions and the dense layer from float16, batch_norm (a "never" op) in float32. Compiled
    against the interpreter of the same module: one float16 step of the largest logit (sums in another order).
    Against float32: about ten roundings of 2^-11 lie on the longest path, each relative to the magnitudes a sum
    adds (up to ~8x the result in a 3x3x8 convolution), so 10 * 8 * 2^-11 = 4% of the largest logit."""
    mod = cnn(4, (1, 8, 8), (4, 8), 10)
    mixed = transform.ToMixedPrecision()(mod)
    script = mixed.script()
    assert 'dtype="float16") = R.nn.max_pool2d' not in script  # after batch_norm: float32 inputs, float32 pooling
    assert 'out_dtype="float32"' in script
    rng = np.random.default_rng(3)
    args = [rng.standard_normal(p.struct_info.shape).astype("float32") for p in mod["backbone"].params]
    for i, p in enumerate(mod["backbone"].params):
        if p.name_hint.endswith("_var"):  # running variances
            args[i] = np.abs(args[i]) + 0.5
    got = rm.VirtualMachine(rm.compile(mixed))["backbone"](*args)
    want = rm.interpret(mixed, "backbone", *args)
    exact = rm.interpret(mod, "backbone", *args)
    logits, want0, exact0 = (np.asarray(v[0], np.float64) for v in (got, want, exact))
    scale = np.abs(exact0).max()
    np.testing.assert_allclose(logits, want0, rtol=0, atol=2.0 ** -10 * scale)
    np.testing.assert_allclose(logits, exact0, rtol=0, atol=10 * 8 * U16 * scale)
    for g, e in zip(got[1:], exact[1:]):  # the running statistics come from the float16 convolutions
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=0.05, atol=0.05)


@pytest.mark.parametrize("before, after", [(CONV_RELU, CONV_RELU_F32), (GEMM_ADD_SILU, GEMM_ADD_SILU_F32),
                                           (CONV_SOFTMAX, None), (SPLIT, None)])
def test_compiled_equals_the_interpreter_on_tvms_expected_module(before, after):
    """Where TVM's expected module is written above, the interpreter runs it; compiled, the converted module gives
    its values up to one float16 step (float32 sums in another order can round the other way)."""
    mod = _mod(*before)
    mixed = transform.ToMixedPrecision()(mod)
    expected = mixed if after is None else _mod(*after)
    rng = np.random.default_rng(4)
    args = [rng.standard_normal(p.struct_info.shape).astype("float32") for p in mod["main"].params]
    got = np.asarray(rm.VirtualMachine(rm.compile(mixed))["main"](*args), np.float64)
    want = np.asarray(rm.interpret(expected, "main", *args), np.float64)
    np.testing.assert_allclose(got, want, rtol=2.0 ** -10, atol=2.0 ** -10 * np.abs(want).max())
