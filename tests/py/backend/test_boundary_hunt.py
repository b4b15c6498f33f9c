"""What a bug hunt of the compiled call boundary found (2026-11-28): a tensor of the function's own too large to
allocate (malloc's NULL was not checked: a segfault), bool arrays whose bytes are not 0 and 1, and ``out=`` values
and array-likes that escaped as raw exceptions. Every expected value from NumPy or the interpreter."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import relax_mlir as rm
from relax_mlir.backend.runtime import ArgumentError
from relax_mlir.backend.signature import FunctionSignature, TensorSpec
from relax_mlir.backend.signature_json import signature_from_json, signature_to_json
from relax_mlir.script import from_source

OUTER = """
@I.ir_module
class M:
    @R.function
    def outer(x: R.Tensor(({n!r},), "float32"), y: R.Tensor(({m!r},), "float32"),
              idx: R.Tensor((1,), "int64")) -> R.Tensor((1,), "float32"):
        o = R.multiply(R.reshape(x, ({n!r}, 1)), R.reshape(y, (1, {m!r})))
        return R.take(R.reshape(o, ({nm!r},)), idx, axis=0)
"""


@pytest.mark.parametrize("sizes", [{"n": "n", "m": "m", "nm": "n * m"}, {"n": 300000, "m": 300000, "nm": 9 * 10**10}])
def test_a_tensor_too_large_to_allocate_is_a_memory_error_not_a_segfault(sizes, tmp_path):
    """An outer product of two 300000-vectors (335 GiB) in a function of 1.2 MB inputs, with symbolic and static
    sizes; run in a process of its own (it used to die of SIGSEGV)."""
    child = textwrap.dedent(f"""
        import numpy as np, relax_mlir as rm
        from relax_mlir.script import from_source
        mod = from_source({OUTER.format(**sizes)!r})
        f = rm.VirtualMachine(rm.compile(mod))["outer"]
        x = np.ones(300000, "float32")
        try:
            f(x, x, np.array([3]))
        except MemoryError as e:
            print("MemoryError:", e)
    """)
    proc = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=600,
                          env={**__import__("os").environ, "RELAX_MLIR_CACHE_DIR": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "MemoryError: outer: its tensor 'o' would take 335.3 GiB" in proc.stdout, proc.stdout
    assert "nothing was run" in proc.stdout


def test_a_small_call_of_the_same_function_runs():
    mod = from_source(OUTER.format(n="n", m="m", nm="n * m"))
    x, y = np.arange(3, dtype="float32"), np.arange(4, dtype="float32") + 1
    got = rm.VirtualMachine(rm.compile(mod))["outer"](x, y, np.array([5]))
    np.testing.assert_array_equal(got, np.outer(x, y).ravel()[[5]])


def test_the_tensors_checked_survive_a_library_file():
    sig = FunctionSignature("f", (TensorSpec(("n",), "float32", "x"),), (TensorSpec(("n",), "float32", "r"),),
                            (TensorSpec(("n", "n"), "float64", "o"),))
    assert signature_from_json(signature_to_json(sig)) == sig
    assert signature_from_json({k: v for k, v in signature_to_json(sig).items() if k != "scratch"}).scratch == ()


WHERE = """
@R.function
def w(c: R.Tensor((4,), "bool"), a: R.Tensor((4,), "float32"), b: R.Tensor((4,), "float32")):
    r = R.where(c, a, b)
    return r
"""


def test_a_bool_array_of_bytes_other_than_0_and_1_reads_as_numpy_reads_it():
    mod = rm.IRModule({"w": from_source(WHERE)})
    f = rm.VirtualMachine(rm.compile(mod))["w"]
    a, b = np.ones(4, "float32"), np.zeros(4, "float32")
    for mask in (np.frombuffer(bytes([0, 1, 2, 254]), dtype=bool),
                 np.frombuffer(bytes([0, 9, 1, 0, 0, 0, 128, 0]), dtype=bool)[::2]):  # (a strided view too)
        want = np.where(mask, a, b)
        np.testing.assert_array_equal(rm.interpret(mod, "w", mask, a, b), want)
        np.testing.assert_array_equal(f(mask, a, b), want)


G = """
@I.ir_module
class M:
    @R.function
    def g(x: R.Tensor((2, 3), "float32")):
        return x

    @R.function
    def h(x: R.Tensor((2, 3), "float32")):
        y = R.add(x, x)
        return (x, (y,))
"""


@pytest.mark.parametrize("fn, out, message", [
    ("g", [None], r"g: out\[0\] \(result 'result'\): expected a numpy.ndarray, got NoneType"),
    ("g", 3, r"g: out= takes an array or a list or tuple of 1 array\(s\), one a result in order, got int"),
    ("g", (i for i in range(1)), r"g: out= takes an array .* got generator"),
    ("g", memoryview(np.zeros((2, 3), "float32")), r"g: out= takes an array .* got memoryview"),
    ("g", [bytearray(24)], r"g: out\[0\] \(result 'result'\): expected a numpy.ndarray, got bytearray"),
    ("h", (np.zeros((2, 3), "float32"), (np.zeros((2, 3), "float32"),)),
     r"h: out\[1\] \(result 'result\[1\]\[0\]'\): expected a numpy.ndarray, got tuple"),
])
def test_out_values_that_are_not_arrays_are_argument_errors(fn, out, message):
    f = rm.VirtualMachine(rm.compile(from_source(G)))[fn]
    with pytest.raises(ArgumentError, match=message):
        f(np.zeros((2, 3), "float32"), out=out)


class _Unavailable:
    def __array__(self, dtype=None, copy=None):
        raise RuntimeError("device unavailable")


def test_an_array_like_numpy_cannot_convert_is_an_argument_error():
    f = rm.VirtualMachine(rm.compile(from_source(G)))["g"]
    with pytest.raises(ArgumentError, match=r"g: parameter 'x' \(#0\): expected an array of float32, got a "
                                            r"_Unavailable NumPy cannot convert \(RuntimeError: device unavailable\)"):
        f(_Unavailable())
