"""The ExecutionEngine runtime: hand-written linalg-on-tensors modules compiled and compared to NumPy.

Tolerances: float32 results are compared with a float64 NumPy reference at rtol=1e-4, atol=1e-4 (sums of at
most 784 products of values in [-1, 1]); f64 at rtol=1e-12; f16/bf16 at their precision (rtol 2e-3 / 1e-2);
integers and booleans exactly.
"""

from __future__ import annotations

import functools
import threading

import ml_dtypes
import numpy as np
import pytest

from relax_mlir.backend.pipeline import PipelineOptions
from relax_mlir.backend.runtime import ArgumentError, CompiledModule, compile_module
from relax_mlir.backend.signature import FunctionSignature, TensorSpec

from . import linalg_samples as S

OPT_LEVELS = [0, 2]
RNG = np.random.default_rng(0)


@functools.lru_cache(maxsize=None)
def build(text: str, opt_level: int = 2, signature: FunctionSignature | None = None) -> CompiledModule:
    return compile_module(text, signature, options=PipelineOptions(opt_level=opt_level))


def rand(*shape: int, dtype=np.float32) -> np.ndarray:
    return RNG.uniform(-1, 1, size=shape).astype(dtype)


def close32(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


# --- numbers ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("opt", OPT_LEVELS)
def test_matmul(opt):
    x, w = rand(64, 784), rand(784, 128)
    close32(build(S.MATMUL, opt).main(x, w), x.astype(np.float64) @ w)


@pytest.mark.parametrize("opt", OPT_LEVELS)
def test_matmul_uneven_transposed_and_batched(opt):
    mod = build(S.MATMUL_SHAPES, opt)
    a, b = rand(100, 50), rand(50, 70)
    close32(mod.uneven(a, b), a.astype(np.float64) @ b)
    a, b = rand(3, 5), rand(5, 10)
    close32(mod.small(a, b), a.astype(np.float64) @ b)
    x, g = rand(64, 784), rand(64, 128)
    close32(mod.xt_g(x, g), x.T.astype(np.float64) @ g)
    a, b = rand(3, 20, 16, dtype=np.float64), rand(3, 16, 40, dtype=np.float64)
    # A floor of 16 ulps of the largest sum of |products|: a sum that cancels near 0 keeps its terms' rounding, which
    # the host's summation order moves (rtol alone was 0.2 of the way to failing, 0 or 0.15 with other widths).
    terms = (np.abs(a) @ np.abs(b)).max()
    np.testing.assert_allclose(mod.batched(a, b), a @ b, rtol=1e-12, atol=16 * np.finfo(np.float64).eps * terms)


@pytest.mark.parametrize("opt", OPT_LEVELS)
def test_bias_relu_generic(opt):
    x, b = rand(64, 128), rand(128)
    np.testing.assert_array_equal(build(S.BIAS_RELU, opt).main(x, b), np.maximum(x + b, 0))


@pytest.mark.parametrize("opt", OPT_LEVELS)
def test_softmax_reductions(opt):
    x = rand(64, 10) * 10
    e = np.exp(x - x.max(axis=1, keepdims=True))
    close32(build(S.SOFTMAX, opt).main(x), e / e.sum(axis=1, keepdims=True))


@pytest.mark.parametrize("opt", OPT_LEVELS)
def test_two_results_and_zero_d(opt):
    p, t, scale = rand(8, 16), rand(8, 16), np.array(0.5, np.float32)
    d, s = build(S.TWO_RESULTS, opt).main(p, t, scale)
    close32(d, p - t)
    assert s.shape == () and s.dtype == np.float32
    close32(s, 0.5 * ((p.astype(np.float64) - t) ** 2).sum())


DYN_SIG = FunctionSignature(
    "main",
    params=(TensorSpec(("n", 4), "float32", "x"), TensorSpec((4,), "float32", "w")),
    results=(TensorSpec(("n", 4), "float32", "y"), TensorSpec((), "float32", "total")),
)


@pytest.mark.parametrize("opt", OPT_LEVELS)
@pytest.mark.parametrize("n", [0, 1, 7, 64])
def test_dynamic_shape(opt, n):
    x, w = rand(n, 4), rand(4)
    y, total = build(S.DYNAMIC, opt, DYN_SIG).main(x, w)
    assert y.shape == (n, 4)
    close32(y, x * w)
    close32(total, (x.astype(np.float64) * w).sum())


@pytest.mark.parametrize("opt", OPT_LEVELS)
@pytest.mark.parametrize("n", [1, 8, 13, 64])
def test_dynamic_batch_matmul(opt, n):
    sig = FunctionSignature("main", (TensorSpec(("n", 128), "float32", "x"), TensorSpec((128, 10), "float32", "w")),
                            (TensorSpec(("n", 10), "float32"),))
    x, w = rand(n, 128), rand(128, 10)
    close32(build(S.DYNAMIC_MATMUL, opt, sig).main(x, w), x.astype(np.float64) @ w)


def test_result_shape_expression():
    sig = FunctionSignature("main", (TensorSpec(("n",), "float32", "a"), TensorSpec(("m",), "float32", "b")),
                            (TensorSpec(("n + m",), "float32", "ab"),))
    mod = build(S.CONCAT, 2, sig)
    a, b = rand(5), rand(3)
    np.testing.assert_array_equal(mod.main(a, b), np.concatenate([a, b]))
    np.testing.assert_array_equal(mod.main(a[:0], b), b)
    # the copies into the result's two strided halves are loops (pipeline.strided_copies_to_linalg), not calls
    # of the runner library's element-at-a-time memrefCopy
    assert "memrefCopy" not in mod.llvm_text


def test_parameter_shape_expression_is_checked():
    sig = FunctionSignature("main", (TensorSpec(("n",), "float32", "a"), TensorSpec(("2 * n",), "float32", "b")),
                            (TensorSpec(("3 * n",), "float32"),))
    mod = build(S.CONCAT, 2, sig)
    np.testing.assert_array_equal(mod.main(np.ones(2, np.float32), np.zeros(4, np.float32)), [1, 1, 0, 0, 0, 0])
    with pytest.raises(ArgumentError, match=r"^main: parameter 'b' \(#1\): expected shape \(2 \* n,\) = \(4,\), "
                                            r"got \(3,\)$"):
        mod.main(np.ones(2, np.float32), np.zeros(3, np.float32))


def test_object_file(tmp_path):
    path = tmp_path / "k.o"
    build(S.BIAS_RELU).dump_object(str(path))
    assert path.read_bytes()[:4] == b"\x7fELF"


@pytest.mark.parametrize("opt", OPT_LEVELS)
def test_dtypes(opt):
    mod = build(S.DTYPES, opt)
    x, y = np.arange(8, dtype=np.float32), np.full(8, 3.5, np.float32)
    m = np.array([1, 0, 1, 0, 1, 0, 1, 0], bool)
    lt, xo = mod.less_xor(x, y, m)
    assert lt.dtype == np.bool_ and xo.dtype == np.bool_
    np.testing.assert_array_equal(lt, x < y)
    np.testing.assert_array_equal(xo, (x < y) ^ m)
    assert set(np.unique(xo.view(np.uint8))) <= {0, 1}  # one byte per boolean, 0 or 1, as NumPy stores them

    h = np.linspace(0, 1, 5).astype(np.float16)
    b = np.linspace(-1, 1, 5).astype(ml_dtypes.bfloat16)
    hr, br = mod.half(h, b)
    assert hr.dtype == np.float16 and br.dtype == ml_dtypes.bfloat16
    np.testing.assert_allclose(hr.astype(np.float32), np.exp(h.astype(np.float32) ** 2), rtol=2e-3)
    np.testing.assert_allclose(br.astype(np.float32), np.tanh(2 * b.astype(np.float32)), rtol=1e-2, atol=1e-2)

    a8 = np.array([100, -100, 5, 6, 7, 127], np.int8)
    a16 = np.array([300, 2, 3, -4, 5, 6], np.int16)
    a32 = np.arange(6, dtype=np.int32)
    a64 = np.array([-7, -6, 5, 6, 7, 8], np.int64)
    r8, r16, r32, r64 = mod.ints(a8, a16, a32, a64)
    np.testing.assert_array_equal(r8, a8 + a8)  # wraps like NumPy
    np.testing.assert_array_equal(r16, a16 * a16)
    np.testing.assert_array_equal(r32, np.zeros(6, np.int32))
    np.testing.assert_array_equal(r64, a64 // 3)
    np.testing.assert_array_equal(mod.double(np.array([4.0, 9.0, 2.0])), np.sqrt([4.0, 9.0, 2.0]))
    r, mask = mod.mask_const(np.arange(4, dtype=np.float32) + 1)
    np.testing.assert_array_equal(r, [1, 0, 3, 4])
    np.testing.assert_array_equal(mask, [True, False, True, True])


def test_unsigned_bytes_through_a_signature():
    sig = FunctionSignature("bytes", (TensorSpec((6,), "uint8", "a"),), (TensorSpec((6,), "uint8"),))
    mod = compile_module(S.DTYPES, sig)
    a = np.array([0, 1, 2, 200, 255, 128], np.uint8)
    np.testing.assert_array_equal(mod.bytes(a), a // 2)  # divui: unsigned semantics on the i8 storage


def test_inputs_are_never_written():
    x = np.arange(4, dtype=np.float32)
    y = build(S.IN_PLACE).main(x)
    np.testing.assert_array_equal(y, [0, 2, 4, 6])
    np.testing.assert_array_equal(x, [0, 1, 2, 3])


def test_out_parameter_reuses_the_buffer():
    mod = build(S.BIAS_RELU)
    x, b = rand(64, 128), rand(128)
    out = np.empty((64, 128), np.float32)
    assert mod.main(x, b, out=out) is out
    np.testing.assert_array_equal(out, np.maximum(x + b, 0))
    y, s = build(S.DYNAMIC, 2, DYN_SIG).main(rand(5, 4), rand(4), out=(np.empty((5, 4), np.float32),
                                                                       np.empty((), np.float32)))
    assert y.shape == (5, 4) and s.shape == ()


def test_views_and_subclasses_are_accepted_without_copies():
    mod = build(S.BIAS_RELU)
    big = rand(80, 128)
    view = big[8:72]  # C-contiguous, starts 8 rows in
    b = rand(128)
    np.testing.assert_array_equal(mod.main(view, b), np.maximum(view + b, 0))

    class Tagged(np.ndarray):
        pass

    np.testing.assert_array_equal(mod.main(view.view(Tagged), b), np.maximum(view + b, 0))


def test_threads_share_one_function():
    mod = build(S.BIAS_RELU)
    b = rand(128)
    inputs = [rand(64, 128) for _ in range(4)]
    failures = []

    def work(x):
        for _ in range(300):
            if not np.array_equal(mod.main(x, b), np.maximum(x + b, 0)):
                failures.append(1)

    threads = [threading.Thread(target=work, args=(x,)) for x in inputs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def test_no_leak_over_10000_calls():
    f = build(S.ONE_MEGABYTE).main
    x = rand(256, 1024)
    for _ in range(100):
        f(x)
    before = _rss_bytes()
    for _ in range(10_000):
        y = f(x)
    grown = _rss_bytes() - before
    assert y[3, 5] == 2 * x[3, 5]
    assert grown < 5 * 2**20, f"RSS grew by {grown / 2**20:.1f} MiB over 10,000 calls"


# --- errors ----------------------------------------------------------------------------------------------
MM_SIG = FunctionSignature("main", (TensorSpec((64, 784), "float32", "x"), TensorSpec((784, 128), "float32", "w")),
                           (TensorSpec((64, 128), "float32", "y"),))


def _misaligned(shape):
    raw = np.zeros(int(np.prod(shape)) * 4 + 1, np.uint8)
    return raw[1:].view(np.float32).reshape(shape)


X, W = rand(64, 784), rand(784, 128)
BAD_CALLS = {
    "count": ((X,), "main: expected 2 arguments (x, w), got 1"),
    "ndim": ((X.reshape(64, 784, 1), W), "main: parameter 'x' (#0): expected shape (64, 784), got (64, 784, 1)"),
    "static dim": ((rand(32, 784), W), "main: parameter 'x' (#0): expected shape (64, 784), got (32, 784)"),
    "scalar": ((np.float32(1), W), "main: parameter 'x' (#0): expected shape (64, 784), got ()"),
    "complex": ((X.astype(np.complex64), W), "main: parameter 'x' (#0): expected dtype float32, got complex64"),
    "strings": ((np.full((64, 784), "a"), W), "main: parameter 'x' (#0): expected dtype float32, got str32"),
    "ragged": (([[1.0], [1.0, 2.0]], W), "main: parameter 'x' (#0): expected an array of float32, got a list NumPy "
                                         "cannot convert"),
    "objects": (([object()], W), "main: parameter 'x' (#0): expected an array of float32, got a list of object"),
}


@pytest.mark.parametrize("kind", list(BAD_CALLS))
def test_bad_argument(kind):
    args, message = BAD_CALLS[kind]
    with pytest.raises(ArgumentError) as info:
        build(S.MATMUL, 2, MM_SIG).main(*args)
    assert str(info.value).startswith(message)
    assert isinstance(info.value, ValueError) and isinstance(info.value, TypeError)


# Converted by one copy (docs/arguments.md): the call gives what the exact array gives, the argument is unchanged.
CONVERTED = {
    "list": lambda x: x.tolist(),
    "float64": lambda x: x.astype(np.float64),
    "float16": lambda x: x.astype(np.float16),
    "byte order": lambda x: x.astype(">f4"),
    "Fortran order": np.asfortranarray,
    "strided view": lambda x: np.repeat(x, 2, axis=1)[:, ::2],
    "misaligned": lambda x: _copy_into(_misaligned(x.shape), x),
}


def _copy_into(dst, src):
    dst[...] = src
    return dst


@pytest.mark.parametrize("kind", list(CONVERTED))
def test_convertible_arguments_are_converted_once(kind):
    f = build(S.MATMUL, 2, MM_SIG).main
    x = CONVERTED[kind](X)
    before = np.array(x, copy=True)
    want = f(np.asarray(x, dtype=np.float32), W)  # the exact array: NumPy's own cast is the oracle
    np.testing.assert_array_equal(f(x, W), want)
    np.testing.assert_array_equal(np.asarray(x), before)


def test_every_bad_parameter_is_reported_at_once():
    with pytest.raises(ArgumentError, match=r"parameter 'x' \(#0\).*; main: parameter 'w' \(#1\): expected dtype"):
        build(S.MATMUL, 2, MM_SIG).main(rand(32, 784), W.astype(np.complex64))


def _read_only(x):
    a = np.empty((64, 128), np.float32)
    a.flags.writeable = False
    return a


def _alias_of(x):
    return x.reshape(-1)[: 64 * 128].reshape(64, 128)  # the first 8192 floats of x


BAD_OUTS = {
    "shape": (lambda x: np.empty((64, 127), np.float32),
              r"out\[0\] \(result 'y'\): expected shape \(64, 128\), got \(64, 127\)"),
    "read-only": (_read_only, r"out\[0\] \(result 'y'\): expected a writeable array"),
    "overlap": (_alias_of, r"out\[0\] \(result 'y'\) overlaps parameter 'x'"),
    "count": (lambda x: (np.empty((64, 128), np.float32),) * 2, r"out= needs 1 arrays, got 2"),
}


def test_an_array_is_not_a_sequence_of_outputs():
    with pytest.raises(ArgumentError, match=r"^main: out= needs 2 arrays, got 1$"):
        build(S.DYNAMIC, 2, DYN_SIG).main(rand(2, 4), rand(4), out=np.empty((2, 2, 4), np.float32))


@pytest.mark.parametrize("kind", list(BAD_OUTS))
def test_bad_out(kind):
    make, pattern = BAD_OUTS[kind]
    with pytest.raises(ArgumentError, match="^main: " + pattern):
        build(S.MATMUL, 2, MM_SIG).main(X, W, out=make(X))


def test_signature_must_fit_the_function():
    with pytest.raises(ValueError, match=r"main: parameter 'x' \(#0\): signature gives dimension 1 = 100, the "
                                         r"function has tensor<64x784xf32>"):
        compile_module(S.MATMUL, FunctionSignature("main", (TensorSpec((64, 100), "float32", "x"), MM_SIG.params[1]),
                                                   MM_SIG.results))
    with pytest.raises(ValueError, match=r"signature gives dtype float64"):
        compile_module(S.MATMUL, FunctionSignature("main", (TensorSpec((64, 784), "float64", "x"), MM_SIG.params[1]),
                                                   MM_SIG.results))
    with pytest.raises(ValueError, match=r"main: result #0 has the dynamic type tensor<\?x4xf32>: pass a "
                                         r"FunctionSignature"):
        compile_module(S.DYNAMIC)
    with pytest.raises(ValueError, match=r"uses symbols \['m'\] that no parameter dimension binds"):
        FunctionSignature("main", (TensorSpec(("n",), "float32"),), (TensorSpec(("m",), "float32"),))
    with pytest.raises(ValueError, match=r"shape expression 'n \*\* 2': Pow is not allowed"):
        TensorSpec(("n ** 2",), "float32")
    with pytest.raises(ValueError, match=r"signatures given for unknown functions \['nope'\]"):
        compile_module(S.MATMUL, FunctionSignature("nope", (), ()))


def test_module_lookup_errors_name_the_functions():
    mod = build(S.MATMUL_SHAPES)
    assert sorted(mod.functions) == ["batched", "small", "uneven", "xt_g"]
    with pytest.raises(AttributeError, match="no public function 'main'; functions: uneven, small"):
        mod.main
    assert "uneven(arg0: (100, 50) float32, arg1: (50, 70) float32)" in repr(mod.uneven)


def test_exact_arrays_take_the_plan_and_the_rest_the_general_route(monkeypatch):
    """The one call path (callpath.py): arrays that need nothing are checked and written by the signature's
    plan, with no generated code; a read-only, strided, misaligned or wrongly typed one goes to the general
    route (the argument policy), and both give NumPy's values."""
    import relax_mlir.backend.callpath as callpath

    sig = FunctionSignature("main", (TensorSpec(("n", 128), "float32", "x"), TensorSpec((128, 10), "float32", "w")),
                            (TensorSpec(("n", 10), "float32"),))
    f = build(S.DYNAMIC_MATMUL, 2, sig)["main"]
    x, w = rand(5, 128), rand(128, 10)
    general = f._call_general
    taken = []
    monkeypatch.setattr(f, "_call_general", lambda args, out: taken.append(1) or general(args, out))
    close32(f(x, w), x.astype(np.float64) @ w)
    out = np.empty((5, 10), np.float32)
    f(x, w, out=out)
    close32(out, x.astype(np.float64) @ w)
    assert taken == []  # both through the plan
    readonly = x.copy()
    readonly.flags.writeable = False
    strided = np.repeat(x, 2, axis=0)[::2]
    raw = np.empty(x.nbytes + 1, np.uint8)
    misaligned = raw[1:].view(np.float32).reshape(x.shape)
    assert not misaligned.flags.aligned
    misaligned[...] = x
    for odd in (readonly, strided, misaligned, x.astype(np.float64), x.tolist()):
        close32(f(odd, w), x.astype(np.float64) @ w)
    assert len(taken) == 5
    with pytest.raises(ArgumentError, match="overlaps"):
        f(x, w, out=np.lib.stride_tricks.as_strided(x, (5, 10), (512, 4)))  # writes where x is read
    assert callpath.data_address(readonly) == readonly.__array_interface__["data"][0]
    assert not hasattr(callpath, "exec")  # nothing generated: there is no source to exec


@pytest.mark.parametrize("native", [True, False], ids=["native checks", "python checks"])
def test_static_plan_native_and_python_checks_agree(monkeypatch, native):
    """With static shapes the plan's checks run in the native module (_callpath.c, built at install) or, without
    it, in Python: the same arrays take the plan, the same ones the general route, with the same values."""
    import relax_mlir.backend.callpath as callpath

    assert callpath._native is not None, "relax_mlir._callpath was not built (pip install -e . builds it)"
    sig = FunctionSignature("main", (TensorSpec((5, 128), "float32", "x"), TensorSpec((128, 10), "float32", "w")),
                            (TensorSpec((5, 10), "float32"),))
    f = build(S.DYNAMIC_MATMUL, 2, sig)["main"]
    plan_native = f._plan.native
    assert plan_native is not None
    if not native:
        monkeypatch.setattr(f._plan, "native", None)
    x, w = rand(5, 128), rand(128, 10)
    general = f._call_general
    taken = []
    monkeypatch.setattr(f, "_call_general", lambda args, out: taken.append(1) or general(args, out))
    close32(f(x, w), x.astype(np.float64) @ w)
    assert taken == []
    readonly = x.copy()
    readonly.flags.writeable = False
    raw = np.empty(x.nbytes + 1, np.uint8)
    misaligned = raw[1:].view(np.float32).reshape(x.shape)
    misaligned[...] = x

    class Sub(np.ndarray):
        pass

    odd = [readonly, np.repeat(x, 2, axis=0)[::2], misaligned, x.astype(np.float64), x.tolist(), x.view(Sub),
           np.asfortranarray(x)]
    for a in odd:
        close32(f(a, w), x.astype(np.float64) @ w)
    assert len(taken) == len(odd)
    with pytest.raises(ArgumentError, match=r"x.*shape|shape.*x"):
        f(x[:4], w)
    with pytest.raises(ArgumentError):
        f(x, w[:, :9])
    assert len(taken) == len(odd) + 2


@pytest.mark.parametrize("native", [True, False], ids=["native checks", "python checks"])
@pytest.mark.parametrize("kind", list(BAD_OUTS))
def test_bad_out_tuples_are_refused_by_both_checks(monkeypatch, native, kind):
    """A tuple of out= arrays (how the Trainer passes its buffers) is checked in the native plan's one call, or
    in Python without it: a bad one goes to the general route, which raises the same error as for an array."""
    f = build(S.MATMUL, 2, MM_SIG).main
    assert f._plan.native_outs, "relax_mlir._callpath was not built (pip install -e . builds it)"
    if not native:
        monkeypatch.setattr(f._plan, "native", None)
    make, pattern = BAD_OUTS[kind]
    outs = make(X)
    with pytest.raises(ArgumentError, match="^main: " + pattern):
        f(X, W, out=outs if isinstance(outs, tuple) else (outs,))


@pytest.mark.parametrize("native", [True, False], ids=["native checks", "python checks"])
def test_out_tuples_take_the_plan_and_may_not_overlap_each_other(monkeypatch, native):
    f = build(S.TWO_RESULTS).main
    if not native:
        monkeypatch.setattr(f._plan, "native", None)
    general = f._call_general
    taken = []
    monkeypatch.setattr(f, "_call_general", lambda args, out: taken.append(1) or general(args, out))
    p, t, scale = rand(8, 16), rand(8, 16), np.array(0.5, np.float32)
    want_d = p.astype(np.float64) - t
    outs = (np.empty((8, 16), np.float32), np.empty((), np.float32))
    assert f(p, t, scale, out=outs) == outs and taken == []  # the same arrays back, through the plan
    close32(outs[0], want_d)
    close32(outs[1], 0.5 * (want_d ** 2).sum())
    big = np.zeros(8 * 16 + 1, np.float32)
    inside = big[:128].reshape(8, 16), big[127:128].reshape(())  # the 0-d out is the 2-d out's last element
    with pytest.raises(ArgumentError, match=r"out\[1\] \(result .*\) overlaps out\[0\]"):
        f(p, t, scale, out=inside)
    apart = big[:128].reshape(8, 16), big[128:].reshape(())  # adjacent, sharing no byte: accepted
    f(p, t, scale, out=apart)
    close32(apart[1], 0.5 * (want_d ** 2).sum())
    assert len(taken) == 1


# --- call_scanning: the Trainer's step, the call and the finiteness scan of its results in one native call ------
BIG_SUB = """
func.func @main(%p: tensor<1024x1025xf32>, %t: tensor<1024x1025xf32>) -> (tensor<1024x1025xf32>, tensor<i64>) {
  %e = tensor.empty() : tensor<1024x1025xf32>
  %d = linalg.sub ins(%p, %t : tensor<1024x1025xf32>, tensor<1024x1025xf32>) outs(%e : tensor<1024x1025xf32>) -> tensor<1024x1025xf32>
  %c = arith.constant dense<7> : tensor<i64>
  return %d, %c : tensor<1024x1025xf32>, tensor<i64>
}
"""


def test_call_scanning_calls_and_finds_a_non_finite_value_in_any_float_result():
    f = build(S.TWO_RESULTS).main
    assert f._plan.native_scan, "relax_mlir._callpath was not built (pip install -e . builds it)"
    p, t, scale = rand(8, 16), rand(8, 16), np.array(0.5, np.float32)
    outs = (np.empty((8, 16), np.float32), np.empty((), np.float32))
    assert f.call_scanning((p, t, scale), outs, 1) is True
    want_d = p.astype(np.float64) - t
    close32(outs[0], want_d)
    close32(outs[1], 0.5 * (want_d ** 2).sum())
    for pos in [(0, 0), (3, 9), (7, 15)]:
        for bad in (np.nan, np.inf, -np.inf):
            q = p.copy()
            q[pos] = bad
            assert f.call_scanning((q, t, scale), outs, 1) is False, (pos, bad)
            assert np.isfinite(outs[0]).sum() == 8 * 16 - 1  # (the call ran: the bad value is in the result)
            assert f.call_scanning((q, t, scale), outs, 0) is True  # no scan asked for
    # only the 0-d result infinite (the 2-d one finite): found too
    assert f.call_scanning((p, t, np.array(np.inf, np.float32)), outs, 1) is False
    assert np.isfinite(outs[0]).all() and np.isinf(outs[1])


def test_call_scanning_reads_float64_skips_integers_and_declines_what_it_cannot_read():
    mod = build(S.DTYPES)
    assert mod.double.call_scanning((np.array([4.0, 9.0, 2.0]),), (np.empty(3),), 1) is True
    out = (np.empty(3),)
    assert mod.double.call_scanning((np.array([4.0, -1.0, 2.0]),), out, 1) is False  # sqrt(-1) is NaN
    assert np.isnan(out[0][1])
    ints = [np.array([100, -100, 5, 6, 7, 127], np.int8), np.arange(6, dtype=np.int16),
            np.arange(6, dtype=np.int32), np.arange(6, dtype=np.int64)]
    int_outs = tuple(np.empty(6, a.dtype) for a in ints)
    assert mod.ints.call_scanning(tuple(ints), int_outs, 1) is True  # integers are always finite
    np.testing.assert_array_equal(int_outs[3], ints[3] // 3)
    # bfloat16 is not a format the native scan reads: nothing is called, the caller checks
    h, b = np.ones(5, np.float16), np.ones(5, ml_dtypes.bfloat16)
    half_outs = (np.full(5, 7, np.float16), np.full(5, 7, ml_dtypes.bfloat16))
    assert not mod.half._plan.native_scan
    assert mod.half.call_scanning((h, b), half_outs, 1) is None
    assert (half_outs[0] == 7).all()


@pytest.mark.parametrize("kind", ["float64 argument", "missing argument", "overlapping outs", "short outs",
                                  "read-only out"])
def test_call_scanning_calls_nothing_when_an_argument_or_out_does_not_fit(kind):
    """None, and the outs untouched: the Trainer then takes its checked route (conversion or its own error)."""
    f = build(S.TWO_RESULTS).main
    p, t, scale = rand(8, 16), rand(8, 16), np.array(0.5, np.float32)
    args = (p, t, scale)
    outs = (np.full((8, 16), 7, np.float32), np.full((), 7, np.float32))
    if kind == "float64 argument":
        args = (p.astype(np.float64), t, scale)
    elif kind == "missing argument":
        args = (p, t)
    elif kind == "overlapping outs":
        outs = (outs[0], outs[0][0, :1].reshape(()))
    elif kind == "short outs":
        outs = outs[:1]
    else:
        outs[1].flags.writeable = False
    assert f.call_scanning(args, outs, 1) is None
    assert all((o == 7).all() for o in outs)


def test_call_scanning_splits_a_large_scan_across_threads():
    """A 4 MiB result with two threads is scanned through the OpenMP runtime's threads (as FiniteCheck's): a NaN
    at either end or on either side of the split is found; the int64 result is never read as a float."""
    from relax_mlir.backend.openmp import openmp_library
    from relax_mlir.training.nan_policy import FiniteCheck

    if openmp_library() is None:
        pytest.fail("no OpenMP runtime found (intel-openmp is a dependency on Linux x86-64)")
    assert FiniteCheck(threads=2).threads == 2  # (hands the runtime's threads to the native scans)
    f = build(BIG_SUB).main
    p, t = np.ones((1024, 1025), np.float32), np.zeros((1024, 1025), np.float32)
    outs = (np.empty((1024, 1025), np.float32), np.empty((), np.int64))
    assert f.call_scanning((p, t), outs, 2) is True and int(outs[1]) == 7
    n = p.size
    for flat in (0, n // 2 - 1, n // 2, n // 2 + 1, n - 1):
        p.reshape(-1)[flat] = np.nan
        assert f.call_scanning((p, t), outs, 2) is False, flat
        assert f.call_scanning((p, t), outs, 1) is False, flat
        p.reshape(-1)[flat] = 1


@pytest.mark.parametrize("wrap", [lambda o: o, lambda o: (o,), lambda o: [o]])
def test_out_given_as_an_array_a_tuple_or_a_list_is_checked_natively(monkeypatch, wrap):
    """With static shapes, ``out=`` is checked in the same native call as the arguments whether it is one array,
    a tuple or a list (as one array it went through Python's checks, 0.3 µs an argument: 6.4 µs a call with ten
    arguments in ``benchmarks/call_overhead.py``, 1.4 now); an out that overlaps an argument still goes to the
    general route, which refuses it."""
    f = build(S.MATMUL_SHAPES, 2)["small"]
    plan = f._plan
    assert plan.native_outs
    monkeypatch.setattr(plan, "_take_outs", lambda *a: pytest.fail("out= checked in Python"))
    a, b = (rand(*p.shape) for p in f.signature.params)
    out = np.empty(f.signature.results[0].shape, np.float32)
    assert f(a, b, out=wrap(out)) is out
    close32(out, a.astype(np.float64) @ b)
    with pytest.raises(ArgumentError, match="overlaps"):
        f(a, b, out=wrap(np.lib.stride_tricks.as_strided(a, out.shape, (out.shape[1] * 4, 4))))
