"""The one argument policy (``relax_mlir/backend/arguments.py``, ``docs/arguments.md``), row by row, through a
compiled function (``VirtualMachine``) and through ``Trainer.update_params``: the same inputs get the same
outcome in both. Every row of the document's table is a case here and every case a row there.

Oracles: a converted argument must give exactly what NumPy's own conversion (``np.asarray(a, dtype)``) gives when
passed as an exact array; a refused one raises ``ArgumentError`` with the documented words; the caller's argument
is never modified.
"""

from __future__ import annotations

import os
import re

import numpy as np
import pytest

import relax_mlir as rm
from relax_mlir.backend.arguments import ArgumentError
from relax_mlir.ir import TensorStructInfo
from relax_mlir.models import mlp
from relax_mlir.script import from_source
from relax_mlir.training import SGD, CrossEntropyLoss, SetupTrainer, Trainer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

MODULE = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 3), "float32"), y: R.Tensor(("n",), "int64")):
        with R.dataflow():
            a = R.multiply(x, R.const(2.0, "float32"))
            b = R.add(y, R.const(1, "int64"))
            R.output(a, b)
        return (a, b)
"""

RNG = np.random.default_rng(7)
X = RNG.normal(size=(4, 3)).astype(np.float32)
Y = np.array([0, 1, 1, 0], np.int64)


def _misaligned(a: np.ndarray) -> np.ndarray:
    raw = np.zeros(a.nbytes + 1, np.uint8)
    out = raw[1:].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def _read_only(a: np.ndarray) -> np.ndarray:
    a = a.copy()
    a.flags.writeable = False
    return a


# case id -> (x, y, outcome): "as is" (no copy), "converted" (one copy, the same numbers as NumPy's conversion),
# "MemoryError", or the start of the ArgumentError's message after the parameter's name.
CASES = {
    "exact arrays": (X, Y, "as is"),
    "read-only arrays": (_read_only(X), _read_only(Y), "as is"),
    "zero-size batch": (np.zeros((0, 3), np.float32), np.zeros(0, np.int64), "as is"),
    "nested lists": (X.tolist(), Y.tolist(), "converted"),
    "Fortran order": (np.asfortranarray(X), Y, "converted"),
    "strided view": (np.repeat(X, 2, axis=0)[::2], np.repeat(Y, 2)[::2], "converted"),
    "misaligned": (_misaligned(X), _misaligned(Y), "converted"),
    "non-native byte order": (X.astype(">f4"), Y.astype(">i8"), "converted"),
    "float64 data": (X.astype(np.float64), Y, "converted"),
    "float16 data": (X.astype(np.float16), Y, "converted"),
    "uint8 data": ((X * 10).astype(np.uint8), Y, "converted"),
    "int32 data": ((X * 1000).astype(np.int32), Y, "converted"),
    "int32 data beyond float32's integers": (np.where(X > 0, 2**24 + 1, 0).astype(np.int32), Y,
                                              "expected float32; the int32 value 16777217 at flat position"),
    "int32 labels": (X, Y.astype(np.int32), "converted"),
    "bool labels": (X, Y.astype(bool), "converted"),
    "float labels": (X, Y.astype(np.float32), "expected dtype int64, got float32 (an integer parameter takes no floats"),
    "labels that do not fit": (X, np.array([0, 2**63, 1, 0], np.uint64),
                               "expected int64; the uint64 value 9223372036854775808 at flat position 1 does not fit"),
    "float64 beyond float32": (np.where(X > 0, 1e300, X.astype(np.float64)), Y,
                               "expected float32; the float64 value 1e+300 at flat position"),
    "masked array": (np.ma.masked_array(X, X > 0), Y, "expected an array of float32, got a numpy.ma.MaskedArray"),
    "complex data": (X.astype(np.complex64), Y, "expected dtype float32, got complex64"),
    "ragged list": ([[1.0], [1.0, 2.0]], Y, "expected an array of float32, got a list NumPy cannot convert"),
    "object array": (np.array([object()] * 12).reshape(4, 3), Y, "expected dtype float32, got object"),
    "wrong rank": (X.reshape(4, 3, 1), Y, "expected shape"),
    "too large to convert": (np.broadcast_to(np.float64(1), (2**42, 3)), Y, "MemoryError"),
}


@pytest.fixture(scope="module")
def vm_main():
    return rm.VirtualMachine(rm.compile(from_source(MODULE)))["main"]


@pytest.fixture(scope="module")
def trainer():
    setup = SetupTrainer(CrossEntropyLoss(reduction="sum"), SGD(0.01),
                         [TensorStructInfo(("n", 2), "float32"), TensorStructInfo(("n",), "int64")])
    return Trainer(mlp("n", (3, 5, 2)), None, setup).build()


def _expect(outcome: str, call, name: str):
    if outcome == "MemoryError":
        with pytest.raises(MemoryError):
            call()
    elif outcome not in ("as is", "converted"):
        with pytest.raises(ArgumentError, match=re.escape(name) + ".*" + re.escape(outcome)):
            call()
    else:
        return call()
    return None


@pytest.mark.parametrize("case", list(CASES))
def test_policy_rows(case, vm_main, trainer):
    x, y, outcome = CASES[case]
    x_before, y_before = (a.copy() if isinstance(a, np.ndarray) and a.size < 2**20 else None for a in (x, y))
    exact_x = np.asarray(x, np.float32) if outcome in ("as is", "converted") else None
    exact_y = np.asarray(y, np.int64) if outcome in ("as is", "converted") else None

    got = _expect(outcome, lambda: vm_main(x, y), "parameter ")
    if got is not None:
        want = vm_main(exact_x, exact_y)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
        np.testing.assert_array_equal(got[0], exact_x * 2)  # and both are the program's numbers

    trainer.zero_init_params()
    loss = _expect(outcome, lambda: trainer.update_params(x, y), "Trainer.update_params: ")
    if loss is not None:
        trainer.zero_init_params()
        np.testing.assert_array_equal(loss.numpy(), trainer.update_params(exact_x, exact_y).numpy())

    for a, before in zip((x, y), (x_before, y_before)):  # the caller's argument is never modified
        if before is not None:
            np.testing.assert_array_equal(a, before)


def test_an_exact_array_is_passed_without_a_copy(vm_main):
    """The compiled function reads the caller's buffer: a view of it written between two calls changes the
    result (a copy would not see the write)."""
    x = X.copy()
    first = vm_main(x, Y)[0].copy()
    x[0, 0] += 1.0
    assert vm_main(x, Y)[0][0, 0] == first[0, 0] + 2.0


def test_the_document_lists_every_case():
    with open(os.path.join(ROOT, "docs", "arguments.md"), encoding="utf-8") as f:
        rows = re.findall(r"^\| ([^|]+?) \|", f.read(), flags=re.M)
    documented = [r for r in rows if r not in ("input", "---")]
    assert sorted(documented) == sorted(CASES)


@pytest.fixture(scope="module")
def static_trainer():
    setup = SetupTrainer(CrossEntropyLoss(reduction="sum"), SGD(0.01),
                         [TensorStructInfo((4, 2), "float32"), TensorStructInfo((4,), "int64")])
    trainer = Trainer(mlp(4, (3, 5, 2)), None, setup).build()
    assert trainer._step_fn is not None  # static shapes: the step writes the Trainer's buffers, one native call
    return trainer


@pytest.mark.parametrize("case", list(CASES))
def test_policy_rows_through_a_static_trainers_one_call_step(case, static_trainer):
    """With static shapes the Trainer hands the batch as given to the compiled step's native checks
    (``call_scanning``); anything they do not take goes the checked route: the outcomes are the table's."""
    x, y, outcome = CASES[case]
    if case == "zero-size batch":  # (the batch size is 4 here)
        outcome = "expected shape (4, 3), got (0, 3)"
    exact_x = np.asarray(x, np.float32) if outcome in ("as is", "converted") else None
    exact_y = np.asarray(y, np.int64) if outcome in ("as is", "converted") else None
    static_trainer.xavier_uniform_init_params(seed=5)  # (zeros would hide x)
    step = static_trainer.step
    loss = _expect(outcome, lambda: static_trainer.update_params(x, y), "Trainer.update_params: ")
    if loss is None:
        assert static_trainer.step == step  # refused: nothing adopted
        return
    params = [p.copy() for p in static_trainer.params]
    static_trainer.xavier_uniform_init_params(seed=5)  # (zeros would hide x)
    want = static_trainer.update_params(exact_x, exact_y)
    np.testing.assert_array_equal(loss.numpy(), want.numpy())
    for got, ref in zip(params, static_trainer.params):
        np.testing.assert_array_equal(got, ref)


UNSIGNED = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), "uint8"), y: R.Tensor((4,), "int32")):
        with R.dataflow():
            a = R.add(x, x)
            b = R.add(y, y)
            R.output(a, b)
        return (a, b)
"""


def test_integers_convert_between_signed_and_unsigned_when_every_value_fits():
    """A list of ints is int64 to NumPy, which calls int64 -> uint8 no ``same_kind`` cast (uint64 -> int64 it
    does): both directions convert when the values fit, and a value that does not is refused with its position."""
    main = rm.VirtualMachine(rm.compile(from_source(UNSIGNED)))["main"]
    a, b = main([1, 2, 3, 200], np.array([5, 6, 7, 2**31 - 1], np.uint64))
    np.testing.assert_array_equal(a, np.array([2, 4, 6, 144], np.uint8))  # uint8 arithmetic wraps, as NumPy's
    np.testing.assert_array_equal(b, np.array([5, 6, 7, 2**31 - 1], np.int32) * np.int32(2))
    with pytest.raises(ArgumentError, match=r"expected uint8; the int64 value -1 at flat position 2 does not fit"):
        main([1, 2, -1, 4], np.zeros(4, np.int32))
    with pytest.raises(ArgumentError, match=r"expected int32; the uint64 value 2147483648 at flat position 0"):
        main(np.zeros(4, np.uint8), np.array([2**31, 0, 0, 0], np.uint64))
