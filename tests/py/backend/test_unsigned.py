"""Unsigned integer tensors compiled (``backend/unsigned.py``): every op that computes on them gives the NumPy
reference interpreter's values (and NumPy's own where NumPy has the op), values above the sign bit included; ops
that cannot are refused at export with the op, the binding and the dtype."""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir
from relax_mlir.backend.signature import ExportError
from relax_mlir.script import from_source

UNSIGNED = ["uint8", "uint16", "uint32", "uint64"]


def _module(params: str, body: str) -> object:
    return from_source(f"""
@I.ir_module
class Module:
    @R.function
    def main({params}):
        with R.dataflow():
            y = {body}
            R.output(y)
        return y
""")


def _values(dtype: str, shape=(4, 6), seed=0, low=0) -> np.ndarray:
    """Values across the whole range of ``dtype``: 0, 1, around the sign bit, the largest, and random ones."""
    info = np.iinfo(dtype)
    rng = np.random.default_rng(seed)
    edges = np.array([0, 1, info.max // 2, info.max // 2 + 1, info.max - 1, info.max], dtype=dtype)
    x = rng.integers(low, info.max, size=shape, dtype=dtype, endpoint=True)
    n = min(x.size, len(edges))
    x.reshape(-1)[:n] = np.maximum(edges, low)[:n]
    return x


def _both(mod, *args):
    got = relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"](*args)
    want = relax_mlir.interpret(mod, "main", *args)
    return got, want


BINARY = {  # op -> NumPy's own, for the ops NumPy has with the same meaning on nonzero divisors
    "R.add": np.add, "R.subtract": np.subtract, "R.multiply": np.multiply, "R.maximum": np.maximum,
    "R.minimum": np.minimum, "R.less": np.less, "R.less_equal": np.less_equal, "R.greater": np.greater,
    "R.greater_equal": np.greater_equal, "R.equal": np.equal, "R.not_equal": np.not_equal,
    "R.floor_divide": np.floor_divide, "R.divide": np.floor_divide, "R.floor_mod": np.remainder, "R.mod": np.fmod,
    "R.bitwise_and": np.bitwise_and, "R.bitwise_xor": np.bitwise_xor,
}


@pytest.mark.parametrize("dtype", UNSIGNED)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_ops_are_unsigned(dtype, name):
    mod = _module(f'a: R.Tensor((4, 6), "{dtype}"), b: R.Tensor((4, 6), "{dtype}")', f"{name}(a, b)")
    a, b = _values(dtype, seed=1), _values(dtype, seed=2, low=1)  # nonzero divisors for NumPy's comparison
    got, want = _both(mod, a, b)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, BINARY[name](a, b))


@pytest.mark.parametrize("dtype", ["uint8", "uint64"])
@pytest.mark.parametrize("name", ["R.divide", "R.floor_divide", "R.mod", "R.floor_mod"])
def test_division_by_zero_is_zero_as_in_the_interpreter(dtype, name):
    mod = _module(f'a: R.Tensor((4, 6), "{dtype}"), b: R.Tensor((4, 6), "{dtype}")', f"{name}(a, b)")
    a, b = _values(dtype, seed=3), _values(dtype, seed=4)
    b[::2] = 0
    got, want = _both(mod, a, b)
    np.testing.assert_array_equal(got, want)
    assert (got[::2] == 0).all()


UNARY = {
    "R.abs(x)": np.abs, "R.sign(x)": np.sign, "R.negative(x)": np.negative, "R.square(x)": np.square,
    "R.bitwise_not(x)": np.invert,
    "R.clip(x, 10, 200)": lambda x: np.clip(x, 10, 200).astype(x.dtype),
    "R.max(x, axis=1)": lambda x: x.max(axis=1), "R.min(x, axis=1)": lambda x: x.min(axis=1),
    "R.argmax(x, axis=1)": lambda x: x.argmax(axis=1), "R.argmin(x, axis=1)": lambda x: x.argmin(axis=1),
    "R.sum(x, axis=1)": lambda x: x.sum(axis=1, dtype=x.dtype), "R.cumsum(x, axis=1)": lambda x: x.cumsum(1, x.dtype),
    "R.prod(x, axis=0)": lambda x: x.prod(axis=0, dtype=x.dtype),
}


@pytest.mark.parametrize("dtype", UNSIGNED)
@pytest.mark.parametrize("body", sorted(UNARY))
def test_unary_ops_and_reductions_are_unsigned(dtype, body):
    mod = _module(f'x: R.Tensor((4, 6), "{dtype}")', body)
    x = _values(dtype, seed=5)
    with np.errstate(over="ignore"):
        reference = UNARY[body](x)
    got, want = _both(mod, x)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, reference)


@pytest.mark.parametrize("source, target", [
    (s, t) for s in UNSIGNED
    for t in ("float32", "float64", "int8", "int32", "int64", "uint8", "uint16", "uint64", "bool") if s != t])
def test_astype_from_unsigned_reads_the_bits_unsigned(source, target):
    mod = _module(f'x: R.Tensor((4, 6), "{source}")', f'R.astype(x, "{target}")')
    x = _values(source, seed=6)
    got, want = _both(mod, x)
    assert got.dtype == np.dtype(target)
    np.testing.assert_array_equal(got, x.astype(target))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("target", UNSIGNED)
@pytest.mark.parametrize("source", ["float32", "float64", "int8", "int64"])
def test_astype_into_unsigned(source, target):
    """Floats in range convert toward zero; signed integers wrap (-1 is the largest value), as NumPy's astype."""
    mod = _module(f'x: R.Tensor((8,), "{source}")', f'R.astype(x, "{target}")')
    if source.startswith("float"):
        x = np.array([0, 0.9, 1.5, 2, 100.7, 127.2, 200.9, 255], source)
    else:
        x = np.array([0, 1, -1, -128, 127, 5, -7, 100], source)
    got, want = _both(mod, x)
    np.testing.assert_array_equal(got, x.astype(target))
    np.testing.assert_array_equal(got, want)


def test_an_image_pipeline_of_bytes_matches_numpy():
    """uint8 pixels: constants above 127, thresholds, layout ops, a gather by signed indices, normalization."""
    mod = from_source("""
@I.ir_module
class Module:
    @R.function
    def main(img: R.Tensor((2, 8, 8), "uint8"), idx: R.Tensor((3,), "int64")):
        with R.dataflow():
            bright = R.greater(img, R.const(200, "uint8"))
            capped = R.where(bright, R.const(250, "uint8"), img)
            flat = R.reshape(R.permute_dims(capped, [0, 2, 1]), [2, 64])
            picked = R.take(flat, idx, axis=1)
            both = R.concat([picked, R.strided_slice(flat, axes=[1], begin=[60], end=[63])], axis=1)
            y = R.divide(R.astype(both, "float32"), R.const(255.0, "float32"))
            R.output(y)
        return y
""")
    img = _values("uint8", (2, 8, 8), seed=7)
    idx = np.array([0, 63, 17], np.int64)
    got, want = _both(mod, img, idx)
    capped = np.where(img > 200, np.uint8(250), img)
    flat = capped.transpose(0, 2, 1).reshape(2, 64)
    ref = np.concatenate([flat[:, idx], flat[:, 60:63]], axis=1).astype(np.float32) / np.float32(255)
    np.testing.assert_allclose(got, ref, rtol=1e-7)
    np.testing.assert_allclose(got, want, rtol=1e-7)


def test_an_unsigned_matmul_wraps_like_numpy():
    mod = _module('a: R.Tensor((5, 7), "uint8"), b: R.Tensor((7, 3), "uint8")', "R.matmul(a, b)")
    a, b = _values("uint8", (5, 7), seed=8), _values("uint8", (7, 3), seed=9)
    got, want = _both(mod, a, b)
    np.testing.assert_array_equal(got, a @ b)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("params, body, message", [
    ('x: R.Tensor((4,), "uint8"), i: R.Tensor((2,), "uint8")', "R.take(x, i, axis=0)",
     "relax.take reads uint8 indices"),
    ('a: R.Tensor((2, 4), "uint8"), b: R.Tensor((4, 3), "uint8")', 'R.matmul(a, b, out_dtype="int32")',
     "relax.matmul of uint8 into int32 is not supported"),
    ('a: R.Tensor((2, 4), "uint16"), b: R.Tensor((4, 3), "uint16")', 'R.einsum((a, b), "ij,jk->ik")',
     "relax.einsum on uint16 tensors is not supported"),
    ('x: R.Tensor((1, 1, 4, 4), "uint8")', "R.nn.max_pool2d(x, pool_size=[2, 2])",
     "relax.nn.max_pool2d on uint8 tensors is not supported"),
])
def test_ops_that_cannot_compute_unsigned_are_refused_at_export(params, body, message):
    mod = _module(params, body)
    with pytest.raises(ExportError, match=message) as info:
        relax_mlir.compile(mod)
    assert "main" in str(info.value) and "y" in str(info.value)  # the function and the binding


def test_the_boundary_takes_and_returns_the_unsigned_dtype():
    mod = _module('x: R.Tensor((3,), "uint8")', "R.add(x, R.const(1, \"uint8\"))")
    fn = relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"]
    out = fn(np.array([0, 254, 255], np.uint8))
    assert out.dtype == np.uint8
    np.testing.assert_array_equal(out, [1, 255, 0])
    with pytest.raises((TypeError, ValueError), match="uint8"):
        fn(np.array([0.5, 1, 2], np.float32))  # a float array is not silently truncated into bytes


def test_uint64_bounds_and_fills_beyond_int64_are_kept_whole():
    """An attribute (clip's bound) or a filled constant above 2**63 (an MLIR i64 attribute could not hold it)."""
    mod = _module('x: R.Tensor((4,), "uint64")', f"R.clip(x, 5, {2 ** 63 + 1})")
    x = np.array([0, 5, 2 ** 63, 2 ** 64 - 1], np.uint64)
    got, want = _both(mod, x)
    np.testing.assert_array_equal(got, np.clip(x, np.uint64(5), np.uint64(2 ** 63 + 1)))
    np.testing.assert_array_equal(got, want)
    mod = _module('x: R.Tensor((4,), "uint64")',
                  f'R.maximum(x, R.full((4,), R.const({2 ** 63 + 7}, "uint64"), "uint64"))')
    got, want = _both(mod, x)
    np.testing.assert_array_equal(got, np.maximum(x, np.uint64(2 ** 63 + 7)))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", UNSIGNED)
@pytest.mark.parametrize("body, reference", [
    ("R.sort(x, axis=1)", lambda x: np.sort(x, axis=1)),
    ("R.argsort(x, axis=1)", lambda x: np.argsort(x, axis=1, kind="stable")),
    ("R.sort(x, axis=0, descending=True)", lambda x: np.sort(x, axis=0)[::-1]),
    ('R.topk(x, k=2, axis=1, ret_type="values")', lambda x: np.sort(x, axis=1)[:, ::-1][:, :2]),
])
def test_sorting_orders_unsigned_values_above_the_sign_bit_last(dtype, body, reference):
    mod = _module(f'x: R.Tensor((4, 6), "{dtype}")', body)
    x = _values(dtype, seed=10)
    x[0, :2] = x[0, 2:4]  # ties: the stable order keeps the first first
    got, want = _both(mod, x)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, reference(x))


# --- every record's ``unsigned`` field, checked on its own samples --------------------------------------------------
def _unsigned_variant(op, sample):
    """``sample``'s integer tensors as unsigned ones of the same width (``index_inputs`` stay signed; size
    variables bound to 5), or None when it has no integer operand, or mixes them with float ones (a matmul of
    int32 by float32: refused for unsigned operands by design)."""
    from relax_mlir.ir.struct_info import free_vars, substitute
    from relax_mlir.op import substitute_attrs

    sinfos, kinds, env = [], set(), {}
    for name, arg in zip(op.inputs, sample.args):
        if isinstance(arg, (list, tuple)) or arg.shape is None:
            return None
        env.update({v: 5 for v in free_vars(arg)})
        arg = substitute(arg, env)
        if name not in op.index_inputs and arg.dtype != "bool":
            kinds.add(arg.dtype.startswith("int"))
            if arg.dtype in ("int8", "int16", "int32", "int64"):
                arg = type(arg)(arg.shape, "u" + arg.dtype)
        sinfos.append(arg)
    if kinds != {True} or sample.sizes:
        return None
    return sinfos, substitute_attrs(op.complete_attrs(dict(sample.attrs)), env)


def _unsigned_cases():
    from relax_mlir.op import list_ops

    for op in list_ops():
        if op.unsigned is None or op.lowering is None:
            continue
        for i, sample in enumerate(op.samples):
            variant = _unsigned_variant(op, sample)
            if variant is not None and sample.make is None:
                yield pytest.param(op, *variant, id=f"{op.name}-{i}")


@pytest.mark.parametrize("op, sinfos, attrs", list(_unsigned_cases()))
def test_each_record_that_claims_unsigned_support_compiles_it_like_the_interpreter(op, sinfos, attrs):
    """The op record's ``unsigned`` field (``registry.Op``) is what the export trusts: every op claiming it computes
    on unsigned tensors does, on its own samples made unsigned, values above the sign bit included."""
    from .op_cases import assert_close, single_op_module

    mod = single_op_module(op, sinfos, attrs)
    args = [_values(s.dtype, tuple(s.shape), seed=k) if s.dtype.startswith("uint")
            else np.random.default_rng(k).integers(0, 3, size=tuple(s.shape)).astype(s.dtype)
            if s.dtype.startswith("int") else np.random.default_rng(k).random(tuple(s.shape)).astype(s.dtype)
            for k, s in enumerate(sinfos)]
    got, want = _both(mod, *args)
    assert_close(got, want, op.name)


def test_the_sweep_covers_the_sign_aware_ops():
    names = {case.values[0].name for case in _unsigned_cases()}
    for name in ("relax.maximum", "relax.less", "relax.divide", "relax.floor_mod", "relax.abs", "relax.max",
                 "relax.argmax", "relax.sum", "relax.cumsum", "relax.clip"):
        assert name in names, f"{name} has no integer sample the unsigned sweep can use"


def test_a_record_states_its_unsigned_policy_in_a_known_form():
    import dataclasses

    from relax_mlir.op import Op, register
    from relax_mlir.op.registry import Sample

    base = Op(name="relax.test_unsigned_policy", inputs=("x",), infer=lambda a, k: a[0], reference=lambda x: x,
              samples=[Sample([])], doc="x")
    with pytest.raises(ValueError, match="unsigned must be None, 'agnostic' or 'aware', got 'yes'"):
        register(dataclasses.replace(base, unsigned="yes"))
    with pytest.raises(ValueError, match=r"index_inputs \['i'\] are not among its inputs \['x'\]"):
        register(dataclasses.replace(base, unsigned="agnostic", index_inputs=("i",)))
