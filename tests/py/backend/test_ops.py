"""Every lowered op of the registry, on every one of its samples: compiled == interpreted.

A sample with size variables runs twice: compiled with dynamic dimensions (``?``), when the runtime can bind them
from the parameters and allocate the result (not for a parameter sized ``2 * h`` or a result of unknown shape),
and compiled with the sizes bound. Tolerances per dtype are in ``op_cases.py``. An op without a lowering is
skipped here and named by ``test_every_op_has_a_lowering``.
"""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir
from relax_mlir import op as relax_op
from relax_mlir.interpreter import interpret
from relax_mlir.ir.struct_info import free_vars

from .op_cases import assert_close, compilable, make_case

OPS = relax_op.list_ops()


def _symbolic(sample) -> bool:
    return any(free_vars(a) for a in sample.args if not isinstance(a, (list, tuple))) or \
        any(free_vars(f) for a in sample.args if isinstance(a, (list, tuple)) for f in a) or bool(sample.sizes)


def _cases():
    for op in OPS:
        for i, sample in enumerate(op.samples):
            yield pytest.param(op, sample, "symbolic", id=f"{op.name}-{i}")
            if _symbolic(sample):
                yield pytest.param(op, sample, "static", id=f"{op.name}-{i}-static")


@pytest.mark.parametrize("op,sample,variant", list(_cases()))
def test_compiled_matches_interpreter(op, sample, variant):
    assert op.compilable, f"{op.name} has no lowering (its record's ``lowering``) and no decomposition"
    case = make_case(op, sample)
    mod = case.mod_symbolic if variant == "symbolic" and compilable(case.mod_symbolic) else case.mod_static
    want = interpret(mod, "main", *case.arrays)
    got = relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"](*case.arrays)
    assert_close(got, want, op.name, _contraction_floor(op, mod, case.arrays))


#: Ops whose every result element is a sum of products of one element of each operand.
_CONTRACTIONS = {"relax.matmul", "relax.linear", "relax.einsum", "relax.nn.conv1d", "relax.nn.conv2d",
                 "relax.nn.conv3d", "relax.nn.conv1d_transpose", "relax.nn.conv2d_transpose"}


def _contraction_floor(op, mod, arrays) -> float:
    """16 float32 ulps of the largest sum of |products| (the op on |operands|): an element that cancels keeps the
    rounding of its terms, which the host's order of summation moves (a (3, 784) @ (784, 128) sample was 0.58 of
    the way to the 1e-5 atol with terms summing to 824); a missing or doubled product is still far above it."""
    def leaves(a):
        return [x for f in a for x in leaves(f)] if isinstance(a, tuple) else [a]

    def absolute(a):  # einsum's operands come as a tuple
        return tuple(absolute(f) for f in a) if isinstance(a, tuple) else np.abs(a)

    if op.name not in _CONTRACTIONS or not all(np.asarray(a).dtype == np.float32 for a in leaves(tuple(arrays))):
        return 0.0
    terms = interpret(mod, "main", *[absolute(a) for a in arrays])
    return 16 * float(np.finfo(np.float32).eps) * float(np.max(terms, initial=0.0))


def test_every_op_has_a_lowering():
    missing = [op.name for op in OPS if not op.compilable]
    assert not missing, f"ops the MLIR backend cannot compile yet: {', '.join(missing)}"


def test_records_are_frozen_and_own_their_lowering():
    """A record's lowering is there the moment the op is defined (no import attaches it), and nothing can swap it."""
    import dataclasses
    import subprocess
    import sys

    code = ("import relax_mlir.backend.export\n"
            "from relax_mlir.op.registry import get_op\n"
            "print(get_op('relax.nn.gelu').lowering is not None, get_op('relax.take').lowering)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "shape:take"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        relax_mlir.op.exp.lowering = None


def test_every_lowering_reference_resolves():
    from relax_mlir.backend.legalize import LegalizeError, lowering_of, resolve_reference

    for op in OPS:
        if op.lowering is not None:
            assert callable(lowering_of(op)), op.name
    for bad in ("nowhere:take", "shape:no_such_rule", "take"):
        with pytest.raises(LegalizeError, match="bad lowering reference"):
            resolve_reference(bad)



def test_sign_of_signed_zeros_and_nan_is_numpy_s():
    # assert_allclose takes -0.0 for 0.0: the sign bits are compared here (sign(-0.0) was -0.0 compiled)
    import numpy as np
    from relax_mlir.ir import TensorStructInfo, Var
    from relax_mlir.ir.block_builder import BlockBuilder

    for dtype in ("float32", "float64"):
        x = Var("x", TensorStructInfo((6,), dtype))
        bb = BlockBuilder()
        with bb.function("f", [x]):
            bb.emit_func_output(bb.emit(relax_op.sign(x)))
        values = np.array([-0.0, 0.0, np.nan, -3.5, 2.0, -np.inf], dtype)
        got = relax_mlir.VirtualMachine(relax_mlir.compile(bb.get()))["f"](values)
        np.testing.assert_array_equal(got, np.sign(values))
        np.testing.assert_array_equal(np.signbit(got), np.signbit(np.sign(values)))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_floor_mod_of_an_exact_multiple_is_a_zero_with_the_divisor_s_sign(dtype):
    """NumPy's ``remainder`` (the reference): a zero remainder is ``copysign(0, b)``; compiled it was ``fmod``'s zero,
    with the dividend's sign (PyTorch's)."""
    from relax_mlir.ir import TensorStructInfo, Var
    from relax_mlir.ir.block_builder import BlockBuilder

    a = np.array([-3.5, -1.0, 0.0, -0.0, 2.0, 6.0, -3.0, 3.0, -0.0, 5.0, -2.5, np.nan], dtype)
    b = np.array([0.5, 0.5, -1.0, 1.0, -1.0, -1.5, np.inf, -np.inf, -np.inf, 2.0, 2.0, 1.0], dtype)
    x, y = Var("x", TensorStructInfo(a.shape, dtype)), Var("y", TensorStructInfo(b.shape, dtype))
    bb = BlockBuilder()
    with bb.function("f", [x, y]):
        bb.emit_func_output(bb.emit(relax_op.floor_mod(x, y)))
    got = relax_mlir.VirtualMachine(relax_mlir.compile(bb.get()))["f"](a, b)
    with np.errstate(invalid="ignore"):
        want = np.remainder(a, b)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("exponent", ["scalar", "one", "full"])
def test_power_of_a_half_at_infinities_and_signed_zeros_is_the_reference_s(dtype, exponent):
    """``x ** 0.5`` with a broadcast exponent is NumPy's (and PyTorch's) square root: ``(-inf) ** 0.5`` is NaN and
    ``(-0.0) ** 0.5`` is -0.0 (C's ``pow``, compiled before, gave inf and 0.0); a whole array of exponents takes
    ``pow``'s path in NumPy, and here."""
    import numpy as np
    from relax_mlir.ir import TensorStructInfo, Var
    from relax_mlir.ir.block_builder import BlockBuilder
    from relax_mlir.ir.expr import const

    values = np.array([-np.inf, -0.0, 0.0, np.inf, 4.0, 0.25], dtype)
    half = {"scalar": np.array(0.5, dtype), "one": np.array([0.5], dtype), "full": np.full(6, 0.5, dtype)}[exponent]
    x = Var("x", TensorStructInfo((6,), dtype))
    bb = BlockBuilder()
    with bb.function("f", [x]):
        bb.emit_func_output(bb.emit(relax_op.power(x, const(half, dtype))))
    got = relax_mlir.VirtualMachine(relax_mlir.compile(bb.get()))["f"](values)
    with np.errstate(invalid="ignore"):
        want = np.power(values, half)  # the reference's own NumPy call
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got[~np.isnan(got)]), np.signbit(want[~np.isnan(want)]))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name, exact", [("log1p", np.log1p), ("softplus", lambda x: np.logaddexp(0.0, x))])
def test_log1p_and_softplus_keep_their_digits_for_tiny_values(dtype, name, exact):
    """``math.log1p`` became ``log(1 + x)`` below MLIR: 0 for |x| < 6e-8 in float32, 19% off at 1e-7, and softplus
    (``log1p(exp(x))``) 0 below x = -17. Checked against NumPy in float64 over 10**-30 ... 10**30 and the specials."""
    mags = 10.0 ** np.arange(-30, 30, 0.25)
    mags = mags[np.isfinite(mags.astype(dtype))]
    x = np.concatenate([mags, -mags[mags < 1], -np.arange(1, 60, 3.5)]).astype(dtype)
    build = relax_op.log1p if name == "log1p" else relax_op.nn.softplus
    got = _run_unary(build, x).astype(np.float64)
    with np.errstate(all="ignore"):
        want = exact(x.astype(np.float64))
    keep = np.isfinite(want) & (want != 0) & (np.abs(want) > np.finfo(dtype).tiny)  # (subnormal results: absolute)
    ulps = np.abs(got[keep] - want[keep]) / np.abs(want[keep]) / np.finfo(dtype).eps
    assert ulps.max() <= 4, f"{name} {dtype}: {ulps.max():.1f} ulps at x = {x[keep][ulps.argmax()]}"  # log's own error, a few ulps


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_log1p_of_the_special_values_is_numpy_s(dtype):
    specials = np.array([0.0, -0.0, -1.0, -2.0, np.inf, -np.inf, np.nan], dtype)
    got = _run_unary(relax_op.log1p, specials)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(got, np.log1p(specials))
    assert np.signbit(got[1])  # log1p(-0.0) is -0.0


def _run_unary(build, x: np.ndarray) -> np.ndarray:
    """``build(v)`` compiled for a 1-D tensor of ``x``'s size and dtype, run on ``x``."""
    from relax_mlir.ir import TensorStructInfo, Var
    from relax_mlir.ir.block_builder import BlockBuilder

    v = Var("x", TensorStructInfo((x.size,), str(x.dtype)))
    bb = BlockBuilder()
    with bb.function("f", [v]):
        bb.emit_func_output(bb.emit(build(v)))
    return relax_mlir.VirtualMachine(relax_mlir.compile(bb.get()))["f"](x)
