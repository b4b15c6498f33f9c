"""The seed tutorial's code runs with only its import lines changed (and the data source): examples/tutorial.py.

The example runs once, in a fresh interpreter (as ``python examples/tutorial.py`` would: ``__main__``, its
directory first on ``sys.path``, the repository on ``PYTHONPATH``); a small wrapper then saves what the low-level
path computed so that the test can check it. Nothing here reads a path outside the repository.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "tutorial.py"

# Runs the example as __main__, then saves the low-level path's results (its globals) for the checks below.
_WRAPPER = """
import runpy, sys
import numpy as np
example, out = sys.argv[1], sys.argv[2]
sys.argv = [example]
sys.path.insert(0, str(__import__("pathlib").Path(example).parent))
g = runpy.run_path(example, run_name="__main__")
params, grads = g["param_input_tuple"], g["param_grad_tuple"]
np.savez(out, n_params=len(params), n_grads=len(grads), loss=np.asarray(g["loss"]),
         num_steps=np.asarray(g["opt"].state[0]), x=np.asarray(g["x_input"]),
         **{f"param{i}": np.asarray(p) for i, p in enumerate(params)},
         **{f"grad{i}": np.asarray(p) for i, p in enumerate(grads)})
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("tutorial") / "low_level.npz"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, "-c", _WRAPPER, str(EXAMPLE), str(out)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)
    return proc, out


def test_example_exits_zero(run):
    proc, _ = run
    assert proc.returncode == 0, f"examples/tutorial.py failed:\n{proc.stderr[-4000:]}"


def test_trainer_path_reaches_95_percent(run):
    proc, _ = run
    assert proc.returncode == 0, proc.stderr[-4000:]
    accuracies = [float(a) for a in re.findall(r"Train Epoch: \d+ Accuracy on test dataset: ([\d.]+)%", proc.stdout)]
    assert len(accuracies) == 5, proc.stdout[-2000:]  # one per epoch
    assert accuracies[-1] >= 95.0, f"final test accuracy {accuracies[-1]}% < 95% (per epoch: {accuracies})"
    losses = re.findall(r"Train Epoch: \d+ \[0/1438 \(0%\)\]\tLoss: ([\d.]+)", proc.stdout)
    assert len(losses) == 5 and float(losses[-1]) < float(losses[0])


def test_low_level_path(run):
    proc, out = run
    assert proc.returncode == 0, proc.stderr[-4000:]
    lines = proc.stdout.splitlines()
    assert "6 6" in lines  # print(len(param_input_tuple), len(param_grad_tuple))
    assert any(line.startswith("<bound method NDArray.numpy of NDArray(") for line in lines)  # print(loss.numpy)
    r = np.load(out)
    assert (int(r["n_params"]), int(r["n_grads"])) == (6, 6)
    shapes = [(64, 128), (128,), (128, 128), (128,), (128, 10), (10,)]  # w0 of the digits-sized backbone first
    assert [r[f"param{i}"].shape for i in range(6)] == shapes
    assert [r[f"grad{i}"].shape for i in range(6)] == shapes
    # The first parameter and its gradient are what the example printed last.
    assert str(r["param0"]) in proc.stdout and str(r["grad0"]) in proc.stdout
    # One SGD(0.1) step from all-ones parameters; the state counts it.
    for i in range(6):
        np.testing.assert_allclose(r[f"param{i}"], np.float32(1) - np.float32(0.1) * r[f"grad{i}"], rtol=1e-6)
    assert int(r["num_steps"]) == 1
    assert r["loss"].shape == () and np.isfinite(r["loss"]) and r["loss"] > 0
    # The gradient of w0 is x^T times the backpropagated error: it lies in x's column space, 0 where x's column is.
    dead = ~r["x"].any(axis=0)
    assert dead.any() and not r["grad0"][dead].any()


# -- the facade itself --------------------------------------------------------------------------------------------------
def test_tvm_facade():
    from relax_mlir import script, training, transform
    from relax_mlir import tvm
    from relax_mlir.training import optimizer
    from relax_mlir.training.trainer import NDArray
    from relax_mlir.tvm import relax

    assert tvm.script is script and tvm.script.ir_module is script.ir.ir_module
    assert str(tvm.device("llvm", 0)) == str(tvm.cpu(0)) == str(tvm.device("cpu")) == "cpu(0)"
    with pytest.raises(ValueError, match="host CPU"):
        tvm.device("cuda", 0)
    a = tvm.nd.array(np.arange(3, dtype="float32"))
    assert isinstance(a, NDArray) and a.numpy().tolist() == [0.0, 1.0, 2.0]
    assert tvm.nd.array(a) is not a and isinstance(tvm.nd.array(a), NDArray)  # a copy, as TVM's
    assert relax.transform is transform and relax.training is training and relax.optimizer is optimizer
    for sub in ("utils", "loss", "optimizer", "setup_trainer", "trainer"):
        assert hasattr(relax.training, sub)
    assert relax.training.utils.append_loss is training.append_loss

    x = relax.Var("x", relax.TensorStructInfo((2, 3), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit_output(relax.op.add(x, relax.const(1.0, "float32")))
        bb.emit_func_output(y)
    mod = bb.get()
    assert isinstance(mod, relax.IRModule) and isinstance(mod["main"], relax.Function)
    for ex in (tvm.compile(mod, "llvm"), relax.build(mod, "llvm"), relax.vm.build(mod, target="llvm")):
        vm = relax.VirtualMachine(ex, tvm.cpu())
        out = vm["main"](np.ones((2, 3), "float32"))
        assert isinstance(out, NDArray) and out.numpy().tolist() == [[2.0] * 3] * 2
    with pytest.raises(ValueError, match="unknown target"):
        tvm.compile(mod, "cuda")
