"""Checkpoint files (``training/checkpoint_io.py``): every malformed file gets one CheckpointError naming what is
wrong and what was expected (before compiling, for ``--resume``); a save killed by SIGKILL at random moments
always leaves a loadable file, bit for bit the previous or the new version; two processes saving to one path
never leave a broken file."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from relax_mlir.ir import TensorStructInfo
from relax_mlir.models import cnn, mlp
from relax_mlir.training import SetupTrainer, Trainer
from relax_mlir.training.checkpoint_io import CheckpointError, read_checkpoint, read_npz, write_checkpoint
from relax_mlir.training.loss import CrossEntropyLoss
from relax_mlir.training.optimizer import Adam, AdamW, MomentumSGD

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
B, SIZES = 8, (6, 5, 3)


def _trainer(sizes=SIZES) -> Trainer:
    setup = SetupTrainer(CrossEntropyLoss(), Adam(0.01),
                         [TensorStructInfo((B, sizes[-1]), "float32"), TensorStructInfo((B,), "int64")])
    return Trainer(mlp(B, sizes), len(sizes) * 2 - 2, setup)


def _version(trainer: Trainer, i: int) -> None:
    """Version ``i`` of a trainer's state: parameters from seed ``i``, every optimizer array filled with ``i``."""
    trainer.xavier_uniform_init_params(seed=i)
    trainer.optim_state = [np.full(a.shape, i, a.dtype) for a in trainer.optim_state]
    trainer.step = i


def _assert_is_version(trainer: Trainer, i: int) -> None:
    want = _trainer(tuple(p.shape[0] for p in trainer.params[::2]) + (trainer.params[-1].shape[0],))
    _version(want, i)
    assert trainer.step == i
    for got, expected in zip(trainer.params + trainer.optim_state, want.params + want.optim_state):
        np.testing.assert_array_equal(got, expected, strict=True)


@pytest.fixture
def saved(tmp_path):
    """A good checkpoint of the MLP (version 3) and its arrays as written."""
    trainer = _trainer()
    _version(trainer, 3)
    path = str(tmp_path / "good.npz")
    trainer.save(path, extra={"note": "hello"})
    with np.load(path) as f:
        arrays = {k: f[k] for k in f.files}
    return path, arrays


def _rewrite(tmp_path, arrays, name="bad.npz", **changes) -> str:
    """The good checkpoint's arrays with some replaced (value None: removed), written with np.savez."""
    out = {k: v for k, v in {**arrays, **changes}.items() if v is not None}
    path = str(tmp_path / name)
    np.savez(path, **out)
    return path


def _malformed(tmp_path, saved) -> dict[str, tuple[str, str]]:
    """name -> (path, the message expected)."""
    good, arrays = saved
    data = open(good, "rb").read()
    files = {"empty.npz": b"", "truncated.npz": data[:len(data) // 2], "text.npz": b"w0 = [[0.1, 0.2]]\n"}
    for name, content in files.items():
        (tmp_path / name).write_bytes(content)
    np.save(tmp_path / "single.npy", np.zeros(3))
    with zipfile.ZipFile(tmp_path / "other.zip", "w") as z:
        z.writestr("readme.txt", "not ours")
    with zipfile.ZipFile(tmp_path / "pickled.npz", "w") as z:
        with z.open("format.npy", "w") as f:
            np.lib.format.write_array(f, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    w0 = arrays["param/w0"]
    nan_w0, inf_opt = w0.copy(), arrays["optim/3"].copy()
    nan_w0[1, 2] = np.nan
    inf_opt[0, 0] = -np.inf
    d = str(tmp_path)
    return {
        "missing": (d + "/absent.npz", r"absent.npz: no such file; expected a checkpoint \(.npz\) written by Trainer.save or --save$"),
        "directory": (d, r": is a directory; expected a checkpoint \(.npz\)"),
        "empty": (d + "/empty.npz", r"empty.npz: the file is empty; expected a checkpoint \(.npz\) written by Trainer.save or --save$"),
        "truncated": (d + "/truncated.npz", r"truncated.npz: truncated or damaged \(.*\); expected a complete "
                                            r"checkpoint"),
        "text": (d + "/text.npz", r"text.npz: not a zip archive \(it starts with b'w0 = \[\[0'\); expected a "
                                  r"checkpoint \(.npz\)"),
        "npy": (d + "/single.npy", r"single.npy: a single .npy array, not an .npz archive; expected a checkpoint \(.npz\)"),
        "foreign zip": (d + "/other.zip", r"other.zip: a zip archive that is not an .npz: it holds readme.txt; "
                                          r"expected only .npy arrays, a checkpoint"),
        "pickled": (d + "/pickled.npz", r"pickled.npz: the entry format.npy holds Python objects, which loading "
                                        r"never unpickles; expected numeric arrays"),
        "foreign npz": (_rewrite(tmp_path, {"x": np.zeros(2)}, "data.npz"),
                        r"data.npz: an .npz without a 'format' entry \(it holds x\); expected a relax-mlir checkpoint "
                        r"\(format 1\)"),
        "format text": (_rewrite(tmp_path, arrays, "fmt_text.npz", format=np.array("abc")),
                        r"its 'format' entry is 'abc' \(<U3\); expected the integer 1"),
        "format 2": (_rewrite(tmp_path, arrays, "fmt2.npz", format=np.array(2)),
                     r"its 'format' entry is 2 \(int64\); expected the integer 1"),
        "no step": (_rewrite(tmp_path, arrays, "nostep.npz", step=None),
                    r"the 'step' entry must be an integer scalar in \[0, 2\*\*63\), got nothing"),
        "float step": (_rewrite(tmp_path, arrays, "fstep.npz", step=np.array(1.5)),
                       r"the 'step' entry must be an integer scalar in \[0, 2\*\*63\), got float64 \(\)"),
        # 2**64 - 1 as uint64 loaded (the Trainer's step is an int64), then its next save failed
        "huge seed": (_rewrite(tmp_path, arrays, "hseed.npz", seed=np.array(2**64 - 1, np.uint64)),
                      r"the 'seed' entry must be an integer scalar in \[0, 2\*\*63\), got 18446744073709551615$"),
        "dtype": (_rewrite(tmp_path, arrays, "dtype.npz", **{"param/w0": w0.astype(np.float64)}),
                  r"dtype.npz: param/w0 is float64 \(6, 5\), expected float32 \(6, 5\)$"),
        "shape": (_rewrite(tmp_path, arrays, "shape.npz", **{"param/b1": np.zeros(4, np.float32)}),
                  r"shape.npz: param/b1 is float32 \(4,\), expected float32 \(3,\)$"),
        "optim missing": (_rewrite(tmp_path, arrays, "optim.npz", **{"optim/10": None}),
                          r"optim.npz: its optimizer state does not fit this trainer's Adam: it lacks optim/10$"),
        "nan": (_rewrite(tmp_path, arrays, "nan.npz", **{"param/w0": nan_w0}),
                r"nan.npz: param/w0 holds 1 NaN \(first at \[1, 2\]\), expected finite values$"),
        "inf": (_rewrite(tmp_path, arrays, "inf.npz", **{"optim/3": inf_opt}),
                r"inf.npz: optim/3 holds 1 Inf \(first at \[0, 0\]\), expected finite values$"),
        "negative steps": (_rewrite(tmp_path, arrays, "steps.npz", **{"optim/0": np.array(-7, np.int64)}),
                           r"steps.npz: optim/0 \(the optimizer's step count\) is -7, expected a count >= 0$"),
        "optimizer number": (_rewrite(tmp_path, arrays, "optnum.npz", optimizer=np.array(3)),
                             r"optnum.npz: the 'optimizer' entry must be a class name \(a string such as 'Adam'\), "
                             r"got int64 '3'$"),
        "optimizer list": (_rewrite(tmp_path, arrays, "optlist.npz", optimizer=np.array(["Adam", "SGD"])),
                           r"optlist.npz: the 'optimizer' entry must be a class name \(a string such as 'Adam'\), "
                           r"got <U4 \(2,\)$"),
    }


CASES = ["missing", "directory", "empty", "truncated", "text", "npy", "foreign zip", "pickled", "foreign npz",
         "format text", "format 2", "no step", "float step", "huge seed", "dtype", "shape", "optim missing", "nan", "inf",
         "negative steps", "optimizer number", "optimizer list"]


@pytest.mark.parametrize("case", CASES)
def test_malformed_checkpoint_gets_one_clear_message(tmp_path, saved, case):
    path, message = _malformed(tmp_path, saved)[case]
    trainer = _trainer()
    _version(trainer, 7)
    error = FileNotFoundError if case == "missing" else CheckpointError
    with pytest.raises(error, match=f"^Trainer.load: {path}" if case == "directory" else message) as info:
        trainer.load(path)
    assert str(info.value).startswith(f"Trainer.load: {path}")
    assert len(str(info.value).splitlines()) == 1
    if case == "directory":
        assert "is a directory; expected a checkpoint (.npz)" in str(info.value)
    _assert_is_version(trainer, 7)  # a refused file changes nothing


def test_another_models_checkpoint_names_every_difference(tmp_path, saved):
    path, _ = saved
    setup = SetupTrainer(CrossEntropyLoss(), Adam(0.01),
                         [TensorStructInfo((4, 3), "float32"), TensorStructInfo((4,), "int64")])
    other = Trainer(cnn(4, (1, 4, 4), (2,), 3), None, setup)
    with pytest.raises(CheckpointError, match=r"a checkpoint of another model: it lacks param/conv0_weight, .*; "
                                              r"it has param/w0, param/b0, param/w1, param/b1 that this model does "
                                              r"not"):
        other.load(path)


def _other_optimizer(optimizer) -> Trainer:
    """The MLP of ``_trainer`` with another optimizer."""
    setup = SetupTrainer(CrossEntropyLoss(), optimizer,
                         [TensorStructInfo((B, SIZES[-1]), "float32"), TensorStructInfo((B,), "int64")])
    return Trainer(mlp(B, SIZES), len(SIZES) * 2 - 2, setup)


def test_a_checkpoint_of_another_optimizer_class_is_refused_naming_both(tmp_path, saved):
    # Adam's and AdamW's states have one layout: without the record the state loaded and went on under AdamW's
    # decoupled decay. The learning rate (a schedule) may change.
    path, arrays = saved
    assert str(arrays["optimizer"]) == "Adam"
    with pytest.raises(CheckpointError, match=r"^Trainer.load: .*good.npz: saved with the optimizer Adam, but this "
                                              r"trainer's is AdamW \(the state would continue under another update "
                                              r"rule\); expected a checkpoint saved with AdamW$"):
        _other_optimizer(AdamW(0.01)).load(path)
    with pytest.raises(CheckpointError, match=r"saved with the optimizer Adam, but this trainer's is MomentumSGD "
                                              r"\(.*\); expected a checkpoint saved with MomentumSGD$"):
        _other_optimizer(MomentumSGD(0.1, 0.9)).load(path)
    adamw = _other_optimizer(AdamW(0.01))
    _version(adamw, 2)
    adamw.save(str(tmp_path / "adamw.npz"))
    with pytest.raises(CheckpointError, match=r"saved with the optimizer AdamW, but this trainer's is Adam "):
        _trainer().load(str(tmp_path / "adamw.npz"))
    faster = _other_optimizer(Adam(0.5, betas=(0.8, 0.99)))  # other hyper-parameters: accepted
    faster.load(path)
    _assert_is_version(faster, 3)


def test_a_checkpoint_without_the_optimizer_record_still_loads(tmp_path, saved):
    # (files written before the record existed); another optimizer's layout is then named as the optimizer state's
    _, arrays = saved
    old = _rewrite(tmp_path, arrays, "old.npz", optimizer=None)
    trainer = _other_optimizer(AdamW(0.01))
    trainer.load(old)
    _assert_is_version(trainer, 3)
    with pytest.raises(CheckpointError, match=r"^Trainer.load: .*old.npz: its optimizer state does not fit this "
                                              r"trainer's MomentumSGD \(saved with another optimizer\): it has "
                                              r"optim/5, .* that this optimizer does not; optim/1 is float32 \(\), "
                                              r"expected float32 \(6, 5\); "):
        _other_optimizer(MomentumSGD(0.1, 0.9)).load(old)


def test_paths_are_str_bytes_or_pathlike_and_never_file_descriptors(tmp_path, saved):
    # open() and os.path take an int for a file descriptor: load(3) read the caller's descriptor and closed it,
    # load(0) read stdin
    path, _ = saved
    trainer = _trainer()
    _version(trainer, 7)
    fd = os.open(path, os.O_RDONLY)
    try:
        for bad in (fd, 0, 1.5, None):
            with pytest.raises(TypeError, match=rf"^Trainer.load: path must be a str or os.PathLike, got "
                                                rf"{type(bad).__name__}$"):
                trainer.load(bad)
        assert os.lseek(fd, 0, os.SEEK_CUR) == 0  # the descriptor is open and unread
        with pytest.raises(TypeError, match=r"^Trainer.save: path must be a str or os.PathLike, got int$"):
            trainer.save(fd)
        with pytest.raises(TypeError, match=r"^data.npz: path must be a str or os.PathLike, got int$"):
            read_npz(fd, "data.npz")
        with pytest.raises(TypeError, match=r"^--resume 3: path must be a str or os.PathLike, got int$"):
            read_checkpoint(fd, "--resume 3")
        assert os.lseek(fd, 0, os.SEEK_CUR) == 0
    finally:
        os.close(fd)
    _assert_is_version(trainer, 7)
    trainer.save(os.fsencode(tmp_path / "bytes.npz"))
    trainer.save(tmp_path / "pathlib.npz")
    for p in (os.fsencode(tmp_path / "pathlib.npz"), tmp_path / "bytes.npz"):
        loaded = _trainer()
        loaded.load(p)
        _assert_is_version(loaded, 7)
    with pytest.raises(FileNotFoundError, match=r"^Trainer.load: .*/absent.npz: no such file"):
        trainer.load(os.fsencode(tmp_path / "absent.npz"))  # the message shows the path, not b'...'


def test_good_checkpoint_round_trips_exactly(saved):
    path, _ = saved
    trainer = _trainer()
    extra = trainer.load(path)
    _assert_is_version(trainer, 3)
    assert str(extra["note"]) == "hello"


def test_save_refuses_non_finite_state_and_bad_paths(tmp_path):
    trainer = _trainer()
    _version(trainer, 1)
    trainer.params[2][0, 1] = np.inf
    with pytest.raises(CheckpointError, match=r"not written: param/w1 holds 1 Inf \(first at \[0, 1\]\)"):
        trainer.save(str(tmp_path / "x.npz"))
    assert os.listdir(tmp_path) == []
    _version(trainer, 1)
    with pytest.raises(IsADirectoryError, match="is a directory; expected a file name"):
        trainer.save(str(tmp_path))
    with pytest.raises(FileNotFoundError, match="the directory .*/nowhere does not exist"):
        trainer.save(str(tmp_path / "nowhere" / "x.npz"))


@pytest.mark.parametrize("extra, message", [
    ({"cfg": {"lr": 0.1}}, r"extra\['cfg'\] = \{'lr': 0.1\} would be stored as Python objects"),
    ({"none": None}, r"extra\['none'\] = None would be stored as Python objects"),
    ({"hist": [1.0, [2.0, 3.0]]}, r"extra\['hist'\] is not an array of one shape"),
])
def test_save_refuses_extras_that_load_would_refuse_and_keeps_the_old_file(saved, extra, message):
    # (save wrote them, replacing a good checkpoint with one load refused: Python objects are never unpickled)
    path, _ = saved
    before = open(path, "rb").read()
    trainer = _trainer()
    trainer.load(path)
    with pytest.raises(CheckpointError, match=f"not written: {message}"):
        trainer.save(path, extra=extra)
    assert open(path, "rb").read() == before
    trainer.save(path, extra={"lr": 0.1, "tags": ["a", "b"], "ok": True})
    assert float(_trainer().load(path)["lr"]) == 0.1


def test_loading_never_unpickles(tmp_path, monkeypatch):
    import pickle

    def refuse(*args, **kwargs):
        raise AssertionError("unpickling attempted")

    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    path = str(tmp_path / "obj.npz")
    with zipfile.ZipFile(path, "w") as z:
        with z.open("format.npy", "w") as f:
            np.lib.format.write_array(f, np.array([object()], dtype=object), allow_pickle=True)
    with pytest.raises(CheckpointError, match="never unpickles"):
        read_checkpoint(path, "load")


def test_resume_refuses_a_bad_checkpoint_before_compiling(tmp_path, saved, monkeypatch):
    """--resume with malformed files, another model's checkpoint, NaN parameters or no run record: the error comes
    before Trainer.build (made to fail here) is reached."""
    from relax_mlir.training import run
    from relax_mlir.training.config import TrainConfig
    from relax_mlir.training.data import load_data

    cfg = TrainConfig(target="numpy", epochs=2, hidden=(16,), save=str(tmp_path / "run.npz"))
    monkeypatch.setattr(Trainer, "build", lambda self, *args, **kwargs: self)
    data = load_data(None)
    trainer = run.make_trainer(cfg, data)
    trainer.step = 1  # (the record of a whole epoch 0: a step or more, one epoch's history, as train writes)
    run._save(trainer, cfg, 0, run.data_fingerprint(data), run.History([2.0], [0.5], [0.1], [2.0]))
    with np.load(cfg.save) as f:
        arrays = {k: f[k] for k in f.files}
    w0 = arrays["param/w0"].copy()
    w0[0, 0] = np.nan
    paths = {"nan": _rewrite(tmp_path, arrays, "run_nan.npz", **{"param/w0": w0}),
             "other model": _rewrite(tmp_path, arrays, "run_other.npz", **{"param/w9": w0, "param/w0": None})}

    def no_build(self, *args, **kwargs):
        raise AssertionError("compiled before the checkpoint was checked")

    monkeypatch.setattr(Trainer, "build", no_build)
    cases = {case: _malformed(tmp_path, saved)[case] for case in ("text", "truncated", "format 2")}
    cases.update(nan=(paths["nan"], r"param/w0 holds 1 NaN \(first at \[0, 0\]\), expected finite values$"),
                 other=(paths["other model"], r"another model: it lacks param/w0; it has param/w9 that this model "
                                              r"does not$"),
                 record=(saved[0], r"without the run's record .*expected a checkpoint written by `relax-mlir train "
                                   r"--save`"))
    for path, message in cases.values():
        cfg.resume, cfg.save = path, None
        with pytest.raises(CheckpointError, match=message) as info:
            run.train(cfg, log=lambda s: None, progress=False)
        assert str(info.value).startswith(f"--resume {path}: ")


# -- atomicity ------------------------------------------------------------------------------------------------------
CHILD = """
import sys
sys.path.insert(0, {root!r})
from tests.py.training.test_checkpoints import _trainer, _version
trainer = _trainer({sizes!r})
first = int(sys.argv[1])
print("ready", flush=True)
for i in range(first, first + int(sys.argv[2])):
    _version(trainer, i)
    trainer.save(sys.argv[3])
    print(i, flush=True)
"""
BIG = (64, 256, 256, 10)  # ~0.3 MB of parameters, ~1 MB with Adam's moments: a save takes a few milliseconds


def _child(first: int, count: int, path: str) -> subprocess.Popen:
    code = CHILD.format(root=ROOT, sizes=BIG)
    return subprocess.Popen([sys.executable, "-c", code, str(first), str(count), path],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_save_killed_at_random_moments_leaves_the_previous_or_the_new_version(tmp_path):
    path = str(tmp_path / "ckpt.npz")
    trainer = _trainer(BIG)
    _version(trainer, 0)
    trainer.save(path)
    rng, last, outcomes = random.Random(0), 0, []
    for round_ in range(20):
        first = 1000 * (round_ + 1)
        child = _child(first, 10**6, path)
        assert child.stdout.readline() == "ready\n", child.stderr.read()
        try:
            child.wait(timeout=rng.uniform(0.0, 0.15))
        except subprocess.TimeoutExpired:
            pass
        os.kill(child.pid, signal.SIGKILL)
        out, _ = child.communicate()
        assert child.returncode == -signal.SIGKILL
        done = [int(line) for line in out.split()]
        previous = done[-1] if done else last
        following = done[-1] + 1 if done else first  # saved (renamed) but killed before it printed
        loaded = _trainer(BIG)
        loaded.load(path)
        assert loaded.step in (previous, following), (loaded.step, previous, following)
        _assert_is_version(loaded, loaded.step)
        outcomes.append(len(done))
        last = loaded.step
    assert sum(outcomes) > 0, "no save completed: the kills all came too early to test anything"
    interrupted = [f for f in os.listdir(tmp_path) if f.startswith(".ckpt.npz.tmp-")]
    assert interrupted, "no kill landed inside a save (each leaves its temporary file): nothing was tested"


def test_two_processes_saving_to_one_path_leave_one_whole_file(tmp_path):
    path = str(tmp_path / "ckpt.npz")
    children = [_child(first, 25, path) for first in (100, 200)]
    for child in children:
        assert child.stdout.readline() == "ready\n", child.stderr.read()
    reads = 0
    while any(child.poll() is None for child in children):
        if os.path.exists(path):
            loaded = _trainer(BIG)
            loaded.load(path)  # a reader never sees a partial file
            _assert_is_version(loaded, loaded.step)
            reads += 1
    for child in children:
        out, err = child.communicate()
        assert child.returncode == 0, err
    loaded = _trainer(BIG)
    loaded.load(path)
    assert loaded.step in (124, 224)
    _assert_is_version(loaded, loaded.step)
    assert os.listdir(tmp_path) == ["ckpt.npz"], "no temporary file left behind"


def test_write_checkpoint_is_the_only_writer():
    """Trainer.save and --save go through checkpoint_io.write_checkpoint: no other module writes .npz state."""
    import relax_mlir.training.run as run
    import relax_mlir.training.trainer as trainer_module

    for module in (run, trainer_module):
        source = open(module.__file__).read()
        assert "np.savez" not in source and "np.load(" not in source and "os.replace" not in source, module
    assert write_checkpoint.__module__ == "relax_mlir.training.checkpoint_io"
