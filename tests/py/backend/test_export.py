"""Ahead-of-time export: ``Executable.export_library`` and ``relax_mlir.runtime.load_module`` in a process where
``import mlir`` fails, the tutorial MLP trained from the library bit-equal to the in-process engine (itself
within float32 tolerance of the NumPy interpreter), runtime checks raising from the library, damaged files
refused, signatures through JSON, and ``relax-mlir export``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import relax_mlir as rm
from relax_mlir.backend.runtime import ArgumentError
from relax_mlir.backend.signature import FunctionSignature, TensorSpec
from relax_mlir.backend.signature_json import signature_from_json, signature_to_json
from relax_mlir.cli import main as cli
from relax_mlir.ir.struct_info import TensorStructInfo
from relax_mlir.models import mlp
from relax_mlir.runtime import load_module
from relax_mlir.script import from_source
from relax_mlir.training import SGD, CrossEntropyLoss, SetupTrainer, Trainer

from ..reliability.test_index_checks import MODULE as CHECKED_MODULE

ROOT = Path(__file__).resolve().parents[3]

# A process in which MLIR cannot be imported: loads the library and runs what argv[3] says.
NO_MLIR = '''
import sys
class NoMLIR:
    def find_spec(self, name, path=None, target=None):
        if name == "mlir" or name.startswith("mlir."):
            raise ImportError("MLIR is not installed here")
sys.meta_path.insert(0, NoMLIR())
try:
    import mlir.ir
    sys.exit("mlir imported")
except ImportError:
    pass
import numpy as np
from relax_mlir.runtime import load_module
lib, data, job = load_module(sys.argv[1]), sys.argv[2], sys.argv[3]
if job == "train":
    d = np.load(data)
    params, optim = [d[f"p{i}"] for i in range(int(d["n"]))], [d["optim"]]
    for _ in range(3):
        loss, params, states, optim = lib["update_params"](d["x"], *params, d["y"], *optim)
    np.savez(data + ".out.npz", *params, loss=loss, predict=lib["predict"](d["x"], *params))
else:
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    print(lib["take"](x, np.array([3, 0, 1])).tolist())
    try:
        lib["take"](x, np.array([0, 9, 1]))
    except IndexError as err:
        print("IndexError:", err)
    print(lib["take"](x, np.array([2, 2, 2])).tolist())
    print("heap kept:", sys.modules["relax_mlir.backend.heap"]._done)
assert not any(m == "mlir" or m.startswith("mlir.") for m in sys.modules)
'''


def run_without_mlir(lib: Path, data: str, job: str) -> str:
    proc = subprocess.run([sys.executable, "-c", NO_MLIR, str(lib), data, job], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def tutorial_trainer(target: str) -> Trainer:
    """The tutorial's MLP (64-128-128-10 on digits, batch 64), summed cross-entropy, SGD with weight decay."""
    setup = SetupTrainer(CrossEntropyLoss(reduction="sum"), SGD(0.01, weight_decay=0.01),
                         [TensorStructInfo((64, 10), "float32"), TensorStructInfo((64,), "int64")])
    trainer = Trainer(mlp(64, (64, 128, 128, 10)), 6, setup).build(target=target)
    trainer.xavier_uniform_init_params(seed=3)
    return trainer


def test_the_exported_tutorial_step_trains_without_mlir(tmp_path):
    rng = np.random.default_rng(0)
    x, y = rng.uniform(0, 16, (64, 64)).astype(np.float32), rng.integers(0, 10, 64)
    engine, reference = tutorial_trainer("cpu"), tutorial_trainer("numpy")
    np.savez(tmp_path / "data.npz", x=x, y=y, n=6, optim=engine.optim_state[0],
             **{f"p{i}": p for i, p in enumerate(engine.params)})
    engine.vm.executable.export_library(tmp_path / "step.so")
    run_without_mlir(tmp_path / "step.so", str(tmp_path / "data.npz"), "train")
    for _ in range(3):
        loss = engine.update_params(x, y)
        reference.update_params(x, y)
    out = np.load(tmp_path / "data.npz.out.npz")
    for i, (p, ref) in enumerate(zip(engine.params, reference.params)):
        np.testing.assert_array_equal(out[f"arr_{i}"], p)  # bit-equal: the same code
        np.testing.assert_allclose(p, ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(out["loss"], loss)
    np.testing.assert_array_equal(out["predict"], engine.predict(x))


def test_runtime_checks_raise_from_the_library(tmp_path):
    rm.compile(from_source(CHECKED_MODULE, "checked")).export_library(tmp_path / "take.so")
    lines = run_without_mlir(tmp_path / "take.so", "", "take").splitlines()
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    assert lines[0] == str(x[[3, 0, 1]].tolist())
    assert lines[1].startswith("IndexError: take: binding 'lv1': relax.take: index 9 at position 1 ")
    assert lines[2] == str(x[[2, 2, 2]].tolist())  # the slot was cleared
    # loading tunes malloc as compiling does (backend/heap.py: a step's freed buffers are reused, not re-faulted)
    assert lines[3] == "heap kept: True"


@pytest.fixture(scope="module")
def take_library(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("lib") / "take.so"
    rm.compile(from_source(CHECKED_MODULE, "checked")).export_library(path)
    return path


def test_a_loaded_function_checks_its_arguments(take_library):
    lib = load_module(take_library)
    names = sorted(gv.name_hint for gv in from_source(CHECKED_MODULE, "checked").functions)
    assert "take" in names and sorted(lib.function_names) == names
    with pytest.raises(ArgumentError, match=r"take: parameter 'x' \(#0\): expected shape \(4, 3\), got \(4, 4\)"):
        lib["take"](np.zeros((4, 4), np.float32), np.zeros(3, np.int64))
    with pytest.raises(KeyError, match="no public function 'nope'; functions: " + ", ".join(names)):
        lib["nope"]


def test_tvms_virtual_machine_runs_a_loaded_library(take_library):
    """``relax.VirtualMachine(tvm.runtime.load_module(path), tvm.cpu())``, as TVM's tutorials load a library:
    the same functions, the same checks, the same values as the library called directly."""
    from relax_mlir import tvm
    from relax_mlir.tvm import relax

    vm = relax.VirtualMachine(tvm.runtime.load_module(str(take_library)), tvm.cpu())
    lib = load_module(take_library)
    x, i = np.arange(12, dtype=np.float32).reshape(4, 3), np.array([3, 0, 1], np.int64)
    np.testing.assert_array_equal(vm["take"](x, i), lib["take"](x, i))
    np.testing.assert_array_equal(vm["take"](x, i), x[i])
    with pytest.raises(ArgumentError, match=r"take: parameter 'x' \(#0\): expected shape \(4, 3\), got \(4, 4\)"):
        vm["take"](np.zeros((4, 4), np.float32), i)


@pytest.mark.parametrize("how, message", [
    (lambda d: d[: len(d) - 5], "not a relax-mlir library"),
    (lambda d: d[:100] + bytes([d[100] ^ 1]) + d[101:], "checksum mismatch"),
    (lambda d: b"hello", "too short"),
    # the metadata's signatures say how large the arrays are: an edited shape loaded and the code read past x
    (lambda d: d.replace(b'"shape": [4, 3]', b'"shape": [1, 3]', 1), "checksum mismatch"),
])
def test_a_damaged_library_is_refused(tmp_path, take_library, how, message):
    bad = tmp_path / "bad.so"
    bad.write_bytes(how(take_library.read_bytes()))
    with pytest.raises(ValueError, match=message):
        load_module(bad)


def test_signatures_survive_json():
    sig = FunctionSignature("f", (TensorSpec(("n", 784), "float32", "x"), TensorSpec(("n",), "int64", "y"),
                                  TensorSpec((3,), "bfloat16", "z")),
                            (TensorSpec(("n // 2", 10), "float32", "out"),))
    import json

    assert signature_from_json(json.loads(json.dumps(signature_to_json(sig)))) == sig


@pytest.mark.parametrize("data, message", [
    ([], "expected a dict with a 'name'"),
    ({"name": "f", "params": {}, "results": []}, "'params' must be a list"),
    ({"name": "f", "params": [{"shape": [2]}], "results": []}, r"params\[0\]: expected"),
    ({"name": "f", "params": [{"shape": [2], "dtype": "float77"}], "results": []}, r"params\[0\]: .*float77"),
    ({"name": "f", "params": [], "results": [{"shape": ["m"], "dtype": "float32"}]}, "no parameter dimension binds"),
])
def test_malformed_signature_json(data, message):
    with pytest.raises(ValueError, match=message):
        signature_from_json(data)


def test_cli_export(tmp_path, capsys):
    source = tmp_path / "checked.py"
    source.write_text(CHECKED_MODULE)
    assert cli(["export", str(source), "-o", str(tmp_path / "t.so"), "-f", "take"]) == 0
    assert "wrote" in capsys.readouterr().out
    lib = load_module(tmp_path / "t.so")
    assert lib.function_names == ["take"]
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_array_equal(lib["take"](x, np.array([1, 1, 0])), x[[1, 1, 0]])
    assert cli(["export", str(source), "-o", str(tmp_path / "u.so"), "-f", "nope"]) == 1
    assert "--function: no function 'nope'" in capsys.readouterr().err
    assert not (tmp_path / "u.so").exists()
    # the output's own path in the message (it named a temporary file, made in the parent of a directory given)
    assert cli(["export", str(source), "-o", str(tmp_path), "-f", "take"]) == 1
    assert f"-o {tmp_path}: is a directory; expected a file name" in capsys.readouterr().err
    assert cli(["export", str(source), "-o", str(tmp_path / "none" / "t.so"), "-f", "take"]) == 1
    assert f"the directory {tmp_path / 'none'} does not exist" in capsys.readouterr().err


def test_a_path_exported_again_loads_the_new_library(tmp_path):
    """The dynamic loader returns the library already loaded under a name: each load must use a fresh one."""
    path = tmp_path / "f.so"
    text = '''
from relax_mlir.script import ir as I, relax as R

@I.ir_module
class Module:
    @R.function
    def f(x: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        with R.dataflow():
            y = R.{op}(x, x)
            R.output(y)
        return y
'''
    x = np.array([1.0, 2.0, 3.0], np.float32)
    rm.compile(from_source(text.format(op="add"), "add")).export_library(path)
    np.testing.assert_array_equal(load_module(path)["f"](x), x + x)
    rm.compile(from_source(text.format(op="multiply"), "mul")).export_library(path)
    np.testing.assert_array_equal(load_module(path)["f"](x), x * x)
