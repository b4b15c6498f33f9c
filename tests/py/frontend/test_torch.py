"""``from_exported_program``: imported models compute what PyTorch computes, and train as PyTorch trains them.

Training: see ``compare.py`` (20 steps, float32 losses within a relative 1e-4 of PyTorch's at every step, final
parameters likewise).
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import relax_mlir  # noqa: E402
from relax_mlir.frontend import UnsupportedOpsError  # noqa: E402
from relax_mlir.frontend.torch import TorchImportError, from_exported_program  # noqa: E402
from relax_mlir.testing import roundtrip  # noqa: E402

from .compare import assert_same_training, perturb, training_batches  # noqa: E402
from .torch_models import batch, make  # noqa: E402

MODELS = ["mlp", "cnn", "encoder"]
STEPS, BATCH = 20, 8


def _import(model, example):
    mod, params, states = from_exported_program(torch.export.export(model, (example,)))
    roundtrip(mod)
    return mod, params, states


@pytest.mark.parametrize("name", MODELS)
def test_inference_matches_pytorch(name):
    gen = torch.Generator().manual_seed(1)
    model = make(name)
    for _ in range(2):  # move batch-norm running statistics away from (0, 1)
        model.train()(batch(model, BATCH, gen)[0])
    model.eval()
    x = batch(model, BATCH, gen)[0]
    mod, params, states = _import(model, x)
    expected = model(x).detach().numpy()
    args = [x.numpy(), *params.values(), *states.values()]
    out = relax_mlir.interpret(mod, "main", *args)
    compiled = relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"](*args)
    for got in (out, compiled):
        got = got[0] if states else got
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", MODELS)
def test_training_matches_pytorch(name):
    gen = torch.Generator().manual_seed(2)
    model = make(name)
    batches = training_batches(model, gen, STEPS, BATCH)
    perturb(model, gen, batches[0][0])
    imported = _import(copy.deepcopy(model), batches[0][0])
    assert_same_training(model, imported, batches)


def test_parameters_in_torch_order_and_names():
    model = make("cnn").eval()
    mod, params, states = _import(model, torch.zeros(2, 1, 8, 8))
    assert list(params) == [n.replace(".", "_") for n, _ in model.named_parameters()]
    assert list(states) == ["bn1_running_mean", "bn1_running_var", "bn2_running_mean", "bn2_running_var"]
    assert (mod.attrs["param_num"], mod.attrs["state_num"]) == (len(params), 4)
    np.testing.assert_array_equal(params["conv1_weight"], model.conv1.weight.detach().numpy())


def test_params_as_constants():
    model = make("mlp").eval()
    x = torch.randn(3, 12)
    mod, params, states = from_exported_program(torch.export.export(model, (x,)), keep_params_as_input=False)
    assert (params, states, len(mod["main"].params)) == ({}, {}, 1)
    np.testing.assert_allclose(relax_mlir.interpret(mod, "main", x.numpy()), model(x).detach().numpy(), rtol=1e-5,
                               atol=1e-6)


class _Unsupported(torch.nn.Module):
    def forward(self, x):
        return torch.cumprod(torch.sort(x)[0], 1) + torch.sort(x * 2)[0] + torch.fft.fft(x).real


def test_every_unsupported_op_listed_at_once():
    ep = torch.export.export(_Unsupported(), (torch.randn(2, 3),))
    with pytest.raises(UnsupportedOpsError) as info:
        from_exported_program(ep)
    message = str(info.value)
    assert "aten.sort.default (used by sort, sort_1)" in message
    assert "aten.cumprod.default (used by cumprod)" in message
    assert "aten._fft_r2c.default (used by _fft_r2c)" in message and "4 unsupported op(s)" in message
    assert set(info.value.ops) >= {"aten.sort.default", "aten.cumprod.default"}


def test_bad_argument_names_node():
    class MaxPoolIndices(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.max_pool2d(x, 2, return_indices=True)[1].float()
    ep = torch.export.export(MaxPoolIndices(), (torch.randn(1, 1, 4, 4),))
    with pytest.raises(TorchImportError, match=r"node getitem_1 .*result 1 of max_pool2d_with_indices.*max-pool"):
        from_exported_program(ep)


def test_not_an_exported_program():
    with pytest.raises(TypeError, match=r"expected a torch.export.ExportedProgram .* got Linear"):
        from_exported_program(torch.nn.Linear(2, 2))


def test_cli_imports_a_pt2_program(tmp_path, capsys):
    from relax_mlir.cli import main
    from relax_mlir.ir import structural_equal
    from relax_mlir.script import from_source

    model = make("cnn").eval()
    ep = torch.export.export(model, (torch.zeros(2, 1, 8, 8),))
    torch.export.save(ep, str(tmp_path / "cnn.pt2"))
    assert main(["import", str(tmp_path / "cnn.pt2"), "-o", str(tmp_path / "cnn.py"),
                 "--params", str(tmp_path / "cnn.npz")]) == 0
    assert "main takes 1 input(s), 9 parameter(s), 4 state(s)" in capsys.readouterr().err
    mod, params, states = from_exported_program(ep)
    assert structural_equal(from_source((tmp_path / "cnn.py").read_text()), mod)
    saved = np.load(tmp_path / "cnn.npz")
    np.testing.assert_array_equal(saved["param/fc_weight"], params["fc_weight"])
    np.testing.assert_array_equal(saved["state/bn2_running_var"], states["bn2_running_var"])


def test_from_fx_is_from_exported_program_on_zero_inputs():
    from relax_mlir.frontend.torch import from_fx
    from relax_mlir.ir import structural_equal

    model = make("encoder").eval()
    traced = torch.fx.symbolic_trace(model)
    mod, params, _ = from_fx(traced, [((3, 6), "int64")])
    expected, _, _ = from_exported_program(torch.export.export(model, (torch.zeros(3, 6, dtype=torch.int64),)))
    assert structural_equal(mod, expected)
    tokens = torch.randint(0, 20, (3, 6))
    np.testing.assert_allclose(relax_mlir.interpret(mod, "main", tokens.numpy(), *params.values()),
                               model(tokens).detach().numpy(), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match=r"input_info\[0\] must be \(shape, dtype\) .* got \(3, 6\)"):
        from_fx(traced, [(3, 6)])
