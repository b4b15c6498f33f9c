"""``from_exported_program`` on ``nn.ConvTranspose3d``, which it refused: it imports as ``R.nn.conv3d_transpose``.

The oracle is PyTorch: each program's outputs, interpreted and compiled, the gradients of the inputs and the
layers' parameters the ``Gradient`` pass gives (interpreted and compiled) against ``torch.autograd``, and a small
3-D encoder-decoder trained by compiled SGD steps against the same steps in PyTorch.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import relax_mlir  # noqa: E402
from relax_mlir import transform  # noqa: E402
from relax_mlir.frontend.torch import from_exported_program  # noqa: E402
from relax_mlir.ir.expr import Call  # noqa: E402
from relax_mlir.ir.visitor import post_order_visit  # noqa: E402
from relax_mlir.testing import roundtrip  # noqa: E402

from .test_torch_more_layers import _loss_floor, _Scored, _Side, _as_list, _randn, _run_both  # noqa: E402

_VOLUME = _randn(2, 4, 3, 4, 5, seed=41)


def _seeded(layer: nn.Module, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    for p in layer.parameters():
        with torch.no_grad():
            p.copy_(torch.randn(p.shape))
    return layer


_LAYERS = _Side(
    (_seeded(nn.ConvTranspose3d(4, 6, 3), 1), (_VOLUME,)),
    (_seeded(nn.ConvTranspose3d(4, 6, 3, stride=2, padding=1, output_padding=1), 2), (_VOLUME,)),
    (_seeded(nn.ConvTranspose3d(4, 6, (2, 3, 2), stride=(3, 2, 1), padding=(1, 2, 0), output_padding=(2, 1, 0),
                                dilation=(2, 1, 3), groups=2, bias=False), 3), (_VOLUME,)),
    (_seeded(nn.ConvTranspose3d(4, 2, 2, stride=2), 4), (_VOLUME[0],)))  # unbatched


def test_conv_transpose3d_computes_what_pytorch_computes():
    args = _LAYERS.args
    mod, params, _ = from_exported_program(torch.export.export(_LAYERS, args))
    roundtrip(mod)
    expected = [t.detach().numpy() for t in _as_list(_LAYERS(*args))]
    for got in _run_both(mod, "main", [a.numpy() for a in args] + list(params.values())):
        assert len(got) == len(expected)
        for i, (g, e) in enumerate(zip(got, expected)):
            assert (g.dtype, g.shape) == (e.dtype, e.shape), i
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5, err_msg=f"output {i}")


def test_conv_transpose3d_gradients_are_pytorchs():
    """Inputs and parameters (weights and biases): ``torch.autograd``'s gradients, after ``DecomposeOpsForTraining``
    as ``SetupTrainer`` runs it."""
    model = _Scored(_LAYERS, _LAYERS.args)
    model().backward()
    wanted = [p.grad.numpy() for p in model.parameters()]
    mod, params, _ = from_exported_program(torch.export.export(model, ()))
    adjoint = transform.DecomposeOpsForTraining()(transform.Gradient("main", require_grads=mod["main"].params)(mod))
    for loss, grads in _run_both(adjoint, "main_adjoint", list(params.values())):
        np.testing.assert_allclose(loss, model().item(), rtol=1e-5, atol=_loss_floor(model))
        assert len(grads) == len(wanted)
        for i, (got, want) in enumerate(zip(grads, wanted)):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=f"gradient {i}")


def test_conv_transpose3d_imports_as_conv3d_transpose():
    ep = torch.export.export(_seeded(nn.ConvTranspose3d(4, 2, 2, stride=2, output_padding=1), 5), (_VOLUME,))
    mod, _, _ = from_exported_program(ep)
    names: list[str] = []
    post_order_visit(mod["main"], lambda e: names.append(e.op.name) if isinstance(e, Call) else None)
    assert names.count("relax.nn.conv3d_transpose") == 1
    call = next(b.value for b in mod["main"].body.blocks[0].bindings
                if isinstance(b.value, Call) and b.value.op.name == "relax.nn.conv3d_transpose")
    assert (call.attrs["strides"], call.attrs["output_padding"], call.attrs["kernel_layout"]) == \
        ((2, 2, 2), (1, 1, 1), "IODHW")


class _Reconstruction(nn.Module):
    """A 3-D encoder-decoder (strided conv3d, ReLU, transposed conv3d back to the input's size) and its squared
    reconstruction error: a scalar loss for the Gradient pass."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv3d(2, 4, 3, stride=2, padding=1), nn.ReLU(),
                                 nn.Conv3d(4, 6, 3, stride=(1, 2, 2), padding=1), nn.ReLU(),
                                 nn.ConvTranspose3d(6, 4, 3, stride=(1, 2, 2), padding=1, output_padding=(0, 1, 1)),
                                 nn.ReLU(), nn.ConvTranspose3d(4, 2, 3, stride=2, padding=1, output_padding=1))

    def forward(self, x):
        return ((self.net(x) - x) ** 2).mean()


def test_a_small_3d_encoder_decoder_trains_as_in_pytorch():
    """Five SGD steps here (compiled) and in PyTorch from the same weights and batches: the losses and final
    parameters equal."""
    torch.manual_seed(0)
    model = _Reconstruction()
    xs = [_randn(3, 2, 4, 8, 8, seed=50 + i) for i in range(5)]
    mod, params, _ = from_exported_program(torch.export.export(model, (xs[0],)))
    adjoint = transform.DecomposeOpsForTraining()(
        transform.Gradient("main", require_grads=mod["main"].params[1:])(mod))
    step = relax_mlir.VirtualMachine(relax_mlir.compile(adjoint))["main_adjoint"]
    values = list(params.values())
    lr = 0.5  # parameters move by 1-15%
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    for x in xs:
        opt.zero_grad()
        loss = model(x)
        loss.backward()
        opt.step()
        got_loss, grads = step(x.numpy(), *values)
        np.testing.assert_allclose(got_loss, loss.item(), rtol=1e-4)
        values = [v - np.float32(lr) * g for v, g in zip(values, grads)]
    for name, got, want in zip(params, values, model.parameters()):
        np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-4, atol=1e-5, err_msg=name)
