"""bfloat16 is a float everywhere a float is tested for. ml_dtypes' bfloat16 has NumPy kind "V" (void), not "f",
and is no ``numpy.floating``, so checks written ``dtype.kind == "f"`` skipped it: the interpreter's einsum and
take gradient truncated bfloat16 to integers, a NaN training step of a bfloat16 model was adopted silently, the
argument policy's float rules were not applied to bfloat16 parameters, ``Trainer.load`` refused the checkpoint
``Trainer.save`` had just written and ``Trainer`` refused the optimizer state of a bfloat16 model. One helper,
``relax_mlir.ir.dtype.is_floating``, now answers "is this a float array" for all of them.

Oracles: float64 (or float32) arithmetic on the bfloat16 values, rounded once to bfloat16 by ml_dtypes; hand-derived
gradients; ``numpy.isfinite`` over every bfloat16 bit pattern; the float16 behaviour the documents describe."""

from __future__ import annotations

import re
import zipfile

import ml_dtypes
import numpy as np
import pytest

import relax_mlir as rm
from relax_mlir.backend.arguments import ArgumentError, conform
from relax_mlir.backend.callpath import _native
from relax_mlir.ir import TensorStructInfo
from relax_mlir.ir.dtype import is_floating
from relax_mlir.models import mlp
from relax_mlir.script import from_source
from relax_mlir.training import NonFiniteError, SetupTrainer, Trainer
from relax_mlir.training import nan_policy
from relax_mlir.training.checkpoint_io import CheckpointError, non_finite_problems, read_checkpoint
from relax_mlir.training.loss import MSELoss
from relax_mlir.training.optimizer import MomentumSGD
from relax_mlir.transform import Gradient

BF16 = np.dtype(ml_dtypes.bfloat16)

SOURCE = """
@I.ir_module
class Module:
    @R.function
    def mm(a: R.Tensor((2, 3), "bfloat16"), b: R.Tensor((3, 4), "bfloat16")) -> R.Tensor((2, 4), "bfloat16"):
        with R.dataflow():
            y = R.einsum((a, b), "ij,jk->ik")
            R.output(y)
        return y

    @R.function
    def transpose(a: R.Tensor((2, 3), "bfloat16")) -> R.Tensor((3, 2), "bfloat16"):
        with R.dataflow():
            y = R.einsum((a,), "ij->ji")
            R.output(y)
        return y

    @R.function
    def emb(w: R.Tensor((4, 2), "bfloat16"), i: R.Tensor((5,), "int64")) -> R.Tensor((), "bfloat16"):
        with R.dataflow():
            e = R.take(w, i, axis=0)
            s = R.sum(R.multiply(e, R.const(0.3, "bfloat16")))
            R.output(s)
        return s

    @R.function
    def double(a: R.Tensor((3,), "bfloat16")) -> R.Tensor((3,), "bfloat16"):
        y = R.add(a, a)
        return y

    @R.function
    def double32(a: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        y = R.add(a, a)
        return y
"""


@pytest.fixture(scope="module")
def mod():
    return from_source(SOURCE)


@pytest.fixture(scope="module")
def vm(mod):
    return rm.VirtualMachine(rm.compile(mod))


def test_the_helper_counts_bfloat16_and_only_floats():
    assert BF16.kind == "V" and not np.issubdtype(BF16, np.floating)  # why a helper is needed
    for dtype in ("float16", "float32", "float64", BF16, ml_dtypes.bfloat16, np.longdouble):
        assert is_floating(dtype), dtype
    for dtype in ("int8", "uint16", "int64", "bool", "complex64", "V2", "U3", object):
        assert not is_floating(dtype), dtype


# -- (a) the interpreter's einsum ------------------------------------------------------------------------------
def test_interpreter_einsum_of_bfloat16_is_not_truncated_to_integers(mod, vm):
    """It was ``[[0, 0], ...]`` for 0.5s (operands cast to int64); the oracle is the float64 sum of the bfloat16
    products (exact here: multiples of 1/64 under 64), rounded once to bfloat16."""
    rng = np.random.default_rng(0)
    a = (rng.integers(-32, 32, (2, 3)) / 8).astype(BF16)
    b = (rng.integers(-32, 32, (3, 4)) / 8).astype(BF16)
    want = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32).astype(BF16)
    got = rm.interpret(mod, "mm", a, b)
    assert got.dtype == BF16
    np.testing.assert_array_equal(np.asarray(got).astype(np.float32), want.astype(np.float32))
    np.testing.assert_array_equal(np.asarray(vm["mm"](a, b)).astype(np.float32), want.astype(np.float32))
    a = rng.normal(size=(2, 3)).astype(BF16)  # fractions: a transposition keeps every value as it is
    np.testing.assert_array_equal(np.asarray(rm.interpret(mod, "transpose", a)).view(np.uint16), a.T.view(np.uint16))


# -- (b) the interpreter's gradient of take --------------------------------------------------------------------
def test_interpreter_gradient_of_take_in_bfloat16_accumulates_floats(mod, vm):
    """The embedding gradient of ``sum(take(w, i) * c)`` is ``c`` times how often each row is taken (hand-derived);
    it was all zeros in the interpreter (accumulated in int64)."""
    grad = Gradient("emb", require_grads=["w"])(mod)
    w = np.ones((4, 2), BF16)
    idx = np.array([0, 2, 2, 3, 2])
    c = float(np.asarray(0.3, BF16))  # 0.30078125: the constant as bfloat16
    want = np.array([[1, 1], [0, 0], [3, 3], [1, 1]]) * c  # exact in bfloat16 (77/256 times 1 or 3)
    got = rm.interpret(grad, "emb_adjoint", w, idx)[1][0]
    assert np.asarray(got).dtype == BF16
    np.testing.assert_array_equal(np.asarray(got).astype(np.float64), want)
    compiled = rm.VirtualMachine(rm.compile(grad))["emb_adjoint"](w, idx)[1][0]
    np.testing.assert_array_equal(np.asarray(compiled).astype(np.float64), want)


# -- (c) NaN and infinity in bfloat16 ----------------------------------------------------------------------------
def _every_bfloat16() -> np.ndarray:
    return np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(BF16)


@pytest.mark.skipif(_native is None, reason="the native module is not built")
def test_the_native_scan_reads_bfloat16_exponents():
    """Each of the 65536 bfloat16 bit patterns against numpy.isfinite, then a NaN or an infinity after 4321 finite
    values: the exponent is a float32's (0x7f80), so 2**121 (0x7c00, float16's inf pattern) is finite."""
    values = _every_bfloat16()
    with np.errstate(invalid="ignore"):  # (ml_dtypes widens a signaling NaN to float32, which says "invalid")
        want = np.isfinite(values)
    got = np.array([_native.all_finite([values[i:i + 1]], 1, ml_dtypes.bfloat16) for i in range(values.size)])
    np.testing.assert_array_equal(got, want)
    assert _native.all_finite([np.array([2.0**121, -3e38, 1e-40], BF16)], 1, ml_dtypes.bfloat16) is True
    tail = np.ones(5000, BF16)
    for bad in (np.nan, np.inf, -np.inf):
        tail[4321] = bad
        assert _native.all_finite([np.float32([1.0]), tail], 1, ml_dtypes.bfloat16) is False
        tail[4321] = 1.0
    assert _native.all_finite([tail], 1, ml_dtypes.bfloat16) is True
    assert _native.all_finite([tail]) is None  # (without the type: not read, the caller checks in Python)
    assert _native.all_finite([tail[::2]], 1, ml_dtypes.bfloat16) is None  # not contiguous: the Python check


@pytest.mark.parametrize("native", [True, False], ids=["native", "python"])
def test_finite_check_sees_bfloat16_nan_and_inf(native, monkeypatch):
    if not native:
        monkeypatch.setattr(nan_policy, "_native", None)
    elif _native is None:
        pytest.skip("the native module is not built")
    check = nan_policy.FiniteCheck()
    finite = [np.array(0.5, np.float32), np.linspace(-3e38, 3e38, 33).astype(BF16), np.array(2.0**121, BF16)]
    assert check.all_finite(finite)
    for bad in (np.nan, np.inf, -np.inf):
        a = np.ones((3, 5), BF16)
        a[2, 4] = bad
        assert not check.all_finite(finite + [a]), bad
        assert not check.all_finite([np.array(bad, BF16)]), bad  # a 0-d one (a loss)


def _bf16_trainer(target: str) -> Trainer:
    setup = SetupTrainer(MSELoss(reduction="sum"), MomentumSGD(0.01, 0.9),
                         [TensorStructInfo((8, 3), "bfloat16"), TensorStructInfo((8, 3), "bfloat16")])
    trainer = Trainer(mlp(8, (4, 8, 3), dtype="bfloat16"), 4, setup).build(target=target)
    trainer.xavier_uniform_init_params(seed=3)
    return trainer


def _batch(seed: int = 0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(8, 4)).astype(BF16), rng.normal(size=(8, 3)).astype(BF16)


def _bits(arrays) -> list[bytes]:
    return [np.asarray(a).tobytes() for a in arrays]


@pytest.fixture(scope="module", params=["cpu", "numpy"])
def trainer(request):
    return _bf16_trainer(request.param)


# ml_dtypes compares a bfloat16 NaN through float32 with the "invalid" flag raised (NumPy's float16 does not): the
# interpreter's relu (``less``) then warns, and pytest makes RuntimeWarnings errors
@pytest.mark.filterwarnings("ignore:invalid value encountered in less:RuntimeWarning")
def test_a_nan_step_of_a_bfloat16_model_is_refused(trainer):
    """The momentum of a bfloat16 model is bfloat16 (Trainer refused that module before); a NaN in the batch makes
    the step non-finite: NonFiniteError names the input and the example, and nothing changes, bit for bit (it was
    adopted, every parameter NaN, where float16's is refused)."""
    x, y = _batch()
    trainer.update_params(x, y)
    assert any(a.dtype == BF16 for a in trainer.optim_state)
    before, step = _bits(trainer.params + trainer.optim_state), trainer.step
    x[3, 1] = np.nan
    with pytest.raises(NonFiniteError, match=r"input 'x' holds nan at \[3, 1\]: batch index 3") as info:
        trainer.update_params(x, y)
    assert info.value.batch_index == 3 and info.value.step == step == trainer.step
    assert _bits(trainer.params + trainer.optim_state) == before


def test_save_and_the_setters_refuse_non_finite_bfloat16(trainer, tmp_path):
    problems = non_finite_problems({"param/w0": np.array([[1.0, np.nan], [np.inf, -np.inf]], BF16)})
    assert problems == ["param/w0 holds 1 NaN and 2 Inf (first at [0, 1]), expected finite values"]
    params = [p.copy() for p in trainer.params]
    params[0][0, 0] = np.inf
    with pytest.raises(ValueError, match=r"w0 holds 1 Inf \(first at \[0, 0\]\)"):
        trainer.load_params(params)
    saved, trainer.params = trainer.params, params
    try:
        with pytest.raises(CheckpointError, match=r"not written: param/w0 holds 1 Inf"):
            trainer.save(tmp_path / "bad.npz")
    finally:
        trainer.params = saved
    assert not (tmp_path / "bad.npz").exists()


# -- (d) the argument policy -----------------------------------------------------------------------------------
@pytest.mark.parametrize("value, message", [
    (np.array([1.0, 1e39, 3.0]), "expected bfloat16; the float64 value 1e+39 at flat position 1 is beyond its range "
                                 "(it would become inf)"),
    (np.array([1.0, 3.4e38], np.float32), "expected bfloat16; the float32 value 3.3999999521443642e+38 at flat "
                                          "position 1 is beyond its range (it would become inf)"),
    (np.array([1, 257, 3], np.int32), "expected bfloat16; the int32 value 257 at flat position 1 has no exact "
                                      "bfloat16 (it would become 256.0): cast explicitly to round it"),
    (np.array([1, 2, 65535], np.uint16), "expected bfloat16; the uint16 value 65535 at flat position 2 has no "
                                         "exact bfloat16 (it would become 65536.0)"),
], ids=["float64 beyond", "float32 beyond", "int32 inexact", "uint16 inexact"])
def test_bfloat16_parameters_refuse_what_float16_ones_refuse(vm, value, message):
    """As a float16 parameter refuses float64 ``1e5`` and int32 ``2049`` (docs/arguments.md); both were silently
    made inf and 256. float32's largest, 3.4e38, is beyond bfloat16's (3.3895e38): it rounds to inf."""
    with pytest.raises(ArgumentError, match=r"double: parameter 'a' \(#0\): " + re.escape(message)):
        vm["double"](value)


@pytest.mark.parametrize("value", [
    np.array([1.0, 1.6e38, -1e-3]), np.array([1.0, 1.00390625 + 2**-30, 7.0], np.float32),
    np.array([255, 0, 7], np.uint8), np.array([-256, 256, 3], np.int32), np.array([2**20, -(2**30), 0], np.int64),
    [0.1, 0.2, 0.3],
], ids=["float64", "float32 rounded", "uint8", "int32 exact", "int64 exact", "list"])
def test_bfloat16_parameters_convert_what_rounds_or_is_exact(vm, value):
    """Floats within range round to nearest (once: ml_dtypes' conversion); integers with an exact bfloat16 (any
    within 256, or a power of two times one) convert. The result is the program's on the converted array."""
    exact = np.asarray(value).astype(BF16)
    np.testing.assert_array_equal(np.asarray(vm["double"](value)).view(np.uint16), (exact + exact).view(np.uint16))
    got, problem = conform(np.asarray(value), BF16)
    assert problem == "" and got.dtype == BF16
    np.testing.assert_array_equal(got.view(np.uint16), exact.view(np.uint16))


def test_a_bfloat16_array_converts_to_a_wider_float_and_to_float16_within_range(vm):
    """bfloat16 to float32 (or float64) is exact, as float16 to float32 is (it was refused); to float16 it rounds
    (as float32 to float16 does), and a value beyond float16's range is refused."""
    a = np.array([1.5, -1.5e38, 2.0**-130], BF16)
    np.testing.assert_array_equal(np.asarray(vm["double32"](a)), 2 * a.astype(np.float32))
    for dtype in (np.float32, np.float64):
        got, problem = conform(a, np.dtype(dtype))
        assert problem == "" and got.dtype == dtype
        np.testing.assert_array_equal(got, a.astype(dtype))
    small = np.array([1.5, -0.1, 60000.0], BF16)
    got, problem = conform(small, np.dtype(np.float16))
    assert problem == ""
    np.testing.assert_array_equal(got, small.astype(np.float32).astype(np.float16))
    got, problem = conform(np.array([1.0, 1e5], BF16), np.dtype(np.float16))
    assert got is None and problem == ("expected float16; the bfloat16 value 99840.0 at flat position 1 is beyond its "
                                       "range (it would become inf)")


def test_a_bfloat16_array_for_an_integer_parameter_says_why():
    got, problem = conform(np.array([1.0, 2.0], BF16), np.dtype(np.int64))
    assert got is None and problem == ("expected dtype int64, got bfloat16 (an integer parameter takes no floats: "
                                       "cast with .astype if the values are whole)")
    assert conform(np.array([1.0], BF16), np.dtype(bool))[1] == "expected dtype bool, got bfloat16"


# -- (e) checkpoints ---------------------------------------------------------------------------------------------
def test_a_bfloat16_checkpoint_round_trips_exactly(trainer, tmp_path):
    """save then load gives the same bits (parameters, the bfloat16 momentum, a bfloat16 extra); the file stores
    them as uint16 and names them in its ``bfloat16`` entry (np.savez would write raw |V2 and lose the dtype)."""
    trainer.update_params(*_batch(1))
    path = tmp_path / "bf16.npz"
    extra = np.array([0.1, -2.5], BF16)
    trainer.save(path, extra={"scale": extra, "note": "bf16"})
    with np.load(path, allow_pickle=False) as f:
        assert f["param/w0"].dtype == np.uint16
        assert sorted(f["bfloat16"].tolist()) == sorted(
            [k for k in f.files if k.startswith(("param/", "optim/")) and f[k].dtype == np.uint16] + ["extra/scale"])
    other = _bf16_trainer("numpy")
    got = other.load(path)
    assert _bits(other.params + other.optim_state) == _bits(trainer.params + trainer.optim_state)
    assert [a.dtype for a in other.params] == [BF16] * 4 and other.step == trainer.step
    assert got["scale"].dtype == BF16 and got["scale"].tobytes() == extra.tobytes() and str(got["note"]) == "bf16"


def test_a_float32_checkpoint_is_written_as_before(tmp_path):
    setup = SetupTrainer(MSELoss(), MomentumSGD(0.01, 0.9), [TensorStructInfo((8, 3), "float32")] * 2)
    trainer = Trainer(mlp(8, (4, 8, 3)), 4, setup)
    trainer.xavier_uniform_init_params(seed=0)
    trainer.save(tmp_path / "f32.npz")
    with zipfile.ZipFile(tmp_path / "f32.npz") as z:
        assert "bfloat16.npy" not in z.namelist()
    assert "bfloat16" not in read_checkpoint(tmp_path / "f32.npz", "x").arrays


def test_a_bfloat16_checkpoint_written_before_the_fix_loads(trainer, tmp_path):
    """Trainer.save used to write bfloat16 as raw |V2 (np.savez): where the model expects bfloat16, those bytes are
    read as bfloat16, so such a file loads, exactly."""
    arrays = {"format": np.array(1, np.int64), "step": np.array(trainer.step, np.int64),
              "seed": np.array(trainer.seed, np.int64), "optimizer": np.array("MomentumSGD")}
    arrays.update({f"param/{v.name_hint}": a for v, a in zip(trainer.param_vars, trainer.params)})
    arrays.update({f"optim/{i}": a for i, a in enumerate(trainer.optim_state)})
    np.savez(tmp_path / "old.npz", **arrays)
    with np.load(tmp_path / "old.npz", allow_pickle=False) as f:
        assert f["param/w0"].dtype == np.dtype("V2")  # (what np.savez makes of bfloat16)
    other = _bf16_trainer("numpy")
    other.load(tmp_path / "old.npz")
    assert _bits(other.params + other.optim_state) == _bits(trainer.params + trainer.optim_state)


@pytest.mark.parametrize("entry, message", [
    (np.array(["param/w0", "param/nothing"]), "the 'bfloat16' entry names 'param/nothing' (no such entry); "
                                              "expected an entry of uint16 (the bits of bfloat16 values)"),
    (np.array(["step"]), "the 'bfloat16' entry names 'step' (int64); expected an entry of uint16"),
    (np.array([1, 2]), "the 'bfloat16' entry is int64 (2,); expected a list of the names of the entries stored "
                       "as bfloat16 bits (uint16)"),
], ids=["missing", "not bits", "not names"])
def test_a_wrong_bfloat16_entry_is_refused(tmp_path, entry, message):
    path = tmp_path / "bad.npz"
    np.savez(path, format=np.array(1), step=np.array(0), seed=np.array(0),
             **{"param/w0": np.zeros(2, np.uint16), "bfloat16": entry})
    with pytest.raises(CheckpointError, match="load: .*bad.npz: " + re.escape(message)):
        read_checkpoint(path, f"load: {path}")


# -- the same test elsewhere -------------------------------------------------------------------------------------
@pytest.mark.parametrize("value, dtype, shown", [
    (np.array([1.0, 1.5], BF16), "int32", "1.5"), (np.array([np.nan], BF16), "int32", "nan"),
    (np.array([3e9], BF16), "int32", "3003121664.0"), (np.array([1e30], BF16), "float16", "1.0002555517425873e+30"),
    (np.array([2.0], BF16), "bool", "2.0"),
], ids=["fraction", "nan", "beyond int32", "beyond float16", "not 0 or 1"])
def test_a_bfloat16_constant_is_refused_where_a_float32_one_is(value, dtype, shown):
    """``R.const(bfloat16 array, dtype)`` checked nothing (the source's kind is "V"): 1.5 became 1, NaN and 3e9
    became int32's minimum, 1e30 became inf in float16. The float32 source of each is refused likewise."""
    with pytest.raises(ValueError, match=re.escape(f"R.const: {shown} is not representable in {dtype}")):
        rm.const(value, dtype)
    with pytest.raises(ValueError, match="is not representable"):
        rm.const(value.astype(np.float32), dtype)
    np.testing.assert_array_equal(rm.const(np.array([2.0, -7.0], BF16), "int32").data, [2, -7])


def test_bfloat16_constants_with_other_nan_payloads_are_structurally_equal():
    """All NaNs of a dtype are one value, as for float32 (the printer writes both as nan)."""
    from relax_mlir.ir import structural_equal

    quiet = [np.array([0x3F80, nan], np.uint16).view(BF16) for nan in (0x7FC0, 0x7FC1)]
    assert structural_equal(rm.const(quiet[0], "bfloat16"), rm.const(quiet[1], "bfloat16"))
    assert not structural_equal(rm.const(quiet[0], "bfloat16"), rm.const(np.array([1.0, 2.0], BF16), "bfloat16"))


def test_bfloat16_initializers_of_an_onnx_model_are_parameters():
    """Float initializers are parameters (``keep_params_in_input``); a bfloat16 one was made a constant."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    from relax_mlir.frontend.onnx import from_onnx

    w = helper.make_tensor("w", TensorProto.BFLOAT16, [3], [0.5, 1.5, -2.0])
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [3])],
                              [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [3])], [w])
    mod, params, _ = from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    assert list(params) == ["w"] and params["w"].dtype == BF16
    np.testing.assert_array_equal(params["w"].astype(np.float32), [0.5, 1.5, -2.0])
    assert onnx is not None and [p.name_hint for p in mod["main"].params] == ["x", "w"]


def test_a_torch_bfloat16_result_promotes_an_integer_operand():
    """PyTorch's ``cat`` of bfloat16 and int64 is bfloat16, as float32 and int64 is float32: the int operand is
    cast (it was not, and relax.concat refused the mix)."""
    torch = pytest.importorskip("torch")
    from relax_mlir.frontend.torch import from_exported_program

    class Cat(torch.nn.Module):
        def forward(self, x, i):
            return torch.cat([x, i], 0) * 2

    x, i = torch.full((2, 3), 0.5, dtype=torch.bfloat16), torch.arange(3).reshape(1, 3)
    mod, _, _ = from_exported_program(torch.export.export(Cat(), (x, i)))
    got = rm.interpret(mod, "main", x.float().numpy().astype(BF16), i.numpy())
    np.testing.assert_array_equal(np.asarray(got).astype(np.float32), Cat()(x, i).float().numpy())
