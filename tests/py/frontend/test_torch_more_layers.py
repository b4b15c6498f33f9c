"""``from_exported_program`` on common PyTorch layers it refused: ``nn.AdaptiveMaxPool1d/2d/3d``,
``nn.ConvTranspose1d``, ``nn.MaxPool3d``, ``nn.AvgPool3d`` and ``nn.LocalResponseNorm`` (through ``avg_pool3d``),
``nn.Bilinear`` (``aten._trilinear``), ``F.cosine_similarity`` and ``torch.clamp`` with tensor bounds
(``aten.clamp.Tensor``), ``torch.cumprod``, and 2-D nearest interpolation to sizes that are not a whole multiple
(and by a given ``scale_factor``, which PyTorch's kernel honours).

The oracle is PyTorch: each program's outputs, interpreted and compiled, and the gradients the ``Gradient`` pass
gives (interpreted and compiled) against ``torch.autograd``.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional
nn = torch.nn

import relax_mlir  # noqa: E402
from relax_mlir import transform  # noqa: E402
from relax_mlir.frontend.torch import TorchImportError, from_exported_program  # noqa: E402
from relax_mlir.testing import roundtrip  # noqa: E402

from .test_torch_more_ops import _gen, _Lambda  # noqa: E402


def _randn(*shape, seed=0):
    return torch.randn(*shape, generator=_gen(seed))


def _as_list(value):
    return list(value) if isinstance(value, (tuple, list)) else [value]


def _run_both(mod, func, args):
    """``func`` of ``mod`` interpreted and compiled."""
    return [relax_mlir.interpret(mod, func, *args), relax_mlir.VirtualMachine(relax_mlir.compile(mod))[func](*args)]


_VOLUME = _randn(2, 3, 5, 6, 7, seed=1)
_IMG = _randn(2, 3, 6, 4, seed=2)
_SEQ = _randn(2, 4, 7, seed=3)
_TIES = torch.randint(0, 3, (2, 2, 4, 6, 7), generator=_gen(14)).float()  # a tie's gradient: the first maximum
_WITH_ZEROS = torch.tensor([[0.5, -2.0, 0.0, 3.0, 1.5, -0.5, 2.0, 0.0],  # one zero, then a second one
                            [1.2, 0.0, -1.1, 0.9, 2.0, -1.3, 0.7, 1.1],
                            [0.8, 1.5, -0.6, 1.3, -0.9, 1.4, 0.6, -1.2]])

class _Side(nn.Module):
    """Layers side by side, each on its own inputs (``(layer, inputs)`` pairs; a function is wrapped): one program,
    so one import and one compile, for a group of cases. ``args`` holds every layer's inputs in turn."""

    def __init__(self, *pairs):
        super().__init__()
        self.layers = nn.ModuleList(layer if isinstance(layer, nn.Module) else _Lambda(layer) for layer, _ in pairs)
        self.counts = [len(inputs) for _, inputs in pairs]
        self.args = tuple(t.clone() for _, inputs in pairs for t in inputs)

    def forward(self, *xs):
        outputs, i = [], 0
        for layer, n in zip(self.layers, self.counts):
            outputs += _as_list(layer(*xs[i:i + n]))
            i += n
        return tuple(outputs)


_LAYERS = {  # each was refused (UnsupportedOpsError, or a TorchImportError for ConvTranspose1d and nearest 6 to 9)
    "adaptive max pools": _Side(
        (nn.AdaptiveMaxPool2d((2, 3)), (_randn(2, 3, 5, 7, seed=4),)),  # windows overlapping
        (nn.AdaptiveMaxPool2d((3, None)), (_IMG,)),  # windows tiling; W kept
        (nn.AdaptiveMaxPool2d((5, 4)), (_IMG[0, :, :3],)),  # more outputs than inputs, unbatched
        (nn.AdaptiveMaxPool1d(3), (_SEQ,)), (nn.AdaptiveMaxPool3d((2, 4, 3)), (_VOLUME,)),
        (nn.AdaptiveMaxPool2d((4, 3)), (_TIES[:, :, 0],)), (nn.AdaptiveMaxPool3d((3, 2, 3)), (_TIES,))),
    "transposed 1-d convolutions": _Side(
        (nn.ConvTranspose1d(4, 6, 3, stride=2), (_SEQ,)),
        (nn.ConvTranspose1d(4, 6, 3, stride=3, padding=2, output_padding=1, dilation=2, groups=2, bias=False),
         (_SEQ,))),
    "3-d max pools": _Side(
        (nn.MaxPool3d(2), (_VOLUME,)),
        (nn.MaxPool3d((2, 3, 2), stride=(1, 2, 3), padding=(1, 1, 0), dilation=(1, 1, 2), ceil_mode=True), (_VOLUME,)),
        (nn.MaxPool3d(3, stride=2, padding=1), (_VOLUME[0],)),  # unbatched
        (nn.MaxPool3d(2), (_TIES,)), (nn.MaxPool3d(3, stride=2, padding=1, ceil_mode=True), (_TIES,))),
    "3-d average pools and local response norms": _Side(
        (nn.AvgPool3d(2), (_VOLUME,)),
        (nn.AvgPool3d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False), (_VOLUME,)),
        (nn.AvgPool3d((2, 3, 3), stride=(2, 2, 1), padding=(1, 0, 1), ceil_mode=True), (_VOLUME,)),
        (nn.LocalResponseNorm(3, alpha=0.5, k=1.5), (_IMG,)), (nn.LocalResponseNorm(2), (_SEQ,))),
    "bilinear layers": _Side(
        (nn.Bilinear(3, 4, 5), (_randn(6, 3, seed=5), _randn(6, 4, seed=6))),
        (nn.Bilinear(3, 4, 2, bias=False), (_randn(2, 3, 3, seed=7), _randn(2, 3, 4, seed=8)))),  # leading dims
    "cosine similarity": _Side(
        (lambda a, b: (F.cosine_similarity(a, b), F.cosine_similarity(a, b, 0)),
         (torch.cat([_randn(2, 5, seed=9), torch.zeros(1, 5)]), _randn(3, 5, seed=10))),  # a zero row
        # norms below eps, whose gradient PyTorch passes (clamped under NoGradGuard); broadcast inputs
        (lambda a, b: F.cosine_similarity(1e-3 * a, b, dim=-1, eps=0.01), (_randn(2, 3, 4, seed=11),
                                                                          _randn(3, 1, seed=12)))),
    "clamp to tensor bounds": _Side(
        (lambda x, lo, hi: (torch.clamp(x, lo, hi), torch.clamp(x, min=lo), torch.clamp(x, max=hi[0])),
         (_IMG[0, 0], torch.full((6, 4), -0.5), torch.full((6, 4), 0.5)))),
    "cumprod": _Side(
        (lambda x: (torch.cumprod(x, 1), torch.cumprod(x, dim=0), torch.cumprod(x[:, :5], -1),
                    torch.cumprod(x[:, :1], 1)), (_WITH_ZEROS,))),
    "cumprod of ints and to a dtype": _Side(
        (lambda i: (torch.cumprod(i, 1), torch.cumprod(i, 0, dtype=torch.float64), torch.cumprod(i.int(), 1)),
         (torch.tensor([[3, -2, 5, 7, 1, 2], [4, 1, -3, 2, 2, 9]]),))),
    "2-d nearest interpolation": _Side(
        (lambda x: (F.interpolate(x, size=(9, 5)), F.interpolate(x, size=(4, 3)), F.interpolate(x, size=(12, 11)),
                    F.interpolate(x, scale_factor=1.5), F.interpolate(x, scale_factor=2),
                    F.interpolate(x, scale_factor=(1.7, 3.1)), F.interpolate(x, scale_factor=0.6)), (_IMG,)),
        # PyTorch's kernel reads pixel floor(o / 3.1), not o // 3, to 12 rows from 4 (and o // 2 to 8 from 4 by 2.1)
        (lambda x: (F.interpolate(x, scale_factor=(3.1, 2.1)), F.interpolate(x, scale_factor=(1, 3.4))),
         (_IMG[:, :, :4],))),
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
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6, err_msg=f"{case}, output {i}")


class _Scored(nn.Module):
    """``fn(*params)`` (each input a parameter) weighed by fixed random numbers and summed: the gradients w.r.t. the
    parameters are the op's w.r.t. its inputs, each output element weighed differently (a plain sum would hide a
    permuted gradient). A layer's own parameters come after them."""

    def __init__(self, fn, args):
        super().__init__()
        self.inputs = nn.ParameterList([nn.Parameter(a.clone()) for a in args])
        self.fn = fn
        self.weights = [torch.randn(t.shape, generator=_gen(13)) for t in _as_list(fn(*args))]

    def forward(self):
        return sum((y * w).sum() for y, w in zip(_as_list(self.fn(*self.inputs)), self.weights))


def _loss_floor(model: "_Scored") -> float:
    """An absolute tolerance for ``model``'s loss: its signed terms can cancel far below their size, and summation
    orders (the host's vector width) move it by ulps of their sum of magnitudes: 4 of them."""
    with torch.no_grad():
        terms = sum(float((y * w).abs().sum()) for y, w in zip(_as_list(model.fn(*model.inputs)), model.weights))
    return 4 * float(np.finfo(np.float32).eps) * terms


_GRADIENTS = [case for case in _LAYERS if "ints" not in case]


@pytest.mark.parametrize("case", _GRADIENTS)
def test_gradients_are_pytorchs(case):
    """The gradients the ``Gradient`` pass gives (after ``DecomposeOpsForTraining``, as ``SetupTrainer`` runs it),
    interpreted and compiled, of the inputs and the layer's parameters, are ``torch.autograd``'s: at zeros of a
    cumulative product, at the bounds of a clamp (``x`` on a bound gets it, a bound below the other gives it to the
    upper one), through the windows adaptive pools share and the -inf padding of a max pool, to the first maximum
    (row-major) of a max pool's window holding equal ones."""
    model = _Scored(_LAYERS[case], _LAYERS[case].args)
    model().backward()
    wanted = [p.grad.numpy() for p in model.parameters()]
    mod, params, _ = from_exported_program(torch.export.export(model, ()))
    adjoint = transform.Gradient("main", require_grads=mod["main"].params)(mod)
    adjoint = transform.DecomposeOpsForTraining()(adjoint)
    floor = _loss_floor(model)
    for loss, grads in _run_both(adjoint, "main_adjoint", list(params.values())):
        np.testing.assert_allclose(loss, model().item(), rtol=1e-5, atol=floor)
        assert len(grads) == len(wanted)
        for i, (got, want) in enumerate(zip(grads, wanted)):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=f"{case}, gradient {i}")


def test_clamp_gradients_at_the_bounds_are_pytorchs():
    """``x`` on a bound gets the gradient; where ``min > max`` the result is ``max``, which gets it (hand-derived,
    and PyTorch's ``clamp_backward_min_max``)."""
    x, lo, hi = torch.tensor([-1.0, 0.0, 0.5, 1.0, 2.0, 0.3]), torch.tensor([0.0, 0.0, 0.0, 0.0, 0.0, 0.8]), \
        torch.tensor([1.0, 1.0, 1.0, 1.0, 1.0, 0.2])
    model = _Scored(lambda a, b, c: torch.clamp(a, b, c), (x, lo, hi))
    model().backward()
    w = model.weights[0].numpy()
    by_hand = [w * [0, 1, 1, 1, 0, 0], w * [1, 0, 0, 0, 0, 0], w * [0, 0, 0, 0, 1, 1]]
    for got, want in zip([p.grad.numpy() for p in model.parameters()], by_hand):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    mod, params, _ = from_exported_program(torch.export.export(model, ()))
    adjoint = transform.DecomposeOpsForTraining()(transform.Gradient("main", require_grads=mod["main"].params)(mod))
    for _, grads in _run_both(adjoint, "main_adjoint", list(params.values())):
        for got, want in zip(grads, by_hand):
            np.testing.assert_allclose(got, want, rtol=1e-6)


def test_nearest_to_a_size_that_is_not_a_multiple_of_a_symbolic_axis_is_refused_naming_the_node():
    height = torch.export.Dim("h", min=2, max=64)
    ep = torch.export.export(_Lambda(lambda x: F.interpolate(x, size=(x.shape[2] + 1, 8))), (_IMG,),
                             dynamic_shapes=(({2: height},),))
    with pytest.raises(TorchImportError, match=r"node \w+ \(aten\.upsample_nearest2d\.vec\): nearest upsampling "
                                               r"from (\w+) to \1 \+ 1 along the symbolic axis 2 by a scale that is "
                                               r"not whole: only whole scale factors are supported there"):
        from_exported_program(ep)


def test_cumprod_along_a_symbolic_axis_is_refused_naming_the_node():
    ep = torch.export.export(_Lambda(lambda x: torch.cumprod(x, 1)), (_WITH_ZEROS,),
                             dynamic_shapes=(({1: torch.export.Dim("n", min=2, max=64)},),))
    with pytest.raises(TorchImportError, match=r"node \w+ \(aten\.cumprod\.default\): the axis of a cumulative "
                                               r"product is the symbolic size \w+; only a static size"):
        from_exported_program(ep)
