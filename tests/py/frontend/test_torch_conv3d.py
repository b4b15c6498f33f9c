"""``from_exported_program`` on the 3-D layers it refused: ``nn.Conv3d`` (``R.nn.conv3d``), ``nn.AdaptiveAvgPool3d``
(``R.nn.adaptive_avg_pool3d``), and average pools' ``divisor_override`` (2-D and 3-D); ``nn.ConvTranspose1d`` now
imports as ``R.nn.conv1d_transpose`` and the 3-D pools as ``R.nn.max_pool3d`` / ``avg_pool3d``.

The oracle is PyTorch: each program's outputs, interpreted and compiled, and the gradients of the inputs and the
layers' parameters the ``Gradient`` pass gives (interpreted and compiled) against ``torch.autograd``.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import relax_mlir  # noqa: E402
from relax_mlir import transform  # noqa: E402
from relax_mlir.frontend.torch import TorchImportError, from_exported_program  # noqa: E402
from relax_mlir.ir.expr import Call  # noqa: E402
from relax_mlir.ir.visitor import post_order_visit  # noqa: E402
from relax_mlir.testing import roundtrip  # noqa: E402

from .test_torch_more_layers import _loss_floor, _Scored, _Side, _as_list, _randn, _run_both  # noqa: E402

_VOLUME = _randn(2, 4, 5, 6, 7, seed=21)
_IMG = _randn(2, 3, 7, 6, seed=22)
_SEQ = _randn(2, 4, 7, seed=23)
_TIES = torch.randint(0, 3, (2, 2, 4, 6, 7), generator=torch.Generator().manual_seed(24)).float()


def _seeded(layer: nn.Module, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    for p in layer.parameters():
        with torch.no_grad():
            p.copy_(torch.randn(p.shape))
    return layer


_LAYERS = {
    "3-d convolutions": _Side(
        (_seeded(nn.Conv3d(4, 6, 3, padding=1), 1), (_VOLUME,)),
        (_seeded(nn.Conv3d(4, 6, (2, 3, 1), stride=(2, 1, 2), padding=(1, 0, 1), dilation=(1, 2, 1), groups=2,
                           bias=False), 2), (_VOLUME,)),
        (_seeded(nn.Conv3d(4, 3, 2, stride=2), 3), (_VOLUME[0],))),  # unbatched
    "1-d transposed convolutions": _Side(
        (_seeded(nn.ConvTranspose1d(4, 6, 3, stride=2), 4), (_SEQ,)),
        (_seeded(nn.ConvTranspose1d(4, 6, 3, stride=3, padding=2, output_padding=1, dilation=2, groups=2), 5),
         (_SEQ,))),
    "3-d pools": _Side(
        (nn.MaxPool3d(2), (_VOLUME,)), (nn.MaxPool3d(3, stride=2, padding=1, ceil_mode=True), (_TIES,)),
        (nn.AvgPool3d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False), (_VOLUME,)),
        (nn.AvgPool3d((2, 3, 3), stride=(2, 2, 1), padding=(1, 0, 1)), (_VOLUME[0],))),
    "adaptive 3-d average pools": _Side(
        (nn.AdaptiveAvgPool3d((2, 4, 3)), (_VOLUME,)),  # overlapping windows
        (nn.AdaptiveAvgPool3d(1), (_VOLUME,)), (nn.AdaptiveAvgPool3d((3, None, 2)), (_VOLUME,)),
        (nn.AdaptiveAvgPool3d((4, 2, 5)), (_VOLUME[0],))),  # unbatched
    "divisor overrides": _Side(
        (nn.AvgPool3d(2, divisor_override=3), (_VOLUME,)),
        (nn.AvgPool3d(3, stride=2, padding=1, ceil_mode=True, divisor_override=5), (_VOLUME,)),  # windows past the end
        (nn.AvgPool3d((2, 3, 2), stride=(1, 2, 3), count_include_pad=False, divisor_override=4), (_VOLUME[0],)),
        (nn.AvgPool2d(2, divisor_override=3), (_IMG,)),
        (nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False, divisor_override=7), (_IMG,))),
}


@pytest.mark.parametrize("case", list(_LAYERS))
def test_layers_compute_what_pytorch_computes(case):
    model = _LAYERS[case]
    args = model.args
    mod, params, _ = from_exported_program(torch.export.export(model, args))
    roundtrip(mod)
    expected = [t.detach().numpy() for t in _as_list(model(*args))]
    for got in _run_both(mod, "main", [a.numpy() for a in args] + list(params.values())):
        got = _as_list(got)
        assert len(got) == len(expected), case
        for i, (g, e) in enumerate(zip(got, expected)):
            assert (g.dtype, g.shape) == (e.dtype, e.shape), (case, i)
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5, err_msg=f"{case}, output {i}")


@pytest.mark.parametrize("case", list(_LAYERS))
def test_gradients_are_pytorchs(case):
    """Inputs and parameters (a convolution's weight and bias): ``torch.autograd``'s gradients, after
    ``DecomposeOpsForTraining`` as ``SetupTrainer`` runs it; a 3-D max pool's tie goes to the window's first
    maximum in row-major order."""
    model = _Scored(_LAYERS[case], _LAYERS[case].args)
    model().backward()
    wanted = [p.grad.numpy() for p in model.parameters()]
    mod, params, _ = from_exported_program(torch.export.export(model, ()))
    adjoint = transform.DecomposeOpsForTraining()(transform.Gradient("main", require_grads=mod["main"].params)(mod))
    for loss, grads in _run_both(adjoint, "main_adjoint", list(params.values())):
        np.testing.assert_allclose(loss, model().item(), rtol=1e-5, atol=_loss_floor(model))
        assert len(grads) == len(wanted)
        for i, (got, want) in enumerate(zip(grads, wanted)):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=f"{case}, gradient {i}")


def _ops_of(mod) -> set[str]:
    names: set[str] = set()
    post_order_visit(mod["main"], lambda e: names.add(e.op.name) if isinstance(e, Call) else None)
    return names


def test_the_layers_import_as_the_new_records():
    model = _Side((_seeded(nn.Conv3d(4, 2, 3), 6), (_VOLUME,)), (nn.AdaptiveAvgPool3d(2), (_VOLUME,)),
                  (nn.MaxPool3d(2), (_VOLUME,)), (nn.AvgPool3d(2), (_VOLUME,)),
                  (_seeded(nn.ConvTranspose1d(4, 2, 3), 7), (_SEQ,)))
    mod, _, _ = from_exported_program(torch.export.export(model, model.args))
    assert {"relax.nn.conv3d", "relax.nn.adaptive_avg_pool3d", "relax.nn.max_pool3d", "relax.nn.avg_pool3d",
            "relax.nn.conv1d_transpose"} <= _ops_of(mod)


class _SquaredOutput(nn.Module):
    """A network's output squared and summed: a scalar loss for the Gradient pass."""

    def __init__(self, net: nn.Module):
        super().__init__()
        self.net = net

    def forward(self, x):
        return (self.net(x) ** 2).sum()


def test_a_small_3d_cnn_trains_as_in_pytorch():
    """conv3d, ReLU, max pool, conv3d, adaptive average pool, linear: five SGD steps here (compiled) and in
    PyTorch from the same weights and batches, the losses and final parameters equal."""
    torch.manual_seed(0)
    model = _SquaredOutput(nn.Sequential(nn.Conv3d(2, 4, 3, padding=1), nn.ReLU(), nn.MaxPool3d(2),
                                         nn.Conv3d(4, 4, 3, padding=1), nn.AdaptiveAvgPool3d(1), nn.Flatten(),
                                         nn.Linear(4, 3)))
    xs = [_randn(4, 2, 4, 6, 6, seed=30 + i) for i in range(5)]
    mod, params, _ = from_exported_program(torch.export.export(model, (xs[0],)))
    adjoint = transform.DecomposeOpsForTraining()(
        transform.Gradient("main", require_grads=mod["main"].params[1:])(mod))
    step = relax_mlir.VirtualMachine(relax_mlir.compile(adjoint))["main_adjoint"]
    values = list(params.values())
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    for x in xs:
        opt.zero_grad()
        loss = model(x)
        loss.backward()
        opt.step()
        got_loss, grads = step(x.numpy(), *values)
        np.testing.assert_allclose(got_loss, loss.item(), rtol=1e-4)
        values = [v - np.float32(1e-3) * g for v, g in zip(values, grads)]
    for name, got, want in zip(params, values, model.parameters()):
        np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-4, atol=1e-5, err_msg=name)


def test_a_ceil_mode_divisor_override_over_a_symbolic_size_is_refused_naming_the_node():
    half = torch.export.Dim("half", min=2, max=32)
    ep = torch.export.export(nn.AvgPool3d(2, ceil_mode=True, divisor_override=3), (_randn(2, 3, 7, 4, 4, seed=25),),
                             dynamic_shapes=({2: 2 * half - 1},))
    with pytest.raises(TorchImportError, match=r"node \w+ \(aten\.avg_pool3d\.default\): .*a spatial size of a "
                                               r"ceil-mode average pool with divisor_override"):
        from_exported_program(ep)
