"""Importer fixes found by replaying ONNX's backend node tests (``onnx.backend.test.case.node``).

* Elu, Celu, Selu (``frontend/common.py::elu``, shared with the PyTorch importer), HardSigmoid and HardSwish:
  half floats were rounded at every step (bfloat16 ``Elu(-0.002)`` was -0.0039, ``Elu`` of every x in
  (-0.002, 0) was 0; ONNX's ``test_celu_bfloat16`` failed) and ``exp(x) - 1`` lost every digit near 0 (float32
  ``Elu(-1e-8)`` was 0). Oracles: PyTorch (whose ELUs use ``expm1`` and compute half floats in float32), NumPy, and
  ONNX's own expected outputs at ONNX's tolerance.
* BitShift of signed integers (opset 28: an arithmetic right shift) was refused as "unsigned only". Oracles: ONNX's
  node tests and ``onnx.reference.ReferenceEvaluator``.
* Dropout with ``training_mode=True`` runs as the identity unless ``SetupTrainer`` trains it: now a warning.
"""

from __future__ import annotations

import functools
import re
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
ml_dtypes = pytest.importorskip("ml_dtypes")
F = torch.nn.functional

import relax_mlir  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402
from relax_mlir import transform  # noqa: E402
from relax_mlir.frontend.onnx import CONVERTERS, OnnxImportError, from_onnx  # noqa: E402
from relax_mlir.frontend.torch import from_exported_program  # noqa: E402

_ELEM = {"float32": TensorProto.FLOAT, "float64": TensorProto.DOUBLE, "float16": TensorProto.FLOAT16,
         "bfloat16": TensorProto.BFLOAT16, "int8": TensorProto.INT8, "int16": TensorProto.INT16,
         "int32": TensorProto.INT32, "int64": TensorProto.INT64, "uint8": TensorProto.UINT8}
_NP = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32, "float64": np.float64}
_TORCH = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32, "float64": torch.float64}


def _unary_model(op_type: str, dtype: str, n: int, opset: int = 22, **attrs):
    node = helper.make_node(op_type, ["x"], ["y"], name="n", **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", _ELEM[dtype], [n])],
                              [helper.make_tensor_value_info("y", _ELEM[dtype], [n])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _run_both(model, *args):
    """(compiled, interpreted) outputs of the imported model."""
    mod, params, _ = from_onnx(model)
    args = [*args, *params.values()]
    return relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"](*args), relax_mlir.interpret(mod, "main", *args)


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """The distance in units in the last place between two float arrays of one dtype and like signs."""
    kind = {2: np.int16, 4: np.int32, 8: np.int64}[got.dtype.itemsize]
    return np.abs(got.view(kind).astype(np.int64) - want.view(kind).astype(np.int64))


# -- Elu, Celu, Selu near 0 (an expm1) -------------------------------------------------------------------------

# (ONNX's float attributes are float32: alphas exact in float32, and SELU's constants as ONNX's defaults round them)
_SELU = {"alpha": float(np.float32(1.6732632423543772)), "scale": float(np.float32(1.0507009873554805))}
_ELUS = {"Elu": ({}, F.elu), "Elu alpha 0.75": ({"alpha": 0.75}, lambda t: F.elu(t, 0.75)),
         "Celu alpha 0.5": ({"alpha": 0.5}, lambda t: F.celu(t, 0.5)),
         "Selu": ({}, lambda t: torch.ops.aten.elu(t, **_SELU) if t.dtype == torch.float64 else F.selu(t))}
# dense near 0 (where exp(x) - 1 lost digits), around the series' switch at |x| = 1/2, and out to exp's underflow
_NEAR_ZERO = np.concatenate([-np.logspace(-38, 2, 4000), np.linspace(-3, 0, 3001), np.logspace(-38, 2, 400), [0.0]])


@pytest.mark.parametrize("dtype, ulps", [("float32", 2), ("float64", 2)])
@pytest.mark.parametrize("case", list(_ELUS))
def test_elus_match_pytorchs_expm1_to_two_ulps(case, dtype, ulps):
    """``exp(x) - 1`` gave float32 ``Elu(-1e-8) = 0`` and ``Elu(-3e-8) = -6e-8`` (up to 100% off near 0)."""
    attrs, fn = _ELUS[case]
    op_type = case.split()[0]
    x = _NEAR_ZERO.astype(dtype)
    want = fn(torch.tensor(x)).numpy()
    for got in _run_both(_unary_model(op_type, dtype, x.size, **attrs), x):
        assert got.dtype == want.dtype
        worst = _ulps(got, want).max()
        assert worst <= ulps, f"{case} {dtype}: {worst} ulps from PyTorch at x={x[_ulps(got, want).argmax()]}"
    if dtype == "float32" and case == "Elu":
        np.testing.assert_array_equal(_run_both(_unary_model("Elu", dtype, 2), np.float32([-1e-8, -3e-8]))[0],
                                      np.float32([-1e-8, -3e-8]))


# -- half floats: computed in float32 and rounded once -----------------------------------------------------------

def _every_half(dtype: str, bound: float) -> np.ndarray:
    """Every finite value of a half dtype in [-bound, bound] (each of the 2**16 bit patterns, kept if in range)."""
    values = np.arange(2 ** 16, dtype=np.uint16).view(_NP[dtype])
    as_float = values.astype(np.float32)
    return values[np.isfinite(as_float) & (np.abs(as_float) <= bound)]


def _hard_sigmoid_np(alpha, beta):
    return lambda x: np.clip(x * np.float32(alpha) + np.float32(beta), 0, 1)  # ONNX's definition, in float32


def _hard_swish_np(x):
    # ONNX's x * HardSigmoid(x, 1/6, 1/2) in float32. (PyTorch's x * (x + 3) / 6 rounds differently in float32:
    # at float16's 0.2502 the two float32 values sit on either side of a float16 tie.)
    return x * _hard_sigmoid_np(1 / 6, 0.5)(x)


_HALF_CASES = {  # attributes, and the oracle: PyTorch on the half tensor (float32 "opmath" rounded once), or NumPy
    # in float32 (ONNX's definition) on float32 values, rounded once
    "Elu": ({}, ("torch", F.elu)), "Celu alpha 2": ({"alpha": 2.0}, ("torch", lambda t: F.celu(t, 2.0))),
    "Selu": ({}, ("torch", F.selu)), "HardSigmoid": ({}, ("numpy", _hard_sigmoid_np(0.2, 0.5))),
    "HardSigmoid alpha 0.3 beta 0.4": ({"alpha": 0.3, "beta": 0.4}, ("numpy", _hard_sigmoid_np(0.3, 0.4))),
    "HardSwish": ({}, ("numpy", _hard_swish_np)),
}


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("case", list(_HALF_CASES))
def test_half_float_activations_are_computed_in_float32_and_rounded_once(case, dtype):
    """Every half value in [-8, 8] (the kinks of HardSigmoid at -2.5 and 2.5, HardSwish's at -3 and 3, and every
    tiny one): exactly PyTorch's result on the half tensor (float32 math rounded once), or NumPy's float32
    ``max(0, min(1, alpha * x + beta))`` (times ``x``: HardSwish) rounded once. Rounded at every step, bfloat16
    ``Elu`` of every x in (-0.002, 0) was 0 and ``HardSigmoid(-2.484)`` was 0.00195 (0.00313)."""
    attrs, (oracle, fn) = _HALF_CASES[case]
    x = _every_half(dtype, 8.0)
    if oracle == "torch":
        want = fn(torch.tensor(x.astype(np.float32)).to(_TORCH[dtype])).float().numpy()
    else:
        want = fn(x.astype(np.float32)).astype(_NP[dtype]).astype(np.float32)
    for got in _run_both(_unary_model(case.split()[0], dtype, x.size, **attrs), x):
        assert got.dtype == x.dtype
        wrong = np.flatnonzero(got.astype(np.float32) != want)  # (+0 and -0 compare equal)
        assert wrong.size == 0, (f"{case} {dtype}: {wrong.size} of {x.size} differ, e.g. x={x[wrong[:3]]}: "
                                 f"{got[wrong[:3]]} instead of {want[wrong[:3]]}")


def test_bfloat16_elu_of_small_negatives_is_not_zero():
    """The report's reproducer: bfloat16 ``Elu`` of -1e-8, -3e-8, -0.002, -0.003 gave 0, 0, -0.0039, -0.0039."""
    x = np.array([-1e-8, -3e-8, -0.002, -0.003], ml_dtypes.bfloat16)
    for got in _run_both(_unary_model("Elu", "bfloat16", 4), x):
        np.testing.assert_array_equal(got, x)  # expm1(x) rounds to x in bfloat16 here


# -- ONNX's own node tests -------------------------------------------------------------------------------------

_NODE_TESTS = re.compile(r"test_(elu|celu|selu|hardsigmoid|hardswish|bitshift)")


@functools.lru_cache(maxsize=None)
def _node_tests() -> dict:
    """ONNX's node test cases of these ops whose every op has a converter, but for the expanded Elu/Celu/Selu/
    HardSigmoid ones, which use CastLike: ``test_onnx_node_ops.py`` runs those."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():  # (collecting runs every case's NumPy code: some divide by zero on purpose)
        warnings.simplefilter("ignore")
        cases = collect_testcases(None)
    return {c.name: c for c in cases if _NODE_TESTS.match(c.name)
            and all(n.op_type in CONVERTERS for n in c.model.graph.node)
            and not any(n.op_type == "CastLike" for n in c.model.graph.node)}


_NODE_TEST_NAMES = [  # what _node_tests() finds with onnx 1.23 (asserted below, so that none is left out unseen)
    "test_elu", "test_elu_default", "test_elu_example", "test_celu", "test_celu_float16", "test_celu_bfloat16",
    "test_selu", "test_selu_default", "test_selu_example", "test_hardsigmoid", "test_hardsigmoid_default",
    "test_hardsigmoid_example", "test_hardswish", "test_hardswish_expanded",
    *(f"test_bitshift_{d}_{t}" for d in ("left", "right")
      for t in ("uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64")),
    *(f"test_bitshift_{d}_{t}" for d in ("left", "right") for t in ("int8_shift_ge_width", "int32_shift_ge_width",
                                                                    "int8_negative_shift", "int32_negative_shift")),
    "test_bitshift_right_int8_negative_input", "test_bitshift_right_int32_negative_input",
    "test_bitshift_left_int8_overflow", "test_bitshift_left_int32_overflow"]


def test_the_node_tests_run_here_are_all_there_are():
    if onnx.__version__.split(".")[:2] != ["1", "23"]:
        pytest.skip(f"the list is onnx 1.23's; this is onnx {onnx.__version__}")
    assert sorted(_node_tests()) == sorted(_NODE_TEST_NAMES)


@pytest.mark.parametrize("name", _NODE_TEST_NAMES)
def test_onnx_node_tests_pass_at_onnxs_tolerance(name):
    """Compiled and interpreted, ONNX's expected outputs at the case's tolerance (rtol 1e-3, atol 1e-7), dtypes
    equal. ``test_celu_bfloat16`` failed (-0.4453125 for -0.443359375) and the signed BitShifts were refused."""
    case = _node_tests().get(name)
    if case is None:
        pytest.skip(f"onnx {onnx.__version__} has no node test {name}")
    to_array = lambda a: numpy_helper.to_array(a) if isinstance(a, TensorProto) else np.asarray(a)  # noqa: E731
    for inputs, outputs in case.data_sets:
        inputs, (want,) = [to_array(a) for a in inputs], [to_array(a) for a in outputs]
        for got in _run_both(case.model, *inputs):
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=case.rtol,
                                       atol=case.atol)


# -- the PyTorch importer's ELUs: values and gradients near 0 --------------------------------------------------

class _Activation(torch.nn.Module):
    def __init__(self, fn, n: int, dtype):
        super().__init__()
        self.fn, self.b = fn, torch.nn.Parameter(torch.zeros(n, dtype=dtype))
        self.w = torch.linspace(-1.3, 1.1, n, dtype=dtype)  # each element's gradient differs

    def forward(self, x):
        return (self.fn(x + self.b) * self.w).sum()


_GRAD_X = np.array([-100.0, -20.0, -3.0, -1.0, -0.51, -0.5, -0.49, -0.1, -1e-3, -1e-5, -1e-8, -1e-30, 0.0, 1e-8,
                    0.3, 5.0, 100.0])


@pytest.mark.parametrize("dtype, rtol", [("float32", 3e-7), ("float64", 1e-14)])
@pytest.mark.parametrize("case", ["elu", "elu alpha 0.7", "selu", "celu alpha 0.5"])
def test_pytorch_imported_elus_values_and_gradients_match_autograd_near_zero(case, dtype, rtol):
    """The PyTorch importer shares ``common.elu``: its forward near 0 (was 0 at -1e-8, and -1e-30, in float32) and
    its gradient through ``Gradient`` (the series' derivative is exp's series), compiled and interpreted."""
    fn = {"elu": F.elu, "elu alpha 0.7": lambda t: F.elu(t, 0.7), "selu": F.selu,
          "celu alpha 0.5": lambda t: F.celu(t, 0.5)}[case]
    x = torch.tensor(_GRAD_X, dtype=_TORCH[dtype])
    model = _Activation(fn, x.numel(), x.dtype)
    mod, params, _ = from_exported_program(torch.export.export(model, (x,)))
    args = [x.numpy(), *params.values()]
    value = model(x)
    value.backward()
    adjoint = transform.DecomposeOpsForTraining()(transform.Gradient("main", require_grads=mod["main"].params[1:])(mod))
    compiled = relax_mlir.VirtualMachine(relax_mlir.compile(adjoint))["main_adjoint"](*args)
    # The value sums signed terms up to 110 (w from -1.3 to 1.1): a floor of 4 ulps of their sum of magnitudes,
    # whose rounding the host's (and PyTorch's) summation order moves, over rtol alone.
    floor = 4 * np.finfo(dtype).eps * float(np.abs(fn(x).detach().numpy() * model.w.numpy()).sum())
    for got, (grad,) in (relax_mlir.interpret(adjoint, "main_adjoint", *args), compiled):
        np.testing.assert_allclose(got, value.item(), rtol=rtol, atol=floor)
        np.testing.assert_allclose(grad, model.b.grad.numpy(), rtol=rtol, atol=1e-38)  # (-100's is subnormal)
    elementwise = fn(x).detach().numpy()
    single, _, _ = from_exported_program(torch.export.export(_Elementwise(fn), (x,)))
    for got in (relax_mlir.interpret(single, "main", x.numpy()),
                relax_mlir.VirtualMachine(relax_mlir.compile(single))["main"](x.numpy())):
        assert _ulps(got, elementwise).max() <= 2


class _Elementwise(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


# -- BitShift of signed integers (opset 28) ----------------------------------------------------------------------

@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8"])
def test_bit_shift_matches_the_reference_evaluator(dtype, direction):
    """Random values (the extremes included) by every count in [-3, width + 3): arithmetic right shifts of
    negatives, left shifts into and past the sign bit, counts outside [0, width) (the sign fill, else 0)."""
    info, n = np.iinfo(dtype), 600
    rng = np.random.default_rng(0)
    x = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    x[:6] = [info.min, info.max, 0, 1, info.max - 1, info.min + 1] if info.min else [0, info.max, 1, 2, 3, 255]
    s = rng.integers(max(info.min, -3), info.bits + 3, n).astype(dtype)
    node = helper.make_node("BitShift", ["x", "s"], ["y"], direction=direction)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(v, _ELEM[dtype], [n]) for v in "xs"],
                              [helper.make_tensor_value_info("y", _ELEM[dtype], [n])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 28)])
    (want,) = ReferenceEvaluator(model).run(None, {"x": x, "s": s})
    for got in _run_both(model, x, s):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_bit_shift_of_two_dtypes_is_refused_naming_the_node():
    node = helper.make_node("BitShift", ["x", "s"], ["y"], name="shift", direction="RIGHT")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.INT32, [2]),
                                            helper.make_tensor_value_info("s", TensorProto.INT64, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.INT32, [2])])
    with pytest.raises(OnnxImportError, match=r"node shift \(BitShift\): shifts of int32 by int64: ONNX's BitShift "
                                              r"takes two tensors of one integer dtype \(unsigned, or signed since "
                                              r"opset 28\)"):
        from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 28)]))


# -- Dropout in training mode ------------------------------------------------------------------------------------

def _dropout_model(training: bool, ratio: float = 0.25):
    inits = [numpy_helper.from_array(np.array(ratio, np.float32), "r"),
             numpy_helper.from_array(np.array(training), "t")]
    node = helper.make_node("Dropout", ["x", "r", "t"], ["y"], name="drop")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])


def test_dropout_in_training_mode_warns_that_it_runs_as_the_identity():
    """It imports as Relax's dropout, whose mask only SetupTrainer's training step draws: the module as imported
    returns its input, which no ONNX runtime gives for training_mode=True (a masked, 1/(1-ratio)-scaled output)."""
    with pytest.warns(UserWarning, match=r"node drop \(Dropout\): training_mode=True with ratio 0.25 imports as "
                                         r"Relax's dropout, which drops nothing when the module is run as imported"):
        mod, params, _ = from_onnx(_dropout_model(True))
    x = np.ones((4, 8), np.float32)
    np.testing.assert_array_equal(relax_mlir.interpret(mod, "main", x, *params.values()), x)  # what it warns of


@pytest.mark.parametrize("training, ratio", [(False, 0.25), (True, 0.0)])
def test_dropout_that_drops_nothing_by_onnxs_definition_does_not_warn(training, ratio):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from_onnx(_dropout_model(training, ratio))
