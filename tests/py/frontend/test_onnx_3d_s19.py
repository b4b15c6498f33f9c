"""3-D ONNX convolutions and pools, imported on Relax's 3-D ops (``nn.conv3d``, ``nn.conv3d_transpose``,
``nn.max_pool3d``, ``nn.avg_pool3d``): ``Conv``, ``ConvTranspose`` (``output_padding``, ``output_shape``,
``auto_pad``), ``MaxPool``, ``AveragePool``, ``LpPool``, the global pools and ``Col2Im`` of 3-D images.

Oracles: ONNX's own node tests (``test_onnx_s19.py`` runs the 3-D pool and ConvTranspose cases with the other cases
of those ops; every ``Col2Im`` case is run here), compiled and interpreted at the case's tolerance; PyTorch's
``F.conv3d``, ``F.conv_transpose3d``, ``F.max_pool3d``, ``F.avg_pool3d``, ``F.lp_pool3d`` for random shapes and
attributes, and with ``output_shape`` or ``auto_pad`` (which PyTorch lacks) as ONNX's specification crops or
extends PyTorch's full output; ONNX's ``ReferenceEvaluator`` for a max pool's ``auto_pad``; NumPy for Col2Im of
random 3-D blocks and the global pools.
"""

from __future__ import annotations

import functools
import itertools
import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402
from relax_mlir.frontend.onnx import OnnxImportError, from_onnx  # noqa: E402

from .test_onnx_node_ops import _run_both  # noqa: E402


def _model(op_type: str, inputs: dict, constants: dict = None, outputs=("y",), opset: int = 19, **attrs):
    """A one-node model: ``inputs`` (name: float32 array) are graph inputs, ``constants`` initializers."""
    constants = constants or {}
    node = helper.make_node(op_type, [*inputs, *constants], list(outputs), name="n", **attrs)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(v.shape)) for k, v in inputs.items()],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
        initializer=[numpy_helper.from_array(v, k) for k, v in constants.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _check(model, args, want, rtol=1e-5, atol=1e-5):
    for got in _run_both(model, *args):
        assert got[0].shape == want.shape
        np.testing.assert_allclose(np.asarray(got[0], np.float64), want, rtol=rtol, atol=atol)


def _rand(rng, *shape):
    return rng.normal(0, 1, shape).astype(np.float32)


# -- ONNX's node tests: Col2Im -------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _col2im_cases() -> dict:
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():  # (collecting runs every case's NumPy code: some divide by zero on purpose)
        warnings.simplefilter("ignore")
        cases = collect_testcases(None)
    return {c.name: c for c in cases if c.model is not None and [n.op_type for n in c.model.graph.node] == ["Col2Im"]}


def _col2im_names() -> list[str]:
    try:
        return sorted(_col2im_cases())
    except Exception:  # pragma: no cover (an onnx without node tests: the count test says so)
        return []


def test_every_col2im_node_test_is_run():
    """onnx 1.23: four 2-D cases and ``test_col2im_5d`` (a 3-D image), none left out unseen."""
    if onnx.__version__.split(".")[:2] != ["1", "23"]:
        pytest.skip(f"the count is onnx 1.23's; this is onnx {onnx.__version__}")
    assert _col2im_names() == ["test_col2im", "test_col2im_5d", "test_col2im_dilations", "test_col2im_pads",
                               "test_col2im_strides"]


@pytest.mark.parametrize("name", _col2im_names())
def test_col2im_node_tests(name):
    """Compiled and interpreted, ONNX's expected image at the case's tolerance; ``image_shape`` and ``block_shape``
    (graph inputs in the cases) made initializers, as the importer must know them."""
    case = _col2im_cases()[name]
    model = onnx.ModelProto.FromString(case.model.SerializeToString())
    inputs = [np.asarray(numpy_helper.to_array(a) if isinstance(a, TensorProto) else a) for a in case.data_sets[0][0]]
    want = np.asarray(case.data_sets[0][1][0])
    for value, array in list(zip(list(model.graph.input), inputs))[1:]:
        model.graph.initializer.append(numpy_helper.from_array(array, value.name))
        model.graph.input.remove(value)
    for got in _run_both(model, inputs[0]):
        assert got[0].dtype == want.dtype and got[0].shape == want.shape
        np.testing.assert_allclose(got[0], want, rtol=case.rtol, atol=case.atol)


# -- Conv, ConvTranspose against PyTorch ---------------------------------------------------------------------------

@pytest.mark.parametrize("shape, kernel, attrs", [
    ((2, 3, 5, 6, 7), (4, 3, 2, 3, 2), {}),
    ((1, 4, 6, 5, 7), (6, 2, 3, 2, 3), dict(group=2, strides=[2, 1, 2], pads=[1, 0, 1, 1, 0, 1], dilations=[1, 2, 1])),
    ((1, 2, 4, 4, 5), (3, 2, 3, 3, 3), dict(pads=[1, 1, 1, 1, 1, 1], strides=[1, 2, 2])),
])
def test_conv_3d_matches_pytorch(shape, kernel, attrs):
    """3-D ``Conv`` with bias, groups, strides, symmetric pads, dilations: ``F.conv3d``."""
    rng = np.random.default_rng(sum(shape))
    x, w, b = _rand(rng, *shape), _rand(rng, *kernel), _rand(rng, kernel[0])
    model = _model("Conv", {"x": x}, {"w": w, "b": b}, **attrs)
    pads = attrs.get("pads", [0] * 6)
    want = F.conv3d(torch.from_numpy(x).double(), torch.from_numpy(w).double(), torch.from_numpy(b).double(),
                    stride=attrs.get("strides", 1), padding=pads[:3], dilation=attrs.get("dilations", 1),
                    groups=attrs.get("group", 1)).numpy()
    _check(model, [x], want)


@pytest.mark.parametrize("shape, kernel, attrs", [
    ((1, 2, 3, 4, 3), (2, 3, 2, 3, 2), {}),
    ((2, 4, 3, 3, 4), (4, 2, 3, 2, 3), dict(group=2, strides=[2, 3, 1], pads=[1, 0, 1, 1, 0, 1],
                                            output_padding=[1, 2, 0])),
    ((1, 3, 2, 3, 3), (3, 2, 2, 3, 2), dict(strides=[3, 2, 2], dilations=[2, 1, 2], output_padding=[2, 1, 0],
                                            pads=[2, 1, 0, 2, 1, 0])),
])
def test_conv_transpose_3d_matches_pytorch(shape, kernel, attrs):
    """3-D ``ConvTranspose`` with bias, groups, strides, symmetric pads, dilations, ``output_padding``:
    ``F.conv_transpose3d`` (whose weight is ONNX's ``(C, M / group, kd, kh, kw)``)."""
    rng = np.random.default_rng(sum(shape))
    x, w, b = _rand(rng, *shape), _rand(rng, *kernel), _rand(rng, kernel[1] * attrs.get("group", 1))
    model = _model("ConvTranspose", {"x": x}, {"w": w, "b": b}, **attrs)
    want = F.conv_transpose3d(torch.from_numpy(x).double(), torch.from_numpy(w).double(),
                              torch.from_numpy(b).double(), stride=attrs.get("strides", 1),
                              padding=attrs.get("pads", [0] * 6)[:3], output_padding=attrs.get("output_padding", 0),
                              dilation=attrs.get("dilations", 1), groups=attrs.get("group", 1)).numpy()
    _check(model, [x], want)


def _conv_transpose_by_spec(x, w, strides, dilations, output_padding, out, upper):
    """ONNX's ConvTranspose with ``output_shape`` ``out`` as its specification words it: PyTorch's full unpadded
    output (``output_padding`` added at the end), ``total = stride * (in - 1) + output_padding + (k - 1) *
    dilation + 1 - out`` split in half, the odd one at the start (at the end for ``SAME_UPPER``); the start
    cropped, the end cropped or, where negative (an output longer than the full one), padded with zeros."""
    full = F.conv_transpose3d(torch.from_numpy(x).double(), torch.from_numpy(w).double(), stride=strides,
                              dilation=dilations).numpy()
    full = np.pad(full, [(0, 0), (0, 0)] + [(0, e) for e in output_padding])
    crops = []
    for a in range(3):
        total = full.shape[2 + a] - out[a]
        begin = total // 2 if upper else total - total // 2
        crops.append((begin, total - begin))
    full = np.pad(full, [(0, 0), (0, 0)] + [(0, max(0, -end)) for _, end in crops])
    return full[(slice(None), slice(None)) + tuple(slice(b, b + o) for (b, _), o in zip(crops, out))]


@pytest.mark.parametrize("attrs", [dict(strides=[2, 2, 3], output_shape=[6, 7, 9]),
                                   dict(strides=[2, 1, 2], output_shape=[4, 3, 5], output_padding=[1, 0, 0]),
                                   dict(strides=[2, 2, 2], auto_pad="SAME_UPPER"),
                                   dict(strides=[2, 2, 1], auto_pad="SAME_LOWER", dilations=[2, 1, 1])])
def test_conv_transpose_3d_output_shape_and_auto_pad(attrs):
    """3-D ``ConvTranspose``'s ``output_shape`` (an output longer than the full one at the end included) and
    ``auto_pad=SAME_*`` (an output of ``in * stride``), as ONNX's specification words them (PyTorch has no such
    attributes; ONNX's ReferenceEvaluator miscounts the blocks of a 3-D ``output_shape``)."""
    rng = np.random.default_rng(len(str(attrs)))
    x, w = _rand(rng, 1, 2, 2, 3, 4), _rand(rng, 2, 3, 3, 2, 3)
    strides, dilations = attrs["strides"], attrs.get("dilations", [1, 1, 1])
    out = attrs.get("output_shape") or [n * s for n, s in zip(x.shape[2:], strides)]
    want = _conv_transpose_by_spec(x, w, strides, dilations, attrs.get("output_padding", [0, 0, 0]), out,
                                   attrs.get("auto_pad") == "SAME_UPPER")
    assert want.shape[2:] == tuple(out)
    _check(_model("ConvTranspose", {"x": x}, {"w": w}, **attrs), [x], want)


# -- pools against PyTorch -----------------------------------------------------------------------------------------

_POOLS = [dict(kernel_shape=[2, 2, 2], strides=[2, 2, 2]),
          dict(kernel_shape=[3, 2, 3], strides=[2, 1, 2], pads=[1, 0, 1, 1, 0, 1]),
          dict(kernel_shape=[3, 3, 2], strides=[2, 2, 2], pads=[1, 1, 0, 1, 1, 0], ceil_mode=1),
          dict(kernel_shape=[2, 3, 2], strides=[3, 1, 2], pads=[1, 1, 1, 1, 1, 1], ceil_mode=1)]


@pytest.mark.parametrize("attrs", _POOLS + [dict(kernel_shape=[2, 2, 3], dilations=[2, 1, 2], strides=[1, 2, 1])])
def test_max_pool_3d_matches_pytorch(attrs):
    """3-D ``MaxPool``, strides, symmetric pads, dilations, ``ceil_mode``: ``F.max_pool3d``."""
    rng = np.random.default_rng(len(str(attrs)))
    x = _rand(rng, 2, 3, 5, 6, 7)
    want = F.max_pool3d(torch.from_numpy(x), attrs["kernel_shape"], attrs.get("strides", 1),
                        attrs.get("pads", [0] * 6)[:3], attrs.get("dilations", 1),
                        ceil_mode=bool(attrs.get("ceil_mode", 0))).numpy()
    _check(_model("MaxPool", {"x": x}, **attrs), [x], want)


def test_max_pool_3d_asymmetric_pads_and_same_upper():
    """Asymmetric pads are PyTorch's ``-inf`` padding then an unpadded pool; ``auto_pad=SAME_UPPER`` keeps
    ``ceil(in / stride)`` outputs (ONNX's ReferenceEvaluator)."""
    rng = np.random.default_rng(5)
    x = _rand(rng, 1, 2, 5, 6, 7)
    attrs = dict(kernel_shape=[3, 2, 3], strides=[2, 2, 1], pads=[2, 0, 1, 0, 1, 2])
    padded = F.pad(torch.from_numpy(x), (1, 2, 0, 1, 2, 0), value=-np.inf)
    _check(_model("MaxPool", {"x": x}, **attrs), [x], F.max_pool3d(padded, [3, 2, 3], [2, 2, 1]).numpy())
    same = _model("MaxPool", {"x": x}, kernel_shape=[3, 2, 3], strides=[2, 2, 2], auto_pad="SAME_UPPER")
    _check(same, [x], ReferenceEvaluator(same).run(None, {"x": x})[0].astype(np.float64))


@pytest.mark.parametrize("attrs, count_include_pad", list(itertools.product(_POOLS[1:], [0, 1])))
def test_avg_pool_3d_matches_pytorch(attrs, count_include_pad):
    """3-D ``AveragePool`` with and without ``count_include_pad`` (ONNX's default: without, unlike Relax's
    ``avg_pool3d``), strides, symmetric pads, ``ceil_mode``: ``F.avg_pool3d``."""
    rng = np.random.default_rng(len(str(attrs)) + count_include_pad)
    x = _rand(rng, 2, 3, 5, 6, 7)
    want = F.avg_pool3d(torch.from_numpy(x).double(), attrs["kernel_shape"], attrs.get("strides"),
                        attrs.get("pads", [0] * 6)[:3], ceil_mode=bool(attrs.get("ceil_mode", 0)),
                        count_include_pad=bool(count_include_pad)).numpy()
    _check(_model("AveragePool", {"x": x}, count_include_pad=count_include_pad, **attrs), [x], want)


@pytest.mark.parametrize("p", [1, 2])
def test_lp_pool_3d_matches_pytorch(p):
    """3-D ``LpPool`` (``(sum |x|**p) ** (1/p)`` over each window): ``F.lp_pool3d`` of ``|x|``."""
    rng = np.random.default_rng(p)
    x = _rand(rng, 1, 3, 5, 6, 6)
    want = F.lp_pool3d(torch.from_numpy(np.abs(x)).double(), p, [2, 3, 2], [2, 1, 2]).numpy()
    _check(_model("LpPool", {"x": x}, kernel_shape=[2, 3, 2], strides=[2, 1, 2], p=p), [x], want)


def test_global_pools_3d():
    """``GlobalAveragePool``, ``GlobalMaxPool`` over (D, H, W): NumPy's mean and max, kept as size 1."""
    x = _rand(np.random.default_rng(0), 2, 3, 4, 5, 6)
    _check(_model("GlobalAveragePool", {"x": x}), [x], x.mean(axis=(2, 3, 4), keepdims=True, dtype=np.float64))
    _check(_model("GlobalMaxPool", {"x": x}), [x], x.max(axis=(2, 3, 4), keepdims=True).astype(np.float64))


# -- Col2Im of random 3-D blocks against NumPy ---------------------------------------------------------------------

def _col2im_3d(x, image, block, strides, pads, dilations):
    """Each column of ``x`` ``(N, C * bd * bh * bw, L)`` added at its block's place in the padded image, cropped."""
    n, rows, _ = x.shape
    k = int(np.prod(block))
    grid = [(image[i] + pads[i] + pads[i + 3] - dilations[i] * (block[i] - 1) - 1) // strides[i] + 1 for i in range(3)]
    out = np.zeros((n, rows // k) + tuple(image[i] + pads[i] + pads[i + 3] for i in range(3)))
    cols = x.astype(np.float64).reshape((n, rows // k) + tuple(block) + tuple(grid))
    for b in np.ndindex(*block):
        for g in np.ndindex(*grid):
            at = tuple(g[i] * strides[i] + b[i] * dilations[i] for i in range(3))
            out[(slice(None), slice(None)) + at] += cols[(slice(None), slice(None)) + b + g]
    return out[(slice(None), slice(None)) + tuple(slice(pads[i], pads[i] + image[i]) for i in range(3))]


@pytest.mark.parametrize("image, block, strides, pads, dilations", [
    ([4, 5, 6], [2, 3, 2], [1, 1, 1], [0] * 6, [1, 1, 1]),
    ([5, 4, 6], [2, 2, 3], [2, 1, 2], [1, 0, 1, 0, 1, 1], [1, 2, 1]),
])
def test_col2im_3d_matches_numpy(image, block, strides, pads, dilations):
    """``Col2Im`` of a 3-D image with strides, pads and dilations: overlapping blocks add up."""
    grid = [(image[i] + pads[i] + pads[i + 3] - dilations[i] * (block[i] - 1) - 1) // strides[i] + 1 for i in range(3)]
    x = _rand(np.random.default_rng(1), 2, 3 * int(np.prod(block)), int(np.prod(grid)))
    model = _model("Col2Im", {"x": x}, {"image": np.array(image, np.int64), "block": np.array(block, np.int64)},
                   strides=strides, pads=pads, dilations=dilations, opset=18)
    _check(model, [x], _col2im_3d(x, image, block, strides, pads, dilations))


@pytest.mark.parametrize("image, block, strides, pads, dilations", [
    ([5, 6], [2, 2], [2, 2], [0, 0, 0, 0], [1, 1]),
    ([7, 6], [3, 2], [2, 3], [1, 0, 1, 0], [2, 1]),
])
def test_col2im_2d_with_rows_past_the_last_block_matches_pytorch_fold(image, block, strides, pads, dilations):
    """``Col2Im`` of a 2-D image whose last rows or columns no block reaches (the padded size minus the dilated
    block not a multiple of the stride): zeros there, the image's full size (the transposed convolution alone
    stopped at the last block): ``F.fold`` (symmetric pads)."""
    grid = [(image[i] + pads[i] + pads[i + 2] - dilations[i] * (block[i] - 1) - 1) // strides[i] + 1 for i in range(2)]
    x = _rand(np.random.default_rng(2), 2, 3 * int(np.prod(block)), int(np.prod(grid)))
    model = _model("Col2Im", {"x": x}, {"image": np.array(image, np.int64), "block": np.array(block, np.int64)},
                   strides=strides, pads=pads, dilations=dilations, opset=18)
    want = F.fold(torch.from_numpy(x).double(), image, block, dilation=dilations, padding=pads[:2],
                  stride=strides).numpy()
    _check(model, [x], want)


# -- refusals ------------------------------------------------------------------------------------------------------

def test_refusals_name_the_node_and_what_is_expected():
    """What is still not imported: a 3-D MaxPool's ``Indices``, 4-D pools and convolutions, 4-D Col2Im images."""
    x3 = np.zeros((1, 1, 4, 4, 4), np.float32)
    x4 = np.zeros((1, 1, 3, 3, 3, 3), np.float32)
    with pytest.raises(OnnxImportError, match=r"node n \(MaxPool\): the Indices output of a 3-D MaxPool \(input "
                                              r"\(1, 1, 4, 4, 4\)\) is not supported"):
        from_onnx(_model("MaxPool", {"x": x3}, outputs=("y", "i"), kernel_shape=[2, 2, 2]))
    with pytest.raises(OnnxImportError, match=r"node n \(AveragePool\): input \(1, 1, 3, 3, 3, 3\): only 1-D, 2-D and "
                                              r"3-D pooling \(NCW, NCHW, NCDHW\) is supported"):
        from_onnx(_model("AveragePool", {"x": x4}, kernel_shape=[2, 2, 2, 2]))
    with pytest.raises(OnnxImportError, match=r"node n \(Conv\): 4-D convolution; only 1-D, 2-D and 3-D"):
        from_onnx(_model("Conv", {"x": x4}, {"w": np.zeros((1, 1, 2, 2, 2, 2), np.float32)}))
    with pytest.raises(OnnxImportError, match=r"node n \(ConvTranspose\): input \(1, 1, 3, 3, 3, 3\), weight "
                                              r"\(1, 1, 2, 2, 2, 2\): only 1-D, 2-D and 3-D transposed"):
        from_onnx(_model("ConvTranspose", {"x": x4}, {"w": np.zeros((1, 1, 2, 2, 2, 2), np.float32)}))
    with pytest.raises(OnnxImportError, match=r"node n \(Col2Im\): image_shape \[2, 2, 2, 2\], block_shape "
                                              r"\[1, 1, 1, 1\], input \(1, 1, 16\): only 2-D and 3-D images"):
        from_onnx(_model("Col2Im", {"x": np.zeros((1, 1, 16), np.float32)},
                         {"image": np.array([2] * 4, np.int64), "block": np.array([1] * 4, np.int64)}, opset=18))
