"""``from_exported_program`` on ops PyTorch models use beyond the MLP/CNN/transformer set: norms and
``F.normalize``, ``var_mean``, ``prod``, ``any``/``all``, ``gather``, ``one_hot``, bitwise ops, ``nn.EmbeddingBag``,
reflect and replicate padding (advanced indexing), instance norm, bilinear interpolation and grouped-query attention.

The oracle is PyTorch: each program's outputs (values, dtypes, shapes), interpreted and compiled, and for the
differentiable ones the gradient the ``Gradient`` pass gives (interpreted and compiled) against ``torch.autograd``.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import relax_mlir  # noqa: E402
from relax_mlir import transform  # noqa: E402
from relax_mlir.frontend.torch import TorchImportError, from_exported_program  # noqa: E402
from relax_mlir.testing import roundtrip  # noqa: E402


class _Lambda(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


_X = torch.randn(3, 5, generator=_gen(1))
_X_ZERO_ROW = torch.cat([_X[:1], torch.zeros(1, 5), _X[2:]])  # F.normalize's edge: a zero vector
_IMG = torch.randn(2, 3, 4, 5, generator=_gen(2))
_INTS = torch.tensor([[5, 3, 12, 0], [7, -2, 9, 6], [1, 1, 4, 8]])
_BOOLS = torch.tensor([[True, False, True], [False, False, False], [True, True, True]])

_FORWARD = {  # each was refused with UnsupportedOpsError (one_hot, bitwise_not of bools: a conversion error)
    "normalize": (lambda x: (F.normalize(x), F.normalize(x, dim=-1), F.normalize(x, p=1, dim=0)), (_X_ZERO_ROW,)),
    "normalize eps": (lambda x: F.normalize(x * 1e-3, dim=1, eps=0.05), (_X_ZERO_ROW,)),
    "vector_norm orders": (lambda x: (torch.linalg.vector_norm(x), torch.linalg.vector_norm(x, 1, dim=-1),
                                      torch.linalg.vector_norm(x, float("inf"), dim=0, keepdim=True),
                                      torch.linalg.vector_norm(x, float("-inf"), dim=1),
                                      torch.linalg.vector_norm(x, 0, dim=1), torch.linalg.vector_norm(x, 3, dim=(0, 1)),
                                      torch.linalg.vector_norm(x, 0.5, dim=-2), x.norm(dim=-1, keepdim=True)),
                           (_X_ZERO_ROW,)),
    "var_mean and std_mean": (lambda x: (*torch.var_mean(x, dim=1), *torch.var_mean(x),
                                         *torch.var_mean(x, dim=-2, correction=0, keepdim=True),
                                         *torch.std_mean(x, dim=(0, 1))), (_X,)),
    "prod": (lambda x, i: (x.prod(), x.prod(dim=-1), x.prod(0, keepdim=True), i.prod(1), (i > 4).prod(0)),
             (_X, _INTS)),
    "any and all": (lambda b, i, x: (b.any(), b.all(), b.any(dim=1), b.all(dim=-1, keepdim=True), i.any(0),
                                     i.all(), torch.any(x > 1, dim=(0, 1)), x.all(dim=0)), (_BOOLS, _INTS, _X)),
    "gather": (lambda x, i: (torch.gather(x, 1, i), torch.gather(x, -2, i[:2, :3] % 3), x.gather(0, i[:, :1] % 3)),
               (_X, torch.tensor([[4, 0, 0, 2], [1, 3, 2, 2], [0, 0, 4, 1]]))),
    "one_hot": (lambda i: (F.one_hot(i, 6), F.one_hot(i[1], 4) * 2.5), (torch.tensor([[3, 0, 5], [1, 1, 2]]),)),
    "bitwise on ints": (lambda a, b: (a & b, a | b, a ^ b, ~a, a & 6, a | 1, a ^ 3),
                        (_INTS, _INTS.flip(0))),
    "bitwise on int32": (lambda a: (a & 6, ~a, a ^ a.flip(1)), (_INTS.int(),)),
    "bitwise on bools": (lambda a, b: (a & b, a | b, a ^ b, ~a, a & True, a ^ True), (_BOOLS, _BOOLS.T)),
    "reflect and replicate pads of 4-d and 3-d": (lambda x: (F.pad(x, (1, 2, 2, 1), mode="reflect"),
                                                     F.pad(x, (2, 0, 1, 3), mode="replicate"),
                                                     F.pad(x[0], (1, 1), mode="reflect")), (_IMG,)),
    "reflect and replicate pads of 2-d": (lambda x: (F.pad(x, (2, 3), mode="reflect"),
                                                     F.pad(x, (3, 1), mode="replicate")), (_X,)),
    "advanced indexing": (lambda x, i: (x[i], x[:, i], x[i, :, i], x[:, i, i.flip(0)], x[..., -1 - i],
                                        x[i[:, None], :, i]),
                          (_IMG, torch.tensor([1, 0, -1]))),
    "instance norm": (lambda x: (F.instance_norm(x), F.instance_norm(x[0], eps=0.1),
                                 F.instance_norm(x, weight=torch.tensor([1.0, 2.0, -1.0]),
                                                 bias=torch.tensor([0.5, 0.0, 3.0]))), (_IMG,)),
    "bilinear": (lambda x: (F.interpolate(x, scale_factor=2, mode="bilinear"),
                            F.interpolate(x, size=(7, 3), mode="bilinear", align_corners=True),
                            F.interpolate(x, size=(6, 9), mode="bilinear", align_corners=False),
                            F.interpolate(x, scale_factor=1.5, mode="bilinear"),
                            F.interpolate(x, scale_factor=(1.7, 0.6), mode="bilinear", align_corners=True),
                            F.interpolate(x, size=(1, 1), mode="bilinear", align_corners=True)), (_IMG,)),
    "grouped-query attention": (lambda q, k, v: (F.scaled_dot_product_attention(q, k, v, enable_gqa=True),
                                                 F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                                                enable_gqa=True)),
                                (torch.randn(2, 6, 4, 8, generator=_gen(3)), torch.randn(2, 2, 5, 8, generator=_gen(4)),
                                 torch.randn(2, 2, 5, 8, generator=_gen(5)))),
}


def _run_both(mod, func, args):
    """``func`` of ``mod`` interpreted and compiled."""
    return [relax_mlir.interpret(mod, func, *args), relax_mlir.VirtualMachine(relax_mlir.compile(mod))[func](*args)]


def _as_list(value):
    return list(value) if isinstance(value, (tuple, list)) else [value]


@pytest.mark.parametrize("case", list(_FORWARD))
def test_ops_compute_what_pytorch_computes(case):
    fn, args = _FORWARD[case]
    model = _Lambda(fn)
    mod, _, _ = from_exported_program(torch.export.export(model, args))
    roundtrip(mod)
    expected = [t.numpy() for t in _as_list(model(*args))]
    for got in _run_both(mod, "main", [a.numpy() for a in args]):
        got = _as_list(got)
        assert len(got) == len(expected), case
        for i, (g, e) in enumerate(zip(got, expected)):
            assert (g.dtype, g.shape) == (e.dtype, e.shape), (case, i)
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6, err_msg=f"{case}, output {i}")


class _Scored(torch.nn.Module):
    """``fn(x + b)`` weighed by fixed random numbers and summed: the gradient w.r.t. ``b`` (zeros) is the one w.r.t.
    the op's input, each output element weighed differently (a plain sum would hide a permuted gradient)."""

    def __init__(self, fn, args):
        super().__init__()
        self.fn, self.b = fn, torch.nn.Parameter(torch.zeros_like(args[0]))
        self.weights = [torch.randn(t.shape, generator=_gen(9)) for t in _as_list(fn(*args))]

    def forward(self, x, *rest):
        return sum((y * w).sum() for y, w in zip(_as_list(self.fn(x + self.b, *rest)), self.weights))


_GRADIENTS = {
    "normalize, a zero row": (F.normalize, (_X_ZERO_ROW,)),
    "normalize p=1, a zero in each column": (lambda x: F.normalize(x, p=1, dim=0), (_X_ZERO_ROW,)),  # abs'(0) is 0
    "normalize eps": (lambda x: F.normalize(x * 1e-3, dim=1, eps=0.05), (_X_ZERO_ROW,)),
    "vector norms": (lambda x: (torch.linalg.vector_norm(x, dim=-1), torch.linalg.vector_norm(x, 1, dim=0),
                                torch.linalg.vector_norm(x, float("inf"), dim=1, keepdim=True),
                                torch.linalg.vector_norm(x, 3, dim=0), torch.linalg.vector_norm(x, 0.5)),
                     (_X_ZERO_ROW,)),
    "var_mean": (lambda x: torch.var_mean(x, dim=1), (_X,)),
    "prod": (lambda x: (x.prod(dim=1), x.prod()), (_X,)),
    "gather": (lambda x, i: torch.gather(x, 1, i), (_X, torch.tensor([[4, 0, 0, 2], [1, 3, 2, 2], [0, 0, 4, 1]]))),
    "reflect and replicate pads": (lambda x: (F.pad(x, (1, 2, 2, 1), mode="reflect"),
                                              F.pad(x, (2, 0, 1, 3), mode="replicate")), (_IMG,)),
    "instance norm": (F.instance_norm, (_IMG,)),
    "bilinear": (lambda x: (F.interpolate(x, scale_factor=2, mode="bilinear"),
                            F.interpolate(x, size=(7, 3), mode="bilinear", align_corners=True)), (_IMG,)),
    "grouped-query attention": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True),
                                (torch.randn(2, 6, 4, 8, generator=_gen(3)), torch.randn(2, 2, 5, 8, generator=_gen(4)),
                                 torch.randn(2, 2, 5, 8, generator=_gen(5)))),
}


def _assert_gradients(model, args, wanted, atol=1e-6):
    """The imported ``model``'s forward and the gradients of its parameters (interpreted and compiled, after
    ``DecomposeOpsForTraining`` as ``SetupTrainer`` does) are PyTorch's; ``wanted`` are ``torch.autograd``'s."""
    mod, params, _ = from_exported_program(torch.export.export(model, args))
    arrays = [a.numpy() for a in args] + list(params.values())
    adjoint = transform.Gradient("main", require_grads=mod["main"].params[len(args):])(mod)
    adjoint = transform.DecomposeOpsForTraining()(adjoint)
    for loss, grads in _run_both(adjoint, "main_adjoint", arrays):
        # The loss is a float32 sum of signed weighted terms that can cancel to far below their size (0.0076 from
        # terms near 1): the summation order of the host's vector width moves it by an ulp of the terms, ~1e-7.
        np.testing.assert_allclose(loss, model(*args).item(), rtol=1e-5, atol=1e-6)
        assert len(grads) == len(wanted)
        for got, want in zip(grads, wanted):
            assert np.isfinite(got).all()
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=atol)


@pytest.mark.parametrize("case", list(_GRADIENTS))
def test_gradients_are_pytorchs(case):
    fn, args = _GRADIENTS[case]
    model = _Scored(fn, args)
    model(*args).backward()
    _assert_gradients(model, args, [model.b.grad.numpy()])


def test_normalize_of_a_zero_row_has_pytorchs_finite_gradient():
    """At a zero vector the norm's root has an infinite derivative: the chain rule's 0 * inf was NaN. PyTorch's
    gradient there is ``g / eps`` (the clamp passes none to the norm)."""
    model = _Scored(lambda x: F.normalize(x, dim=1), (_X_ZERO_ROW,))
    model(_X_ZERO_ROW).backward()
    expected = model.b.grad.numpy()
    np.testing.assert_allclose(expected[1], model.weights[0][1].numpy() / 1e-12, rtol=1e-6)
    _assert_gradients(model, (_X_ZERO_ROW,), [expected], atol=1e-3)


class _Bag(torch.nn.Module):
    """An embedding bag; with ``score`` set, its output weighed by it and summed (for gradients)."""

    def __init__(self, mode: str, **options):
        super().__init__()
        self.bag, self.score = torch.nn.EmbeddingBag(10, 3, mode=mode, **options), None

    def forward(self, indices, offsets, *weights):
        out = self.bag(indices, offsets, per_sample_weights=weights[0] if weights else None)
        return out if self.score is None else (out * self.score).sum()


_INDICES = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 0])
_BAGS = {  # (module, offsets, per-sample weights); the bag [4, 4) is empty (zeros in every mode)
    "sum": (_Bag("sum"), torch.tensor([0, 4, 4, 6]), None),
    "mean": (_Bag("mean"), torch.tensor([0, 4, 4, 6]), None),
    "max": (_Bag("max"), torch.tensor([0, 3, 3, 6]), None),  # no row twice in a bag (see _embedding_bag)
    "sum, per-sample weights, last offset included": (_Bag("sum", include_last_offset=True),
                                                      torch.tensor([0, 2, 2, 7, 9]), torch.rand(9, generator=_gen(6))),
    "mean, padding_idx": (_Bag("mean", padding_idx=4), torch.tensor([0, 3, 5]), None),
    "max, padding_idx": (_Bag("max", padding_idx=2), torch.tensor([0, 3, 5]), None),
}


@pytest.mark.parametrize("case", list(_BAGS))
def test_embedding_bag_values_and_weight_gradient_are_pytorchs(case):
    bag, offsets, weights = _BAGS[case]
    args = (_INDICES, offsets) + (() if weights is None else (weights,))
    mod, params, _ = from_exported_program(torch.export.export(bag, args))
    expected = bag(*args)
    for got in _run_both(mod, "main", [a.numpy() for a in args] + list(params.values())):
        np.testing.assert_allclose(got, expected.detach().numpy(), rtol=1e-5, atol=1e-6)
    bag.score = torch.randn(expected.shape, generator=_gen(7))
    bag(*args).backward()
    _assert_gradients(bag, args, [bag.bag.weight.grad.numpy()])


def test_embedding_bag_of_a_2d_input():
    bag = torch.nn.EmbeddingBag(10, 4, mode="mean")
    indices = torch.tensor([[1, 2, 4], [5, 4, 3]])
    mod, params, _ = from_exported_program(torch.export.export(_Lambda(bag), (indices,)))
    for got in _run_both(mod, "main", [indices.numpy(), *params.values()]):
        np.testing.assert_allclose(got, bag(indices).detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("norm", [torch.nn.InstanceNorm1d(3, affine=True), torch.nn.InstanceNorm2d(3, affine=True),
                                  torch.nn.InstanceNorm2d(3), torch.nn.BatchNorm2d(3, track_running_stats=False)],
                         ids=["1d affine", "2d affine", "2d", "batch norm without running statistics"])
def test_instance_norm_values_and_gradients_are_pytorchs(norm):
    x = _IMG if isinstance(norm, torch.nn.modules.batchnorm._NormBase) and "1d" not in type(norm).__name__ \
        else _IMG[:, :, 0]
    with torch.no_grad():
        for p in norm.parameters():
            p.add_(torch.randn(p.shape, generator=_gen(8)))
    model = _Scored(norm, (x,))
    model(x).backward()
    _assert_gradients(model, (x,), [p.grad.numpy() for p in model.parameters()], atol=1e-5)


def test_an_out_of_range_one_hot_class_is_an_error_as_in_pytorch():
    """one_hot is kept whole: its decomposition checks the classes with asserts (``_assert_async``)."""
    model = _Lambda(lambda i: F.one_hot(i, 4))
    mod, _, _ = from_exported_program(torch.export.export(model, (torch.tensor([0, 1]),)))
    with pytest.raises(RuntimeError, match="Class values must be smaller than num_classes"):
        model(torch.tensor([2, 4]))
    for run in (lambda a: relax_mlir.interpret(mod, "main", a),
                lambda a: relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"](a)):
        with pytest.raises(IndexError, match=r"one_hot.* 4 .*out of range"):
            run(np.array([2, 4]))


def test_a_negative_norm_order_is_refused_naming_the_node():
    ep = torch.export.export(_Lambda(lambda x: torch.linalg.vector_norm(x, -2)), (_X,))
    with pytest.raises(TorchImportError, match=r"node \w+ \(aten\.linalg_vector_norm\.default\): vector norm of "
                                               r"order -2; only positive orders, 0, inf and -inf are supported"):
        from_exported_program(ep)
