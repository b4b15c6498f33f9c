"""Ops that read by a data value check it in compiled code: an out-of-range index raises ``IndexError`` naming
the function, the op, its binding, the value and its position; nothing outside a buffer is read; the process
survives. Every bad call runs in a fresh interpreter (a crash would show as a signal, not a failed assert)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import relax_mlir

ROOT = Path(__file__).resolve().parents[3]

MODULE = '''
from relax_mlir.script import ir as I, relax as R

@I.ir_module
class Module:
    @R.function
    def take(x: R.Tensor((4, 3), "float32"), i: R.Tensor((3,), "int64")) -> R.Tensor((3, 3), "float32"):
        with R.dataflow():
            lv1 = R.take(x, i, axis=0)
            R.output(lv1)
        return lv1

    @R.function
    def take_dyn(x: R.Tensor(("n", 5), "float32"), i: R.Tensor(("k", 2), "int32")) -> R.Tensor(("k", 2, 5), "float32"):
        with R.dataflow():
            rows = R.take(x, i, axis=0)
            R.output(rows)
        return rows

    @R.function
    def take_empty(x: R.Tensor((0, 3), "float32"), i: R.Tensor((2,), "int64")) -> R.Tensor((2, 3), "float32"):
        with R.dataflow():
            e = R.take(x, i, axis=0)
            R.output(e)
        return e

    @R.function
    def take_wrap(x: R.Tensor((4, 3), "float32"), i: R.Tensor((5,), "int64")) -> R.Tensor((5, 3), "float32"):
        with R.dataflow():
            w = R.take(x, i, axis=0, mode="wrap")
            R.output(w)
        return w

    @R.function
    def take_clip(x: R.Tensor((4, 3), "float32"), i: R.Tensor((5,), "int64")) -> R.Tensor((4, 5), "float32"):
        with R.dataflow():
            c = R.take(x, i, axis=1, mode="clip")
            R.output(c)
        return c

    @R.function
    def take_grad(g: R.Tensor((3, 3), "float32"), i: R.Tensor((3,), "int64")) -> R.Tensor((4, 3), "float32"):
        with R.dataflow():
            back = R.grad.take_backward(g, i, axis=0, shape=(4, 3))
            R.output(back)
        return back

    @R.function
    def loss_grad(g: R.Tensor((), "float32"), p: R.Tensor((4, 10), "float32"), y: R.Tensor((4,), "int64")
                  ) -> R.Tensor((4, 10), "float32"):
        with R.dataflow():
            dp = R.grad.nll_loss_backward(g, p, y, reduction="sum", ignore_index=-100)
            R.output(dp)
        return dp

    @R.function
    def loss(p: R.Tensor(("n", 10), "float32"), y: R.Tensor(("n",), "int64")) -> R.Tensor((), "float32"):
        with R.dataflow():
            nll = R.nn.nll_loss(p, y, reduction="sum", ignore_index=-100)
            R.output(nll)
        return nll

    @R.function
    def gather(x: R.Tensor((4, 3), "float32"), i: R.Tensor((2, 3), "int64")) -> R.Tensor((2, 3), "float32"):
        with R.dataflow():
            g = R.gather_elements(x, i, axis=0)
            R.output(g)
        return g

    @R.function
    def scatter(x: R.Tensor((4, 3), "float32"), i: R.Tensor((2, 3), "int32"),
                u: R.Tensor((2, 3), "float32")) -> R.Tensor((4, 3), "float32"):
        with R.dataflow():
            s = R.scatter_elements(x, i, u, axis=0, reduction="add")
            R.output(s)
        return s

    @R.function
    def hot(i: R.Tensor(("n",), "int64")) -> R.Tensor(("n", 4), "float32"):
        with R.dataflow():
            h = R.one_hot(i, 1.0, 0.0, 4)
            R.output(h)
        return h
'''

# Runs in a fresh interpreter: compiles the module, makes each call, prints one JSON line per call.
RUNNER = '''
import json, sys
import numpy as np
import relax_mlir
sys.path.insert(0, sys.argv[1])
from checked_module import Module
vm = relax_mlir.VirtualMachine(relax_mlir.compile(Module))
for name, args in json.loads(sys.argv[2]):
    arrays = [np.asarray(a, dtype=d).reshape(s) for a, d, s in args]
    try:
        out = vm[name](*arrays)
        print(json.dumps({"ok": np.asarray(out).tolist()}), flush=True)
    except IndexError as err:
        print(json.dumps({"IndexError": str(err)}), flush=True)
'''

X = np.arange(12, dtype=np.float32).reshape(4, 3)


def _encode(a) -> list:
    a = np.asarray(a)
    return [a.tolist(), str(a.dtype), list(a.shape)]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("checked")
    (folder / "checked_module.py").write_text(MODULE)

    def call(*calls):
        encoded = json.dumps([[name, [_encode(a) for a in args]] for name, args in calls])
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
        proc = subprocess.run([sys.executable, "-c", RUNNER, str(folder), encoded], capture_output=True, text=True,
                              env=env, timeout=300)
        assert proc.returncode == 0, f"the process died (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
        return [json.loads(line) for line in proc.stdout.splitlines()]
    return call


def _module():
    from relax_mlir.script import from_source

    return from_source(MODULE)


def test_take_out_of_range_raises_and_the_process_lives(run):
    good = np.array([0, 1, -1])
    results = run(("take", (X, [0, 1, 100000000000])), ("take", (X, [0, 1, 7])), ("take", (X, [-5, 0, 0])),
                  ("take", (X, good)), ("take", (X, [3, 3, 4])))
    where = "take: binding 'lv1': relax.take: index"
    assert results[0] == {"IndexError": f"{where} 100000000000 at position 2 of the indices (flat, shape (3,)) "
                                        "is out of range for axis 0 of size 4"}
    assert results[1]["IndexError"].startswith(f"{where} 7 at position 2 ")
    assert results[2]["IndexError"].startswith(f"{where} -5 at position 0 ")  # -4 is the last row, -5 is not
    assert results[3] == {"ok": X[good].tolist()}  # the slot was cleared: a good call after a bad one works
    assert results[4]["IndexError"].startswith(f"{where} 4 at position 2 ")


def test_take_with_symbolic_sizes(run):
    x = np.arange(15, dtype=np.float32).reshape(3, 5)
    good = np.array([[0, 2], [-1, 1]], dtype=np.int32)
    results = run(("take_dyn", (x, good)), ("take_dyn", (x, np.array([[0, 1], [3, 0]], dtype=np.int32))))
    assert results[0] == {"ok": x[good].tolist()}
    assert results[1] == {"IndexError": "take_dyn: binding 'rows': relax.take: index 3 at position 2 of the indices "
                                        "(flat, shape (?, 2)) is out of range for axis 0 of size 3"}


def test_nll_loss_targets_are_checked(run):
    p = np.log(np.full((4, 10), 0.1, dtype=np.float32))
    results = run(("loss", (p, [0, 10, 1, 1])), ("loss", (p, [-1, 0, 0, 0])), ("loss", (p, [0, 0, 0, 10 ** 8])),
                  ("loss", (p, [0, 9, -100, 3])))
    message = "loss: binding 'nll': relax.nn.nll_loss: target {} at position {} of the targets (flat) is not a " \
              "class index in [0, 10) nor the ignore_index -100"
    assert results[0] == {"IndexError": message.format(10, 1)}
    assert results[1] == {"IndexError": message.format(-1, 0)}
    assert results[2] == {"IndexError": message.format(10 ** 8, 3)}
    np.testing.assert_allclose(results[3]["ok"], -3 * np.log(0.1), rtol=1e-6)  # the ignored target adds nothing


def test_the_interpreter_raises_index_error_too():
    mod = _module()
    with pytest.raises(IndexError):
        relax_mlir.interpret(mod, "take", X, np.array([0, 1, 7]))
    with pytest.raises(IndexError, match="target 10 is out of range"):
        relax_mlir.interpret(mod, "loss", np.zeros((2, 10), np.float32), np.array([10, 0]))


def test_checks_are_visible_in_the_linalg_stage():
    text = relax_mlir.to_mlir(_module(), "linalg", function="take")
    assert 'memref.global "private" @relax_mlir_error : memref<4xi64>' in text
    assert "func.func @relax_mlir_error_address() -> i64" in text
    assert "relax_mlir.checks = [\"take: binding 'lv1': relax.take: index {value}" in text


def test_take_modes_wrap_and_clip_never_raise_and_match_numpy(run):
    wild = np.array([-9, -1, 4, 7, 10 ** 12])
    results = run(("take_wrap", (X, wild)), ("take_clip", (X, wild)))
    assert results[0] == {"ok": np.take(X, wild, axis=0, mode="wrap").tolist()}
    assert results[1] == {"ok": np.take(X, wild, axis=1, mode="clip").tolist()}


def test_the_backward_ops_check_their_indices(run):
    g = np.ones((3, 3), np.float32)
    p = np.zeros((4, 10), np.float32)
    results = run(("take_grad", (g, [0, 4, 1])), ("take_grad", (g, [0, -1, -1])),
                  ("loss_grad", (np.float32(1), p, [0, 3, 12, 1])), ("loss_grad", (np.float32(1), p, [0, -100, 9, 1])))
    assert results[0] == {"IndexError": "take_grad: binding 'back': relax.grad.take_backward: index 4 at position 1 "
                                        "of the indices (flat, shape (3,)) is out of range for axis 0 of size 4"}
    want = np.zeros((4, 3), np.float32)
    np.add.at(want, [0, 3, 3], g)  # -1 is the last row, twice
    assert results[1] == {"ok": want.tolist()}
    assert results[2] == {"IndexError": "loss_grad: binding 'dp': relax.grad.nll_loss_backward: target 12 at "
                                        "position 2 of the targets (flat) is not a class index in [0, 10) nor the "
                                        "ignore_index -100"}
    dp = np.zeros((4, 10), np.float32)
    dp[[0, 2, 3], [0, 9, 1]] = -1  # d(sum of -p[n, y_n]) / dp; the ignored item gets nothing
    assert results[3] == {"ok": dp.tolist()}


def test_take_modes_in_the_interpreter():
    mod = _module()
    wild = np.array([-9, -1, 4, 7, 10 ** 12])
    np.testing.assert_array_equal(relax_mlir.interpret(mod, "take_wrap", X, wild), np.take(X, wild, 0, mode="wrap"))
    np.testing.assert_array_equal(relax_mlir.interpret(mod, "take_clip", X, wild), np.take(X, wild, 1, mode="clip"))
    with pytest.raises(IndexError):
        relax_mlir.interpret(mod, "take_grad", np.ones((3, 3), np.float32), np.array([0, 4, 1]))


def test_checks_off_reads_nothing_outside_and_raises_nothing(tmp_path):
    """``compile(..., checks=False)``: no error slot, no IndexError, and still no read outside the buffer."""
    from relax_mlir.backend.pipeline import PipelineOptions

    text = relax_mlir.to_mlir(_module(), "linalg", function="take", options=PipelineOptions(checks=False))
    assert "relax_mlir_error" not in text and "relax_mlir.checks_off" in text
    (tmp_path / "checked_module.py").write_text(MODULE)
    code = RUNNER.replace("relax_mlir.compile(Module)", "relax_mlir.compile(Module, checks=False)")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    calls = json.dumps([["take", [_encode(X), _encode(np.array([0, 10 ** 11, -(10 ** 11)]))]]])
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path), calls], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (result,) = [json.loads(line) for line in proc.stdout.splitlines()]
    assert result["ok"][0] == X[0].tolist()  # the in-range row is right; the others are unspecified but finite
    assert np.isfinite(result["ok"]).all()


def test_an_empty_axis_has_no_valid_index(run):
    """Static or dynamic, an empty axis reads nothing and every index of it is out of range."""
    results = run(("take_empty", (np.zeros((0, 3), np.float32), [0, 0])),
                  ("take_dyn", (np.zeros((0, 5), np.float32), np.zeros((1, 2), np.int32))),
                  ("take_dyn", (np.zeros((0, 5), np.float32), np.zeros((0, 2), np.int32))))
    assert results[0] == {"IndexError": "take_empty: binding 'e': relax.take: index 0 at position 0 of the indices "
                                        "(flat, shape (2,)) is out of range for axis 0 of size 0"}
    assert results[1]["IndexError"].startswith("take_dyn: binding 'rows': relax.take: index 0 at position 0 ")
    assert results[2] == {"ok": []}  # no index, nothing to check: an empty result


def test_gather_and_scatter_elements_check_their_indices(run):
    ok = np.array([[0, -1, 2], [3, 3, -4]])
    u = np.ones((2, 3), np.float32)
    results = run(("gather", (X, ok)), ("gather", (X, [[0, 1, 2], [4, 0, 0]])), ("gather", (X, [[0, -5, 0], [0, 0, 0]])),
                  ("scatter", (X, ok.astype(np.int32), u)), ("scatter", (X, np.array([[0, 0, 0], [0, 9, 0]], np.int32), u)))
    assert results[0] == {"ok": np.take_along_axis(X, ok % 4, axis=0).tolist()}
    where = "gather: binding 'g': relax.gather_elements: index"
    assert results[1] == {"IndexError": f"{where} 4 at position 3 of the indices (flat, shape (2, 3)) is out of "
                                        "range for axis 0 of size 4"}
    assert results[2]["IndexError"].startswith(f"{where} -5 at position 1 ")
    want = X.copy()
    np.add.at(want, (ok % 4, np.arange(3)[None].repeat(2, 0)), u)
    assert results[3] == {"ok": want.tolist()}
    assert results[4]["IndexError"].startswith("scatter: binding 's': relax.scatter_elements: index 9 at position 4 ")


def test_one_hot_takes_only_zero_to_depth(run):
    results = run(("hot", (np.array([0, 3, 1]),)), ("hot", (np.array([0, 4]),)), ("hot", (np.array([-1, 0]),)))
    assert results[0] == {"ok": np.eye(4)[[0, 3, 1]].tolist()}
    message = "hot: binding 'h': relax.one_hot: index {} at position {} of the indices (flat, shape (?,)) is out " \
              "of range for axis 1 of size 4 (one_hot takes [0, 4))"
    assert results[1] == {"IndexError": message.format(4, 1)}
    assert results[2] == {"IndexError": message.format(-1, 0)}


def test_the_interpreter_checks_the_element_indices_too():
    mod = _module()
    with pytest.raises(IndexError, match="index 4 at position 3 is out of range"):
        relax_mlir.interpret(mod, "gather", X, np.array([[0, 1, 2], [4, 0, 0]]))
    with pytest.raises(IndexError, match="relax.one_hot: index -1 at position 0"):
        relax_mlir.interpret(mod, "hot", np.array([-1, 0]))


def test_a_library_with_the_older_three_word_error_slot_reports_without_reading_past_it(tmp_path, monkeypatch):
    """Libraries exported before the slot had its fourth word (the extent of a dynamic axis) say nothing of it in
    their metadata: the runtime reads three words from them (and never clears a fourth it does not own)."""
    from relax_mlir.backend import build
    from relax_mlir.backend.legalize import checks
    from relax_mlir.runtime import load_module

    monkeypatch.setattr(checks, "SLOT_WORDS", 3)
    written = build.library_metadata

    def older(*args):
        meta = written(*args)
        del meta["error_slot_words"]
        return meta

    monkeypatch.setattr(build, "library_metadata", older)
    monkeypatch.setenv("RELAX_MLIR_CACHE", "0")
    path = str(tmp_path / "old.so")
    relax_mlir.compile(_module()).export_library(path)
    monkeypatch.undo()
    lib = load_module(path)
    assert len(lib.error_slot) == 3
    x = np.arange(15, dtype=np.float32).reshape(3, 5)
    with pytest.raises(IndexError, match=r"out of range for axis 0 of size \?$"):
        lib["take_dyn"](x, np.array([[0, 1], [3, 0]], dtype=np.int32))
    np.testing.assert_array_equal(lib["take_dyn"](x, np.array([[0, 2]], dtype=np.int32)), x[[[0, 2]]])


def test_a_symbolic_class_count_is_named_with_its_size():
    from relax_mlir.script import from_source

    # the message said "[0, C)" for a class count known only when the call ran
    mod = from_source('''
@I.ir_module
class Module:
    @R.function
    def main(p: R.Tensor(("n", "c"), "float32"), t: R.Tensor(("n",), "int64")):
        with R.dataflow():
            y = R.nn.nll_loss(p, t)
            R.output(y)
        return y
''')
    f = relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"]
    with pytest.raises(IndexError, match=r"target 9 at position 1 of the targets \(flat\) is not a class index in "
                                         r"\[0, 7\) nor the ignore_index -100"):
        f(np.zeros((3, 7), np.float32), np.array([0, 9, 1]))
