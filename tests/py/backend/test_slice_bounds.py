"""``strided_slice`` bounds beyond the axis, and ``flip``, on static and symbolic axes: compiled code, the
interpreter and NumPy's slicing agree, or the call raises.

On a symbolic axis the inference reads a static bound at least 2**31 - 1 in size (TVM's habit for "to the end") as
past the end or before the start of the axis, which is NumPy's reading on any axis of fewer elements. The lowering
used the number as an index instead: ``flip`` (then a slice ending at -(2**31 - 1)) of an axis of 2**31 + 5 int8
elements dropped its first 7 elements, silently where a reduction read them. Now ``flip`` has a lowering of its own
and a slice on a longer axis raises ``ValueError``, as the interpreter does."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import relax_mlir as rm
from relax_mlir.ir.sym import SizeVar, evaluate
from relax_mlir.op.indexing import _sym_slice_len
from relax_mlir.script import from_source
from relax_mlir.transform import Gradient

BIG = 2**31 - 1
INT64_MAX = 2**63 - 1
#: Bounds at and past the sentinel (and past int64: the op clamps those to +-(2**63 - 1), NumPy's slice unchanged).
BOUNDS = [BIG, 2**31, INT64_MAX, 2**64, -BIG, -2**31, -INT64_MAX, -2**63, -2**64]


def _module(shape: str, dtype: str, exprs: list[str]) -> str:
    """``f(x)``: each of ``exprs`` (over ``x``) and its sum."""
    lines = "".join(f"            a{i} = {e}\n            s{i} = R.sum(a{i})\n" for i, e in enumerate(exprs))
    outs = ", ".join(f"a{i}, s{i}" for i in range(len(exprs)))
    return f"""
@I.ir_module
class Module:
    @R.function
    def f(x: R.Tensor(({shape}), "{dtype}")):
        with R.dataflow():
{lines}            R.output({outs})
        return ({outs},)
"""


def _cases() -> list[tuple[int, int, int]]:
    """(begin, end, stride): both bounds beyond the axis, or one beyond and the other the axis' first element in
    the stride's direction (in bounds on a symbolic axis, as the inference assumes)."""
    cases = []
    for s in (1, -1, 2, -3):
        first = 0 if s > 0 else -1
        cases += [(b, e, s) for b in BOUNDS for e in BOUNDS] + [(b, first, s) for b in BOUNDS]
        cases += [(first, e, s) for e in BOUNDS]
    return cases


@pytest.mark.parametrize("shape,sizes", [('"n",', (0, 1, 2, 5)), ("5,", (5,))])
def test_bounds_beyond_the_axis_agree_with_numpy(shape, sizes):
    """Each case and a sum over it, compiled and interpreted, equal NumPy's ``x[begin:end:stride]`` at every size."""
    cases = _cases()
    mod = from_source(_module(shape, "float32", [f"R.strided_slice(x, axes=[0], begin=[{b}], end=[{e}], "
                                                 f"strides=[{s}])" for b, e, s in cases]))
    f = rm.VirtualMachine(rm.compile(mod, num_threads=1))["f"]
    for n in sizes:
        x = np.arange(1, n + 1, dtype=np.float32)
        for results in (f(x), rm.interpret(mod, "f", x)):
            for (begin, end, stride), got, total in zip(cases, results[0::2], results[1::2]):
                want = x[begin:end:stride]
                assert np.asarray(got).shape == want.shape, (begin, end, stride, n)
                np.testing.assert_array_equal(got, want)
                assert float(total) == want.sum()


@pytest.mark.parametrize("begin,end,stride", [
    (BIG, -BIG, 1), (2**31, 0, 1), (0, -INT64_MAX, 1), (-BIG, BIG, -1), (-1, INT64_MAX, -1),  # empty
    (0, BIG, 1), (-INT64_MAX, INT64_MAX, 2), (-1, -BIG, -1), (BIG, -2**31, -3), (-2, INT64_MAX, 1)])
def test_the_inferred_length_of_a_slice_beyond_a_symbolic_axis(begin, end, stride):
    """NumPy's length at every size the bounds are read for (an empty slice was ``-n``: a negative size)."""
    length = _sym_slice_len(SizeVar("n"), begin, end, stride)
    for n in range(2, 9):
        assert evaluate(length, {"n": n}) == len(np.arange(n)[begin:end:stride]), n


def test_a_slice_past_int64_and_at_int64_min_compiles():
    """-2**63 is what the export stores for a symbolic entry, and 2**64 fits no int64: both crashed the compile
    (StopIteration, TypeError). The op keeps them as +-(2**63 - 1)."""
    mod = from_source(_module('"n",', "float32", [
        "R.strided_slice(x, axes=[0], begin=[-1], end=[-9223372036854775808], strides=[-1])",
        "R.strided_slice(x, axes=[0], begin=[-18446744073709551616], end=[18446744073709551616])"]))
    text = mod.script()
    assert "(-9223372036854775807,), strides=(-1,)" in text
    assert "(-9223372036854775807,), (9223372036854775807,)" in text
    x = np.arange(4, dtype=np.float32)
    reverse, _, whole, _ = rm.VirtualMachine(rm.compile(mod, num_threads=1))["f"](x)
    np.testing.assert_array_equal(reverse, x[::-1])
    np.testing.assert_array_equal(whole, x)


@pytest.mark.parametrize("shape,sizes", [('"n", 3', (0, 1, 4)), ("4, 3", (4,))])
def test_flip_on_every_axis_equals_numpy(shape, sizes):
    mod = from_source(_module(shape, "int32", [f"R.flip(x, axis={axis})" for axis in (0, 1, -2)]))
    f = rm.VirtualMachine(rm.compile(mod, num_threads=1))["f"]
    for n in sizes:
        x = np.arange(n * 3, dtype=np.int32).reshape(n, 3)
        results = f(x)
        for axis, got, total in zip((0, 1, -2), results[0::2], results[1::2]):
            np.testing.assert_array_equal(got, np.flip(x, axis))
            assert int(total) == x.sum()


def test_the_gradient_of_flip_is_a_flip():
    mod = Gradient("g")(from_source("""
@I.ir_module
class Module:
    @R.function
    def g(x: R.Tensor(("n", 2), "float32"), w: R.Tensor(("n", 2), "float32")):
        with R.dataflow():
            a = R.flip(x, axis=0)
            b = R.sum(R.multiply(a, w))
            R.output(b)
        return b
"""))
    x, w = np.ones((3, 2), np.float32), np.arange(6, dtype=np.float32).reshape(3, 2)
    _, (dx, dw) = rm.VirtualMachine(rm.compile(mod, num_threads=1))["g_adjoint"](x, w)
    np.testing.assert_array_equal(dx, np.flip(w, 0))
    np.testing.assert_array_equal(dw, np.flip(x, 0))


@pytest.fixture(scope="module")
def huge():
    """An int8 vector of 2**31 + 5 elements (2 GiB): 3, 1, 1 first, 2 last, 0 elsewhere."""
    x = np.zeros(2**31 + 5, np.int8)
    x[:3] = (3, 1, 1)
    x[-1] = 2
    yield x
    del x
    gc.collect()


HUGE = """
@I.ir_module
class Module:
    @R.function
    def flipped(x: R.Tensor(("m",), "int8")):
        with R.dataflow():
            a = R.flip(x, axis=0)
            b = R.strided_slice(a, axes=[0], begin=[-3], end=[9223372036854775807])
            c = R.max(a)
            R.output(b, c)
        return (b, c)

    @R.function
    def reversed_to_int64_min(x: R.Tensor(("m",), "int8")):
        with R.dataflow():
            a = R.strided_slice(x, axes=[0], begin=[-1], end=[-9223372036854775807], strides=[-1])
            b = R.strided_slice(a, axes=[0], begin=[-3], end=[9223372036854775807])
            R.output(b)
        return b

    @R.function
    def reversed_to_sentinel(x: R.Tensor(("m",), "int8")):
        with R.dataflow():
            a = R.strided_slice(x, axes=[0], begin=[-1], end=[-2147483647], strides=[-1])
            b = R.max(a)
            R.output(b)
        return b

    @R.function
    def from_2_31(x: R.Tensor(("m",), "int8")):
        with R.dataflow():
            a = R.strided_slice(x, axes=[0], begin=[2147483648], end=[2147483658])
            b = R.max(a)
            R.output(b)
        return b
"""


def test_a_flip_of_an_axis_longer_than_2_31_elements(huge):
    """flip, and a reverse slice to -(2**63 - 1), keep every element (the flip lost x[:7], its max was 2); a slice
    whose bound the inference read as beyond the symbolic axis raises, as the interpreter does, where it
    returned a slice of another length than the inferred one."""
    vm = rm.VirtualMachine(rm.compile(from_source(HUGE), num_threads=1))
    last, top = vm["flipped"](huge)
    np.testing.assert_array_equal(last, np.flip(huge)[-3:])
    assert last.tolist() == [1, 1, 3] and int(top) == np.flip(huge).max() == 3
    np.testing.assert_array_equal(vm["reversed_to_int64_min"](huge), huge[::-1][-3:])
    with pytest.raises(ValueError, match=r"^reversed_to_sentinel: binding 'a': strided_slice: symbolic axis 0 has "
                                         r"2147483653 elements, too many for end -2147483647, read as before its "
                                         r"start \(as NumPy reads a bound at least 2\*\*31 - 1 in size on a shorter "
                                         r"axis only; \+-\(2\*\*63 - 1\) hold on any axis\)$"):
        vm["reversed_to_sentinel"](huge)
    with pytest.raises(ValueError, match=r"^from_2_31: binding 'a': strided_slice: symbolic axis 0 has 2147483653 "
                                         r"elements, too many for begin 2147483648, read as past its end and end "
                                         r"2147483658, read as past its end \("):
        vm["from_2_31"](huge)
