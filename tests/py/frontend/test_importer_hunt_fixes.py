"""Importer gaps a bug hunt found, each against PyTorch eager and autograd (or ``onnx.reference``), interpreted and
compiled: symbolic sizes as ``repeat`` counts (instance norm with ``affine=True`` and a dynamic batch), as ``split``
sizes and as ``clamp`` bounds (a replicate pad of a dynamic axis); ``any``/``all`` over an empty axis; ``gather``
refusing a negative index as PyTorch does; ONNX ``ScatterND`` with ``k = 0`` and its error for an index outside
the data naming the index and the axis."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import relax_mlir  # noqa: E402
from relax_mlir import transform  # noqa: E402
from relax_mlir.frontend.torch import from_exported_program  # noqa: E402
from relax_mlir.testing import roundtrip  # noqa: E402

Dim = torch.export.Dim


class _Lambda(torch.nn.Module):
    """``fn(self, *xs)``, with ``weights`` (name -> tensor) as parameters."""

    def __init__(self, fn, **weights):
        super().__init__()
        self.fn = fn
        for name, value in weights.items():
            self.register_parameter(name, torch.nn.Parameter(value))

    def forward(self, *xs):
        return self.fn(self, *xs)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _import(model, args, dynamic=None, **options):
    """Export (``dynamic``: each input's dynamic dims) and import ``model``; the module reads back as itself."""
    if dynamic is not None and isinstance(model, _Lambda):
        dynamic = (dynamic,)  # the specs of forward's *xs
    mod, params, _ = from_exported_program(torch.export.export(model, args, dynamic_shapes=dynamic), **options)
    roundtrip(mod)
    return mod, params


def _as_list(value):
    return list(value) if isinstance(value, (tuple, list)) else [value]


def _assert_values(model, mod, params, cases) -> None:
    """At each tuple of inputs in ``cases`` (sizes other than the example's), ``main`` interpreted and compiled
    gives PyTorch's outputs: shapes, dtypes and values."""
    compiled = relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"]
    for args in cases:
        expected = [t.detach().numpy() for t in _as_list(model(*args))]
        arrays = [a.numpy() for a in args] + list(params.values())
        for got in (relax_mlir.interpret(mod, "main", *arrays), compiled(*arrays)):
            got = _as_list(got)
            assert len(got) == len(expected)
            for g, e in zip(got, expected):
                assert (g.dtype, g.shape) == (e.dtype, e.shape)
                np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


def _assert_gradients(model, mod, params, cases) -> None:
    """``model`` returns a scalar: at each tuple of inputs, the gradients of the imported module's parameters
    (``Gradient`` after ``DecomposeOpsForTraining``, as ``SetupTrainer`` runs them), interpreted and compiled, are
    ``torch.autograd``'s."""
    count = len(mod["main"].params) - len(params)
    adjoint = transform.Gradient("main", require_grads=mod["main"].params[count:])(mod)
    adjoint = transform.DecomposeOpsForTraining()(adjoint)
    compiled = relax_mlir.VirtualMachine(relax_mlir.compile(adjoint))["main_adjoint"]
    for args in cases:
        model.zero_grad()
        loss = model(*args)
        loss.backward()
        arrays = [a.numpy() for a in args] + list(params.values())
        for value, grads in (relax_mlir.interpret(adjoint, "main_adjoint", *arrays), compiled(*arrays)):
            np.testing.assert_allclose(value, loss.item(), rtol=1e-5)
            assert len(grads) == len(list(model.parameters()))
            for got, p in zip(grads, model.parameters()):
                np.testing.assert_allclose(got, p.grad.numpy(), rtol=1e-5, atol=1e-5)


def _scored(y: torch.Tensor) -> torch.Tensor:
    """A scalar of ``y`` whose gradient differs from element to element (a plain sum would hide a permutation)."""
    return (y * torch.sin(y)).sum()


# -- repeat by a symbolic count ----------------------------------------------------------------------------------

def _instance_norm() -> torch.nn.Module:
    norm = torch.nn.InstanceNorm2d(3, affine=True)
    with torch.no_grad():
        for p in norm.parameters():
            p.add_(torch.randn(p.shape, generator=_gen(1)))
    return norm


def test_instance_norm_with_affine_and_a_dynamic_batch():
    """The decomposition repeats the weight and bias once per sample (``repeat(w, [batch])``): its values and its
    parameters' gradients at several batches are PyTorch's."""
    norm = _instance_norm()
    mod, params = _import(norm, (torch.randn(2, 3, 4, 5),), ({0: Dim("b")},))
    _assert_values(norm, mod, params, [(torch.randn(n, 3, 4, 5, generator=_gen(n)),) for n in (1, 2, 5)])
    model = _Lambda(lambda self, x: _scored(self.norm(x)))
    model.norm = norm
    mod, params = _import(model, (torch.randn(2, 3, 4, 5),), ({0: Dim("b")},))
    _assert_gradients(model, mod, params, [(torch.randn(n, 3, 4, 5, generator=_gen(n)),) for n in (1, 3)])


def _repeats(self, x):
    n = x.shape[0]
    return (torch.ones(1, 4).repeat(n, 1) + x[:, :4], self.w.repeat(n, 2), self.w.repeat(2, n, 1),
            x.repeat(2, n), x[:, :1].repeat(1, n + 1))


def test_repeat_by_symbolic_counts():
    """A count that is a size: of a size-1 axis (a broadcast), of a longer axis (the copies one after another), of
    a new leading axis, and a count that is a size expression."""
    model = _Lambda(_repeats, w=torch.randn(2, 3, generator=_gen(2)))
    mod, params = _import(model, (torch.randn(3, 6),), ({0: Dim("n")},))
    _assert_values(model, mod, params, [(torch.randn(n, 6, generator=_gen(n)),) for n in (1, 4)])


def test_gradient_through_a_repeat_by_a_symbolic_count():
    model = _Lambda(lambda self, x: _scored(self.w.repeat(x.shape[0], 2).reshape(x.shape[0], 12) * x),
                    w=torch.randn(2, 3, generator=_gen(3)))
    mod, params = _import(model, (torch.randn(3, 12),), ({0: Dim("n")},))
    _assert_gradients(model, mod, params, [(torch.randn(n, 12, generator=_gen(n)),) for n in (1, 4)])


# -- split into symbolic sizes -------------------------------------------------------------------------------------

def _halves(self, x):
    """SimCLR's ``z1, z2 = z.split([n, n])`` of a batch of two views (and ``chunk(2)``)."""
    n = x.shape[0] // 2
    z = x * self.w
    z1, z2 = z.split([n, n])
    first, second = z.chunk(2)
    return _scored(z1 * torch.cos(z2)) + _scored(first - 2 * second)


def test_split_into_symbolic_sizes_values_and_gradients():
    model = _Lambda(_halves, w=torch.randn(4, generator=_gen(4)))
    mod, params = _import(model, (torch.randn(6, 4),), ({0: 2 * Dim("b")},))
    cases = [(torch.randn(n, 4, generator=_gen(n)),) for n in (2, 10)]
    _assert_values(model, mod, params, cases)
    _assert_gradients(model, mod, params, cases)


def test_split_tensor_along_a_symbolic_dimension():
    """``split.Tensor`` (kept by a program imported without decompositions) into pieces of a symbolic size."""
    model = _Lambda(lambda self, x: tuple(t * (i + 1) for i, t in enumerate(x.split(x.shape[0] // 2))))
    mod, params = _import(model, (torch.randn(6, 3),), ({0: 2 * Dim("b")},), run_decompositions=False)
    _assert_values(model, mod, params, [(torch.randn(n, 3, generator=_gen(n)),) for n in (2, 8)])


# -- clamp to symbolic bounds --------------------------------------------------------------------------------------

def _pads(self, x):
    return F.pad(x + self.b, (1, 2), mode="replicate"), F.pad(x[:, :1, None], (2, 0, 1, 1), mode="replicate")


def test_replicate_pad_of_a_dynamic_axis():
    """The decomposition clamps positions to ``[0, size - 1]``: values at several widths."""
    model = _Lambda(_pads, b=torch.randn(3, 1, generator=_gen(5)))
    mod, params = _import(model, (torch.randn(2, 3, 5),), ({2: Dim("w", min=2)},))
    _assert_values(model, mod, params, [(torch.randn(2, 3, n, generator=_gen(n)),) for n in (1, 3, 8)])


def test_gradient_through_a_replicate_pad_of_a_dynamic_axis():
    model = _Lambda(lambda self, x: _scored(_pads(self, x)[0]), b=torch.randn(3, 1, generator=_gen(6)))
    mod, params = _import(model, (torch.randn(2, 3, 5),), ({2: Dim("w", min=2)},))
    _assert_gradients(model, mod, params, [(torch.randn(2, 3, n, generator=_gen(n)),) for n in (1, 4)])


def _clamped(self, x):
    n = x.shape[1]
    return _scored((x + self.b).clamp(min=-n, max=n - 1)) + _scored((x * self.s).clamp(max=n))


def test_clamp_to_symbolic_bounds_values_and_gradients():
    """Bounds that are sizes (one negative), with values on the bounds, where PyTorch's gradient flows (its clamp
    passes the gradient where ``min <= x <= max``), and NaN, which passes."""
    model = _Lambda(_clamped, b=torch.zeros(1), s=torch.ones(1))
    mod, params = _import(model, (torch.randn(2, 3),), ({1: Dim("n")},))
    on_bounds = torch.tensor([[-3.0, 2.0, 3.0], [-4.0, 0.5, 7.0]])
    cases = [(on_bounds,), (torch.randn(2, 5, generator=_gen(8)) * 6,)]
    _assert_gradients(model, mod, params, cases)
    plain = _Lambda(lambda self, x: (x.clamp(min=-x.shape[1], max=x.shape[1] - 1), x.clamp(min=x.shape[1])))
    mod, params = _import(plain, (torch.randn(2, 3),), ({1: Dim("n")},))
    with_nan = torch.tensor([[float("nan"), -9.0, 1.5, 9.0], [4.0, -4.0, 3.0, 0.0]])
    _assert_values(plain, mod, params, [(on_bounds,), (with_nan,), (torch.randn(2, 6, generator=_gen(9)) * 6,)])


# -- any/all over an empty axis -------------------------------------------------------------------------------------

def _truths(self, b, i):
    return b.any(dim=1), b.all(dim=1), b.any(), b.all(), i.any(0), i.all(0, keepdim=True)


def test_any_and_all_of_nothing_are_false_and_true():
    model = _Lambda(_truths)
    args = (torch.zeros(3, 0, dtype=torch.bool), torch.zeros(0, 2, dtype=torch.int64))
    mod, params = _import(model, args)
    _assert_values(model, mod, params, [args])


def test_any_and_all_over_a_symbolic_axis_that_is_empty_when_it_runs():
    model = _Lambda(_truths)
    example = (torch.tensor([[True, False], [False, False], [True, True]]), torch.tensor([[1, 0], [0, 0]]))
    mod, params = _import(model, example, ({1: Dim("k")}, {0: Dim("m")}))
    empty = (torch.zeros(3, 0, dtype=torch.bool), torch.zeros(0, 2, dtype=torch.int64))
    _assert_values(model, mod, params, [empty, example, (torch.ones(3, 5, dtype=torch.bool), torch.ones(4, 2).long())])


# -- gather refuses negative indices, as PyTorch -------------------------------------------------------------------

def _runs(mod):
    compiled = relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"]
    return [lambda *a: relax_mlir.interpret(mod, "main", *a), compiled]


def test_gather_with_a_negative_index_is_an_index_error():
    """Relax's ``gather_elements`` counts a negative index from the end (ONNX's GatherElements); PyTorch's
    ``gather`` raises for it, and so does the imported program, naming the index and the axis' size."""
    model = _Lambda(lambda self, x, i: torch.gather(x, 1, i))
    x, index = torch.arange(6.0).reshape(2, 3), torch.tensor([[2], [0]])
    mod, params = _import(model, (x, index))
    _assert_values(model, mod, params, [(x, index)])
    nothing = (x, torch.zeros(2, 0, dtype=torch.int64))
    _assert_values(model, *_import(model, nothing), [nothing])
    bad = torch.tensor([[1], [-1]])
    with pytest.raises(RuntimeError, match="index -1 is out of bounds for dimension 1 with size 3"):
        model(x, bad)
    for run in _runs(mod):
        with pytest.raises(IndexError, match=r"binding '\w+': relax\.gather_elements.*index -1 at position 1 .*out "
                                             r"of range.*\[0, 3\)"):
            run(x.numpy(), bad.numpy())
        with pytest.raises(IndexError, match=r"gather_elements.*index 3 at position 1"):
            run(x.numpy(), torch.tensor([[1], [3]]).numpy())


def test_gather_on_a_symbolic_axis_with_a_negative_index_is_an_index_error():
    model = _Lambda(lambda self, x, i: torch.gather(x, 0, i))
    example = (torch.randn(4, 3), torch.tensor([[3, 0, 1], [1, 2, 0]]))
    mod, params = _import(model, example, ({0: Dim("n")}, {0: Dim("m")}))
    x = torch.randn(6, 3, generator=_gen(10))
    _assert_values(model, mod, params, [example, (x, torch.tensor([[5, 0, 1], [2, 2, 4]]))])
    for run in _runs(mod):
        with pytest.raises(IndexError, match=r"relax\.gather_elements.*index -2 at position 1 .*\[0, 6\)"):
            run(x.numpy(), np.array([[5, -2, 1], [2, -1, 4]]))


# -- ONNX ScatterND -------------------------------------------------------------------------------------------------

def _scatter_nd(inputs: dict, reduction: str = "none"):
    """A model of one ScatterND node on ``inputs`` (NumPy arrays), and the reference evaluator's outputs."""
    pytest.importorskip("onnx")
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    info = lambda k, v: helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)  # noqa
    node = helper.make_node("ScatterND", ["d", "i", "u"], ["y"], name="scatter", reduction=reduction)
    graph = helper.make_graph([node], "g", [info(k, v) for k, v in inputs.items()],
                              [helper.make_tensor_value_info("y", 0, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    return model, lambda: ReferenceEvaluator(model).run(None, inputs)


def _imported(model):
    from relax_mlir.frontend.onnx import from_onnx

    mod, _, _ = from_onnx(model)
    roundtrip(mod)
    return mod


@pytest.mark.parametrize("rows, reduction", [(1, "none"), (2, "add"), (2, "max")])
def test_scatter_nd_with_empty_index_rows_writes_the_whole_data(rows, reduction):
    """``k = 0``: each row of ``indices`` (shape ``(rows, 0)``) addresses the whole of ``data``."""
    data = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    updates = np.random.default_rng(rows).standard_normal((rows, 2, 3, 4)).astype(np.float32)
    inputs = {"d": data, "i": np.zeros((rows, 0), np.int64), "u": updates}
    model, reference = _scatter_nd(inputs, reduction)
    (want,) = reference()
    for run in _runs(_imported(model)):
        np.testing.assert_allclose(run(*inputs.values()), want, rtol=1e-6)


@pytest.mark.parametrize("index, position, value, axis, size", [
    ([[1, 1], [0, 7]], 1, 7, 1, 5), ([[1, 2], [-4, 0]], 1, -4, 0, 3), ([[2, -1], [1, -6]], 1, -6, 1, 5),
    ([[3, 0], [0, 0]], 0, 3, 0, 3)])
def test_scatter_nd_index_outside_the_data_names_the_index_and_its_axis(index, position, value, axis, size):
    """An index outside its axis is reported as it is, with the axis and its size (it was a made-up flat
    position); negative ones inside count from the end, as in the reference."""
    inputs = {"d": np.zeros((3, 5), np.float32), "i": np.array(index, np.int64), "u": np.ones(2, np.float32)}
    interpret, compiled = _runs(_imported(_scatter_nd(inputs)[0]))
    with pytest.raises(IndexError, match=rf"index {value} at position {position} is out of range for an axis of "
                                         rf"size {size}"):
        interpret(*inputs.values())
    with pytest.raises(IndexError, match=rf"relax\.take: index {value} at position {position} .* out of range for "
                                         rf"axis {axis} of size {size}"):
        compiled(*inputs.values())
    fine = dict(inputs, i=np.array([[2, -1], [-3, 4]], np.int64), u=np.array([1.0, 2.0], np.float32))
    (want,) = _scatter_nd(fine)[1]()
    for run in (interpret, compiled):
        np.testing.assert_array_equal(run(*fine.values()), want)
