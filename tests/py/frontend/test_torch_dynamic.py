"""``from_exported_program`` of programs exported with ``dynamic_shapes``: torch's symbolic sizes become Relax size
variables (named by torch's symbols, ``s77``), its shape arithmetic Relax size expressions, and the imported module
computes what PyTorch computes at every size, interpreted and compiled; it differentiates and trains with a symbolic
batch as PyTorch trains the model.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import relax_mlir  # noqa: E402
from relax_mlir import transform  # noqa: E402
from relax_mlir.frontend.common import Names  # noqa: E402
from relax_mlir.frontend.torch import TorchImportError, from_exported_program  # noqa: E402
from relax_mlir.ir import TensorStructInfo  # noqa: E402
from relax_mlir.ir.sym import SizeVar, floor_div  # noqa: E402
from relax_mlir.testing import roundtrip  # noqa: E402
from relax_mlir.training import SetupTrainer, Trainer  # noqa: E402
from relax_mlir.training.loss import CrossEntropyLoss  # noqa: E402
from relax_mlir.training.optimizer import MomentumSGD  # noqa: E402

from .compare import LR, MOMENTUM, WD, perturb, torch_training  # noqa: E402
from .torch_models import CLASSES, batch, make  # noqa: E402

Dim = torch.export.Dim


class Block(torch.nn.Module):
    """A pre-norm transformer block on tokens of any batch and length: token and position embeddings (positions
    are ``arange(seq)``), causal multi-head attention written out (q, k, v viewed to (batch, seq, heads, dim) and
    permuted), layer norms, a GELU MLP, residuals, mean pooling and a dense head."""

    VOCAB, WIDTH, HEADS = 20, 16, 2

    def __init__(self) -> None:
        super().__init__()
        self.embed, self.pos = torch.nn.Embedding(self.VOCAB, self.WIDTH), torch.nn.Embedding(32, self.WIDTH)
        self.norm1, self.norm2 = torch.nn.LayerNorm(self.WIDTH), torch.nn.LayerNorm(self.WIDTH)
        self.qkv, self.out = torch.nn.Linear(self.WIDTH, 3 * self.WIDTH), torch.nn.Linear(self.WIDTH, self.WIDTH)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(self.WIDTH, 32), torch.nn.GELU(),
                                       torch.nn.Linear(32, self.WIDTH))
        self.head = torch.nn.Linear(self.WIDTH, CLASSES)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        b, s = tokens.shape
        h = self.embed(tokens) + self.pos(torch.arange(s))
        q, k, v = self.qkv(self.norm1(h)).split(self.WIDTH, dim=-1)
        q, k, v = (t.view(b, s, self.HEADS, -1).permute(0, 2, 1, 3) for t in (q, k, v))
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        h = h + self.out(a.permute(0, 2, 1, 3).reshape(b, s, -1))
        h = h + self.mlp(self.norm2(h))
        return self.head(h.mean(1))


BATCH = Dim("batch", min=1, max=1024)
SEQ = Dim("seq", min=2, max=32)
_GEN = torch.Generator().manual_seed(0)
# name -> (model, example input, dynamic_shapes, inputs to compare on)
MODELS = {
    "mlp": (lambda: make("mlp"), torch.randn(4, 12), {"input": {0: BATCH}},
            [torch.randn(n, 12, generator=_GEN) for n in (1, 3, 9)]),
    "cnn": (lambda: make("cnn"), torch.randn(4, 1, 8, 8), {"x": {0: BATCH}},
            [torch.randn(n, 1, 8, 8, generator=_GEN) for n in (1, 3, 9)]),
    "transformer": (lambda: _seeded(Block), torch.randint(0, Block.VOCAB, (4, 6)), {"tokens": {0: BATCH, 1: SEQ}},
                    [torch.randint(0, Block.VOCAB, shape, generator=_GEN) for shape in ((1, 2), (3, 7), (5, 4))]),
}


def _seeded(cls):
    torch.manual_seed(0)
    return cls()


def _export(model, example, dynamic_shapes):
    return torch.export.export(model, (example,), dynamic_shapes=dynamic_shapes)


def _symbols(ep) -> set:
    """The names of the program's symbolic sizes (torch's, from its range constraints)."""
    return {str(s) for s in ep.range_constraints}


def _run_both(mod, *args):
    """``main`` interpreted and compiled."""
    return [relax_mlir.interpret(mod, "main", *args), relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"](*args)]


@pytest.mark.parametrize("name", list(MODELS))
def test_a_dynamic_model_matches_pytorch_at_every_size(name):
    """Exported with a dynamic batch (and sequence length), imported once: the input's dims are torch's symbols,
    the printed module parses back equal, and at each size PyTorch's output is computed."""
    build, example, dynamic, inputs = MODELS[name]
    model = build()
    gen = torch.Generator().manual_seed(1)
    for _ in range(2):  # move batch-norm running statistics off (0, 1)
        model.train()(batch(model, 8, gen)[0] if name != "transformer" else example)
    model.eval()
    ep = _export(model, example, dynamic)
    mod, params, states = from_exported_program(ep)
    roundtrip(mod)
    shape = mod["main"].params[0].struct_info.shape
    dynamic_axes = sorted(dynamic[next(iter(dynamic))])
    assert {str(shape[a]) for a in dynamic_axes} == _symbols(ep)
    assert all(isinstance(d, int) for a, d in enumerate(shape) if a not in dynamic_axes)
    vm = relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"]
    for x in inputs:
        expected = model(x).detach().numpy()
        args = [x.numpy(), *params.values(), *states.values()]
        for got in (relax_mlir.interpret(mod, "main", *args), vm(*args)):
            np.testing.assert_allclose(got[0] if states else got, expected, rtol=1e-5, atol=1e-6)


def test_the_cnn_flatten_is_a_reshape_to_a_symbolic_size():
    """``torch.flatten(x, 1)`` is ``view(x, [x.shape[0], 32])`` in the program (``aten.sym_size.int``)."""
    _, example, dynamic, _ = MODELS["cnn"]
    ep = _export(make("cnn").eval(), example, dynamic)
    (batch_size,) = _symbols(ep)
    bindings = from_exported_program(ep).mod["main"].body.blocks[0].bindings
    (view,) = [b.value for b in bindings if b.var.name_hint == "view"]
    assert view.op.name == "relax.reshape" and view.attrs["shape"] == (SizeVar(batch_size), 32)


class _Sizes(torch.nn.Module):
    """Shape arithmetic: sizes read with ``x.shape``, positions, a zeros tensor and a division by a size, slices
    bounded by another input's size and counted from a symbolic end, a negative index, a corrected variance over a
    symbolic axis, an arange with a step and a derived end, a size as a fill value."""

    def forward(self, x, y):
        n = x.shape[1]
        row = x + torch.arange(n, dtype=torch.float32) + torch.zeros(x.shape[0], 1) + x.sum(1, keepdim=True) / n
        return (row, y[: x.shape[0]] * 2, x[:, -2:], x[-1], x.var(1), torch.arange(1, 2 * n, 3),
                torch.full((x.shape[0],), n))


def test_shape_arithmetic_maps_onto_relax_sizes():
    m = Dim("m", min=3, max=100)
    ep = torch.export.export(_Sizes(), (torch.randn(4, 5), torch.randn(4, 3)),
                             dynamic_shapes={"x": {0: BATCH, 1: m}, "y": {0: BATCH}})
    mod, params, _ = from_exported_program(ep)
    roundtrip(mod)
    x_sinfo, y_sinfo = (p.struct_info for p in mod["main"].params)
    b, n = x_sinfo.shape
    assert y_sinfo.shape == (b, 3)  # one batch size shared by both inputs
    results = mod["main"].ret_struct_info.fields
    assert [r.shape for r in results] == [(b, n), (b, 3), (b, 2), (n,), (b,), (floor_div(2 * n + 1, 3),), (b,)]
    for x, y in ((torch.randn(2, 5), torch.randn(2, 3)), (torch.randn(6, 3), torch.randn(6, 3)),
                 (torch.randn(1, 9), torch.randn(1, 3))):
        expected = [t.numpy() for t in _Sizes()(x, y)]
        for got in _run_both(mod, x.numpy(), y.numpy()):
            for g, e in zip(got, expected):
                assert g.dtype == e.dtype and g.shape == e.shape
                np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


class _Pairs(torch.nn.Module):
    def forward(self, x, y):
        return y.reshape(-1, 2, 3).sum(1) + x, y[::2] + 1


def test_a_derived_size_is_an_expression_of_its_root():
    """``y`` of ``2 * batch`` rows where ``x`` has ``batch``: ``y``'s parameter is ``(2 * s, 3)`` for ``x``'s
    ``s``, and the reshape of ``y`` to ``(s, 2, 3)`` needs no size of its own."""
    ep = torch.export.export(_Pairs(), (torch.randn(4, 3), torch.randn(8, 3)),
                             dynamic_shapes={"x": {0: BATCH}, "y": {0: 2 * BATCH}})
    mod, _, _ = from_exported_program(ep)
    roundtrip(mod)
    x_sinfo, y_sinfo = (p.struct_info for p in mod["main"].params)
    s = x_sinfo.shape[0]
    assert str(s) in _symbols(ep) and y_sinfo.shape == (2 * s, 3)
    for rows in (1, 5):
        x, y = torch.randn(rows, 3), torch.randn(2 * rows, 3)
        for got in _run_both(mod, x.numpy(), y.numpy()):
            for g, e in zip(got, _Pairs()(x, y)):
                np.testing.assert_allclose(g, e.numpy(), rtol=1e-6)


class _Odd(torch.nn.Module):
    def forward(self, y):
        return y[1:].reshape(-1, 2, 3).sum(1), y * 2


def test_a_derived_size_without_its_root_gets_a_variable_of_its_own():
    """Only ``y`` of ``2 * batch + 1`` rows: the parameter ``(2 * s + 1, 3)`` could not bind ``s``, so the
    dimension is a variable ``y_dim0`` of its own and ``s`` is ``(y_dim0 - 1) // 2``."""
    ep = torch.export.export(_Odd(), (torch.randn(9, 3),), dynamic_shapes={"y": {0: 2 * BATCH + 1}})
    mod, _, _ = from_exported_program(ep)
    roundtrip(mod)
    own = SizeVar("y_dim0")
    assert mod["main"].params[0].struct_info.shape == (own, 3)
    assert [r.shape for r in mod["main"].ret_struct_info.fields] == [(floor_div(own - 1, 2), 3), (own, 3)]
    for rows in (3, 11):
        y = torch.randn(rows, 3)
        for got in _run_both(mod, y.numpy()):
            for g, e in zip(got, _Odd()(y)):
                np.testing.assert_allclose(g, e.numpy(), rtol=1e-6)


class _Pairs3(torch.nn.Module):
    def forward(self, x):
        return x.reshape(-1, 2, 3).sum(1)


def test_a_reshape_with_minus_one_takes_its_own_sizes():
    """torch records ``reshape(-1, 2, 3)`` of ``(s, 3)`` as ``(s//2, s//(s//2), 3)`` (a size no Relax size
    expresses, and only 2 for the sizes torch checks): the reshape is to its arguments, the -1 ``(3 * s) // 6``."""
    ep = torch.export.export(_Pairs3(), (torch.randn(4, 3),), dynamic_shapes={"x": {0: Dim.DYNAMIC}})
    mod, _, _ = from_exported_program(ep)
    roundtrip(mod)
    s, _ = mod["main"].params[0].struct_info.shape
    assert mod["main"].ret_struct_info.shape == (floor_div(s, 2), 3)
    for rows in (2, 10):
        x = torch.randn(rows, 3)
        for got in _run_both(mod, x.numpy()):
            np.testing.assert_allclose(got, _Pairs3()(x).numpy(), rtol=1e-6)


class _Larger(torch.nn.Module):
    def forward(self, x, y):
        return torch.zeros(torch.sym_max(x.shape[0], y.shape[0]))


class _Root(torch.nn.Module):
    def forward(self, x):
        return x * x.shape[0] ** 0.5


def test_a_size_no_relax_size_expresses_is_refused_naming_the_node():
    ep = torch.export.export(_Larger(), (torch.randn(4, 3), torch.randn(5, 3)),
                             dynamic_shapes={"x": {0: BATCH}, "y": {0: Dim("other")}})
    with pytest.raises(TorchImportError, match=r"^from_exported_program: node sym_max \(sym_max\): the size "
                       r"Max\(s\d+, s\d+\) uses Max, which a Relax size cannot express"):
        from_exported_program(ep)
    ep = torch.export.export(_Root(), (torch.randn(4, 3),), dynamic_shapes={"x": {0: BATCH}})
    with pytest.raises(TorchImportError, match=r"^from_exported_program: node sym_float \(sym_float\): the float "
                       r"ToFloat\(s\d+\) computed from sizes is not supported"):
        from_exported_program(ep)


def test_range_constraints_are_not_enforced():
    """``Dim(min=2, max=4)``: torch's range, not checked by the imported module (a batch of 7 runs)."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    ep = torch.export.export(model, (torch.ones(3, 4),), dynamic_shapes={"input": {0: Dim("b", min=2, max=4)}})
    mod, params, _ = from_exported_program(ep)
    x = torch.randn(7, 4)
    # A floor of 4 float32 ulps of the sums of |terms|: rtol alone was 0.4 of the way to failing where a row's
    # products cancel, and PyTorch's own Linear kernel (MKL, oneDNN) sums in the order of the host's CPU.
    w, b = model.weight.detach().numpy().astype(np.float64), model.bias.detach().numpy().astype(np.float64)
    floor = 4 * float(np.finfo(np.float32).eps) * float((np.abs(x.numpy()) @ np.abs(w).T + np.abs(b)).max())
    np.testing.assert_allclose(relax_mlir.interpret(mod, "main", x.numpy(), *params.values()),
                               model(x).detach().numpy(), rtol=1e-6, atol=floor)


class _MLPLoss(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.mlp = make("mlp")

    def forward(self, x, labels):
        return torch.nn.functional.cross_entropy(self.mlp(x), labels)


def test_gradient_of_the_imported_mlp_with_a_symbolic_batch():
    """``Gradient`` of the imported MLP's mean cross-entropy (inputs and labels sharing the batch): the gradients
    at two batch sizes are PyTorch's."""
    model, gen = _MLPLoss(), torch.Generator().manual_seed(3)
    ep = torch.export.export(model, (torch.randn(4, 12), torch.zeros(4, dtype=torch.int64)),
                             dynamic_shapes={"x": {0: BATCH}, "labels": {0: BATCH}})
    mod, params, _ = from_exported_program(ep)
    grads = roundtrip(transform.Gradient("main", require_grads=mod["main"].params[2:])(mod))
    for n in (2, 7):
        x, labels = torch.randn(n, 12, generator=gen), torch.randint(0, CLASSES, (n,), generator=gen)
        model.zero_grad()
        loss = model(x, labels)
        loss.backward()
        value, got = relax_mlir.interpret(grads, "main_adjoint", x.numpy(), labels.numpy(), *params.values())
        np.testing.assert_allclose(value, loss.item(), rtol=1e-5)
        for g, p in zip(got, model.parameters()):
            np.testing.assert_allclose(g, p.grad.numpy(), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_training_with_a_symbolic_batch_matches_pytorch(name):
    """One imported module (``SetupTrainer`` with the backbone's symbolic batch for predictions and labels)
    trained on batches of 8, 5 and 3 (a last short batch) as PyTorch's own loop trains the model."""
    gen = torch.Generator().manual_seed(2)
    model = make(name)
    batches = [batch(model, n, gen) for n in (8, 5, 8, 3, 8, 5)]
    perturb(model, gen, batches[0][0])
    _, example, dynamic, _ = MODELS[name]
    mod, params, states = from_exported_program(_export(copy.deepcopy(model).train(), example, dynamic))
    pred = mod["main"].ret_struct_info.fields[0] if states else mod["main"].ret_struct_info
    assert not isinstance(pred.shape[0], int)
    setup = SetupTrainer(CrossEntropyLoss("mean"), MomentumSGD(LR, MOMENTUM, weight_decay=WD),
                         [pred, TensorStructInfo((pred.shape[0],), "int64")])
    trainer = Trainer(mod, len(params), setup).build("cpu")
    trainer.load_params(params)
    if states:
        trainer.load_states(states)
    losses = [float(trainer.update_params(x.numpy(), y.numpy())) for x, y in batches]
    np.testing.assert_allclose(losses, torch_training(model, batches), rtol=1e-4)
    names = Names()
    final = {names(k): v.detach().numpy() for k, v in model.named_parameters()}
    for key, value in trainer.export_params().items():
        np.testing.assert_allclose(value, final[key], rtol=1e-4, atol=1e-6, err_msg=key)
