"""``from_exported_program``: imported models compute what PyTorch computes, and train as PyTorch trains them.

Training: see ``compare.py`` (20 steps, float32 losses within a relative 1e-4 of PyTorch's at every step, final
parameters likewise).
"""

from __future__ import annotations

import copy
import warnings

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
        return torch.logcumsumexp(torch.erfinv(x), 1) + torch.erfinv(x * 2) + torch.fft.fft(x).real


def test_every_unsupported_op_listed_at_once():
    ep = torch.export.export(_Unsupported(), (torch.randn(2, 3),))
    with pytest.raises(UnsupportedOpsError) as info:
        from_exported_program(ep)
    message = str(info.value)
    assert "aten.erfinv.default (used by erfinv, erfinv_1)" in message
    assert "aten.logcumsumexp.default (used by logcumsumexp)" in message
    assert "aten._fft_r2c.default (used by _fft_r2c)" in message and "4 unsupported op(s)" in message
    assert set(info.value.ops) >= {"aten.erfinv.default", "aten.logcumsumexp.default"}


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


def test_cli_refuses_a_zip_that_is_not_a_program_in_one_line(tmp_path):
    """A zip torch.export.load cannot read (a state dict from torch.save; the pre-2.7 layout, missing its files):
    our one-line error and nothing else, not the traceback torch logs first nor its "older format" warning."""
    import subprocess
    import sys
    import zipfile

    torch.save({"w": torch.ones(2)}, str(tmp_path / "state.pt2"))
    with zipfile.ZipFile(tmp_path / "old.pt2", "w") as z:
        z.writestr("version", "8.0")
    for name, cause in [("state.pt2", "RuntimeError: PytorchStreamReader failed locating file archive_format"),
                        ("old.pt2", "AssertionError: serialized_exported_program is None")]:
        done = subprocess.run([sys.executable, "-m", "relax_mlir.cli", "import", name], capture_output=True,
                              text=True, cwd=tmp_path, timeout=300)
        assert done.returncode == 1, done
        assert done.stderr.splitlines() == [done.stderr.strip()], done.stderr
        assert f"error: {name}: not an exported program torch.export.load can read ({cause}" in done.stderr


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


class _Lambda(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


_ELEMENTWISE = {  # found importing real code: each computed something else than PyTorch, or did not import
    "sum of everything": (lambda x, t: x.sum(), "f"),
    "1-D dot product": (lambda x, t: torch.matmul(x[0], x[1]), "f"),
    "int / 2": (lambda x, t: t / 2, "i"),
    "int * 0.5": (lambda x, t: t * 0.5, "i"),
    "int + float": (lambda x, t: t + x, "fi"),
    "rsub with alpha": (lambda x, t: torch.rsub(x, 2.0, alpha=3), "f"),
    "where of a comparison": (lambda x, t: torch.where(x > 0.1, x, -x), "f"),
    "comparison of int and float": (lambda x, t: (t >= x).float(), "fi"),
    "full_like of another dtype": (lambda x, t: torch.full_like(t, 0.5, dtype=torch.float32) + x, "fi"),
    "remainder and fmod": (lambda x, t: torch.remainder(x * 7, 3.0) + torch.fmod(x * 7, -3.0), "f"),
    "rounding and trig": (lambda x, t: torch.floor(x * 3) + torch.round(x) + torch.sign(x) + torch.trunc(x * 2)
                          + torch.log1p(x.abs()) + torch.atan(x) + torch.reciprocal(x + 3), "f"),
}


@pytest.mark.parametrize("case", list(_ELEMENTWISE))
def test_elementwise_programs_compute_what_pytorch_computes(case):
    fn, uses = _ELEMENTWISE[case]
    x = torch.randn(2, 3, generator=torch.Generator().manual_seed(0))
    t = torch.tensor([[1, 3, 4], [5, 7, 8]])
    model, args = _Lambda(lambda a, b: fn(a, b)), (x, t)
    ep = torch.export.export(model, args)
    mod, params, states = from_exported_program(ep)
    roundtrip(mod)
    expected = model(*args).numpy()
    inputs = [a.numpy() for a in args]
    got = relax_mlir.interpret(mod, "main", *inputs)
    compiled = relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"](*inputs)
    for out in (got, compiled):
        assert out.dtype == expected.dtype and out.shape == expected.shape, case
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


def test_a_python_number_input_is_refused_naming_it():
    with pytest.raises(TorchImportError, match=r"input \w+ is a int \(3\), not a tensor; only tensor inputs"):
        from_exported_program(torch.export.export(_Lambda(lambda x, n: x * n), (torch.ones(2), 3)))


def test_dropout_of_a_model_exported_for_training_is_its_output():
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Dropout(0.25), torch.nn.Linear(8, 3)).train()
    mod, params, _ = from_exported_program(torch.export.export(model, (torch.ones(5, 4),)))
    assert mod["main"].ret_struct_info.shape == (5, 3)
    out = relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"](np.ones((5, 4), "float32"), *params.values())
    assert out.shape == (5, 3) and np.isfinite(out).all()


def test_embedding_padding_row_gets_no_gradient():
    from relax_mlir import transform

    class Loss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(6, 4, padding_idx=2)

        def forward(self, i):
            return self.embed(i).square().sum()

    model, idx = Loss(), torch.tensor([[0, 2, 5], [2, 2, 1]])
    mod, params, _ = from_exported_program(torch.export.export(model, (idx,)))
    np.testing.assert_allclose(relax_mlir.interpret(mod, "main", idx.numpy(), *params.values()),
                               model(idx).item(), rtol=1e-6)
    grads = transform.Gradient("main", require_grads=mod["main"].params[1:])(mod)
    _, (weight_grad,) = relax_mlir.interpret(grads, "main_adjoint", idx.numpy(), *params.values())
    model(idx).backward()
    np.testing.assert_allclose(weight_grad, model.embed.weight.grad.numpy(), rtol=1e-6)
    assert not weight_grad[2].any() and weight_grad[0].any()


def test_a_dynamic_size_is_symbolic_not_specialized():
    # int() of a torch.SymInt is the example's size: the batch of 5 was once baked in silently (then refused);
    # it is torch's symbol now (tests/py/frontend/test_torch_dynamic.py)
    batch = torch.export.Dim("batch")
    model = torch.nn.Linear(4, 3)
    ep = torch.export.export(model, (torch.ones(5, 4),), dynamic_shapes={"input": {0: batch}})
    mod, params, _ = from_exported_program(ep)
    (size,) = [str(s) for s in ep.range_constraints]
    assert str(mod["main"].params[0].struct_info.shape[0]) == size
    x = torch.randn(2, 4)
    np.testing.assert_allclose(relax_mlir.interpret(mod, "main", x.numpy(), *params.values()),
                               model(x).detach().numpy(), rtol=1e-6)


_MORE = {  # ATen ops real models use, each checked against PyTorch (values and dtypes, every output)
    "mean and max of everything": lambda x: (x.mean(), x.max(), x.min(), x.sum()),
    "max over a dim with its index": lambda x: torch.max(x * torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0]), dim=1),
    "argmax and argmin": lambda x: (x.argmax(dim=0, keepdim=True), x.argmin(), x.argmax(1)),
    "chunk and split": lambda x: (*x.chunk(2, dim=1), *torch.split(x, [1, 2], dim=0)),
    "one-piece chunk and split": lambda x: (*x.chunk(1, dim=0), *torch.split(x, [5], dim=1)),  # split: the data
    "pad": lambda x: torch.nn.functional.pad(x, (1, 2, 0, 1), value=0.5),
    "flip, index_select, repeat": lambda x: (x.flip([0, 1]), x.index_select(1, torch.tensor([4, 0, 0])),
                                            x.repeat(2, 1, 3)),
    "cumsum": lambda x: x.cumsum(1),
    "sort and topk": lambda x: (*torch.sort(x, dim=1, descending=True), *torch.topk(x, 2, dim=0, largest=False)),
    "division modes": lambda x: (torch.div(x * 7, 2.0, rounding_mode="floor"), torch.div(x * 7, 2.0, rounding_mode="trunc"),
                                 torch.div(torch.tensor([7, -7, 5]), 2, rounding_mode="floor")),
    "pow of a scalar base": lambda x: torch.pow(2.0, x),
    "addmm with alpha and beta": lambda x: torch.addmm(x[0, :2], x[:, :2].T, x[:, 2:4], beta=0.5, alpha=2.0),
    "full and scalar_tensor": lambda x: (x + torch.full((3, 5), 2.5), x * torch.scalar_tensor(3.0)),
    "var and std": lambda x: (x.var(dim=1), x.std(), x.var(dim=0, correction=0, keepdim=True)),
    "group norm": lambda x: torch.nn.functional.group_norm(x.reshape(1, 3, 5), 3),
    "elu": lambda x: torch.nn.functional.elu(x, alpha=0.7),
    "nearest upsampling and arange": lambda x: torch.nn.functional.interpolate(
        x.reshape(1, 1, 3, 5), scale_factor=(2, 3), mode="nearest") + torch.arange(15.0) + torch.arange(0, 30, 2),
    "adaptive average pool": lambda x: torch.nn.functional.adaptive_avg_pool2d(x.reshape(1, 1, 3, 5), (2, 2)),
}


@pytest.mark.parametrize("case", list(_MORE))
def test_more_aten_ops_compute_what_pytorch_computes(case):
    x = torch.randn(3, 5, generator=torch.Generator().manual_seed(1))
    model = _Lambda(_MORE[case])
    mod, _, _ = from_exported_program(torch.export.export(model, (x,)))
    roundtrip(mod)
    expected = model(x)
    expected = [t.numpy() for t in (expected if isinstance(expected, tuple) else (expected,))]
    compiled = relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"](x.numpy())
    for got in (relax_mlir.interpret(mod, "main", x.numpy()), compiled):
        got = list(got) if isinstance(got, tuple) else [got]
        assert len(got) == len(expected), case
        for g, e in zip(got, expected):
            assert g.dtype == e.dtype and g.shape == e.shape, (case, g.dtype, e.dtype, g.shape, e.shape)
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


class _Promotions(torch.nn.Module):
    """PyTorch's type promotion where Relax's ops keep one dtype (a bug hunt's cases)."""

    def forward(self, x, i32, i64, f):
        return (i32.sum(), i32.cumsum(0), i64.clamp(min=0.5, max=2.5), torch.cat([f, i64], 0),
                torch.where(f > 0, f, i64), (f > 0).sum(), (i32 > 0).sum(dim=0))


def test_type_promotion_follows_the_dtypes_pytorch_recorded():
    """int32 sums (and cumulative sums) are int64 in PyTorch: they overflowed int32; an int tensor clamped to float
    bounds is float32 (the bounds were truncated); cat and where of float32 and int64, and bool sums, were refused
    by op inference with a bare ValueError."""
    args = (torch.zeros(1), torch.tensor([2**30, 2**30, 2**30], dtype=torch.int32), torch.tensor([-3, 2, 5]),
            torch.tensor([0.5, -1.5, 2.0]))
    want = _Promotions()(*args)
    mod, _, _ = from_exported_program(torch.export.export(_Promotions(), args))
    arrays = [a.numpy() for a in args]
    for got in (relax_mlir.interpret(mod, "main", *arrays),
                relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"](*arrays)):
        for g, w in zip(got, want):
            assert g.dtype == w.numpy().dtype
            np.testing.assert_array_equal(g, w.numpy())


def test_an_op_refusing_its_operands_names_the_node():
    class Bad(torch.nn.Module):
        def forward(self, x):
            return torch.pow(x, x)  # integer power: PyTorch takes it, Relax's power takes floats

    with pytest.raises(TorchImportError, match=r"node pow_1 \(aten.pow.Tensor_Tensor\): relax.power"):
        from_exported_program(torch.export.export(Bad(), (torch.ones(2, 2, dtype=torch.int64),)))


def test_a_tied_weight_is_one_parameter_and_trains_as_in_pytorch():
    """An embedding shared with the output layer: torch.export lists it under both names, the program reads one;
    imported as two parameters, the other was never trained (PyTorch's named_parameters lists one)."""
    from relax_mlir.ir import TensorStructInfo
    from relax_mlir.training import SGD, CrossEntropyLoss, SetupTrainer, Trainer

    torch.manual_seed(0)

    class Tied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.e, self.h = torch.nn.Embedding(10, 6), torch.nn.Linear(6, 10, bias=False)
            self.h.weight = self.e.weight

        def forward(self, i):
            return self.h(torch.tanh(self.e(i)).mean(1))

    model = Tied()
    i, y = torch.randint(0, 10, (4, 3)), torch.randint(0, 10, (4,))
    mod, params, _ = from_exported_program(torch.export.export(copy.deepcopy(model), (i,)))
    assert list(params) == ["e_weight"] and [n for n, _ in model.named_parameters()] == ["e.weight"]
    trainer = Trainer(mod, len(params), SetupTrainer(CrossEntropyLoss("mean"), SGD(0.5),
                      [mod["main"].ret_struct_info, TensorStructInfo((4,), "int64")])).build("cpu")
    trainer.load_params(params)
    trainer.update_params(i.numpy(), y.numpy())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    torch.nn.functional.cross_entropy(model(i), y).backward()
    optimizer.step()
    np.testing.assert_allclose(trainer.export_params()["e_weight"], model.e.weight.detach().numpy(), atol=1e-6)


def test_batch_norm_without_affine_parameters_imports_with_ones_and_zeros():
    """``BatchNorm2d(affine=False)`` was refused; its weight and bias are ones and zeros (as group norm's were)."""
    torch.manual_seed(3)
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.BatchNorm2d(2, affine=False))
    model.train()(torch.randn(4, 1, 5, 5))  # running statistics away from (0, 1)
    model.eval()
    x = torch.randn(2, 1, 5, 5)
    mod, params, states = _import(model, x)
    assert list(params) == ["p0_weight", "p0_bias"]  # no weight or bias of the norm to train
    args = [x.numpy(), *params.values(), *states.values()]
    expected = model(x).detach().numpy()
    for got in (relax_mlir.interpret(mod, "main", *args),
                relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"](*args)):
        np.testing.assert_allclose(np.asarray(got[0]), expected, rtol=1e-5, atol=1e-6)


def test_a_zero_batch_norm_momentum_of_an_eval_export_is_warned_about():
    """An eval-mode export records momentum=None (a cumulative average) as 0.0: trained, the imported model's
    running statistics would stay as they are, silently. A warning says so; the default momentum does not warn."""
    x = torch.randn(2, 2, 4, 4)
    for momentum, warns in ((None, True), (0.1, False)):
        model = torch.nn.BatchNorm2d(2, momentum=momentum).eval()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _import(model, x)
        said = [w for w in caught if "momentum 0.0" in str(w.message)]
        assert bool(said) == warns, [str(w.message) for w in caught]
