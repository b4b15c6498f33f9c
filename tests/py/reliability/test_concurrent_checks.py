"""Runtime checks under threads: the functions of a compiled module share one error slot (and a library loaded
twice shares it across modules), so a failed check must be reported by the call that failed, never by another
thread's valid call, and the failing call must not return its results."""

from __future__ import annotations

import threading

import numpy as np

import relax_mlir
from relax_mlir.script import from_source

_SOURCE = """
@I.ir_module
class Module:
    @R.function
    def f(x: R.Tensor((256, 64), "float32"), i: R.Tensor((4096,), "int64")):
        with R.dataflow():
            a = R.take(x, i, axis=0)
            R.output(a)
        return a

    @R.function
    def g(x: R.Tensor((256, 64), "float32"), i: R.Tensor((4096,), "int64")):
        with R.dataflow():
            a = R.take(x, i, axis=0)
            R.output(a)
        return a
"""


def _hammer(call_bad, call_good, calls: int = 1500) -> dict[str, int]:
    """Two threads: one always passes an out-of-range index, the other valid ones; counts what each saw."""
    x = np.random.default_rng(0).standard_normal((256, 64)).astype(np.float32)
    bad = np.zeros(4096, np.int64)
    bad[-1] = 1000
    good = np.arange(4096, dtype=np.int64) % 256
    seen = {"bad returned": 0, "bad raised": 0, "good raised": 0, "good wrong": 0, "good right": 0}
    lock = threading.Lock()

    def run_bad():
        for _ in range(calls):
            try:
                call_bad(x, bad)
                outcome = "bad returned"
            except IndexError as exc:
                outcome = "bad raised" if "1000" in str(exc) else "bad returned"
            with lock:
                seen[outcome] += 1

    def run_good():
        for _ in range(calls):
            try:
                outcome = "good right" if np.array_equal(call_good(x, good), x[good]) else "good wrong"
            except IndexError:
                outcome = "good raised"
            with lock:
                seen[outcome] += 1

    threads = [threading.Thread(target=run_bad), threading.Thread(target=run_good)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return seen


def test_two_functions_of_one_module_on_two_threads_report_their_own_checks():
    vm = relax_mlir.VirtualMachine(relax_mlir.compile(from_source(_SOURCE)))
    seen = _hammer(vm["f"], vm["g"])
    assert seen == {"bad returned": 0, "bad raised": 1500, "good raised": 0, "good wrong": 0, "good right": 1500}


def test_one_library_loaded_twice_keeps_each_calls_check_apart(tmp_path):
    from relax_mlir.runtime import load_module

    path = str(tmp_path / "checked.so")
    relax_mlir.compile(from_source(_SOURCE)).export_library(path)
    first, second = load_module(path), load_module(path)  # the same bytes: mapped once, one error slot
    seen = _hammer(first["f"], second["f"])
    assert seen == {"bad returned": 0, "bad raised": 1500, "good raised": 0, "good wrong": 0, "good right": 1500}
