"""Image ops (``relax.image.*``, TVM's ``relax.op.image``): ``resize2d``.

``resize2d`` follows TVM's TOPI kernel, the ONNX Resize semantics: each output pixel maps to an input coordinate by
``coordinate_transformation_mode`` and reads its neighbours there, clamped to the image, by ``method``. Both axes
are separable, so the op is a composite: per spatial axis, a ``take`` of each tap's pixels (index tables computed
from the static sizes when the program is built) times that tap's weights, summed; then ``where`` for
``tf_crop_and_resize``'s extrapolation. It compiles and differentiates through that decomposition (the adjoint of a
``take`` is a scatter-add); the spatial sizes must be static for it (batch and channels may be symbolic). The
NumPy reference computes each output pixel from the same coordinates, in float64.

Where TVM's kernel computes in float32 whatever the data's dtype, float64 data is resized here in float64; other
dtypes are computed in float32 (nearest neighbour reads the data itself), then cast to ``out_dtype`` (a float
converted to an integer truncates toward zero, as TVM's cast). ``align_corners`` with an output size of 1 reads
coordinate 0 (PyTorch's), where TVM's formula divides by zero.
"""

from __future__ import annotations

import numpy as np

from ..ir import sym
from ..ir.dtype import is_bool, to_numpy
from ..ir.struct_info import TensorStructInfo
from . import grad_utils as gu
from .common import canonical_dtype, check_number, fmt, is_int_value, shape_attr
from .registry import REQUIRED, BadSample, Op, Sample, fail, register

_T = TensorStructInfo

METHODS = ("nearest_neighbor", "linear", "cubic")
COORDINATE_MODES = ("half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel", "tf_half_pixel_for_nn",
                    "tf_crop_and_resize")
ROUNDING_METHODS = ("", "round", "floor", "ceil", "round_prefer_floor", "round_prefer_ceil")


# -- attributes ---------------------------------------------------------------------------------------------

def _size_pair(size):
    """TVM's ``size``: an int (both sides), one size or two, a ``R.shape([...])`` or a variable of shape struct
    info whose values it knows."""
    from .manipulate import shape_value

    size = shape_value(size, "image.resize2d")
    if is_int_value(size) or isinstance(size, (str, sym.SymDim)):
        size = (size, size)
    pair = shape_attr(size, "size")
    if len(pair) == 1:
        pair = pair * 2
    if len(pair) != 2:
        fail(f"size must give the output height and width (1 or 2 sizes), got {len(pair)}: {fmt(pair)}")
    return pair


def _roi(roi) -> tuple:
    if roi is None:
        return (0.0,) * 4
    if isinstance(roi, (int, float)) and not isinstance(roi, bool):
        return (float(roi),) * 4
    if not isinstance(roi, tuple) or len(roi) != 4 or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in roi):
        fail(f"roi must be None, a number or 4 numbers (start_h, start_w, end_h, end_w), got {roi!r}")
    return tuple(float(v) for v in roi)


def _canon(attrs: dict) -> dict:
    out = dict(attrs, size=_size_pair(attrs["size"]), roi=_roi(attrs["roi"]))
    if isinstance(out["cubic_exclude"], bool):
        out["cubic_exclude"] = int(out["cubic_exclude"])
    for key in ("cubic_alpha", "extrapolation_value"):
        if is_int_value(out[key]):
            out[key] = float(out[key])
    return canonical_dtype(out, "out_dtype")


def _check(attrs: dict) -> None:
    layout = attrs["layout"]
    if not isinstance(layout, str) or sorted(layout) != sorted("NCHW"):
        fail(f"layout must order the axes N, C, H and W (NCHW, NHWC, ...), got {layout!r} (packed layouts such as "
             "NCHW4c are not supported)")
    for key, allowed in (("method", METHODS), ("coordinate_transformation_mode", COORDINATE_MODES),
                         ("rounding_method", ROUNDING_METHODS)):
        if attrs[key] not in allowed:
            fail(f"{key} must be one of {', '.join(map(repr, allowed))}, got {attrs[key]!r}")
    check_number(attrs, "cubic_alpha")
    check_number(attrs, "extrapolation_value")
    if attrs["cubic_exclude"] not in (0, 1):
        fail(f"cubic_exclude must be 0 or 1, got {attrs['cubic_exclude']!r}")


def spatial_axes(layout: str) -> tuple[int, int]:
    """The positions of the H and W axes in ``layout``."""
    return layout.index("H"), layout.index("W")


def _infer(args, attrs):
    (data,) = args
    if is_bool(data.dtype):
        fail("data must be numeric, got bool")
    dtype = attrs["out_dtype"] or data.dtype
    if data.ndim not in (-1, 4):
        fail(f"data must have rank 4 (layout {attrs['layout']}), got rank {data.ndim} (shape {fmt(data.shape)})")
    if data.shape is None:
        return _T(None, dtype, 4)
    h, w = spatial_axes(attrs["layout"])
    _check_pixels((data.shape[h], data.shape[w]), attrs["size"])
    shape = list(data.shape)
    shape[h], shape[w] = attrs["size"]
    return _T(tuple(shape), dtype)


def _check_pixels(sizes_in, sizes_out) -> None:
    """An empty input axis has no pixel to read for a non-empty output (PyTorch refuses it too); an output size of
    0 is an empty result, whatever the input."""
    for name, n_in, n_out in zip(("height", "width"), sizes_in, sizes_out):
        if n_in == 0 and not (isinstance(n_out, int) and n_out == 0):
            fail(f"the input {name} is 0, so output {name} {sym.format_dim(n_out)} has no pixel to read")


# -- the taps of one axis --------------------------------------------------------------------------------------

def _source_coordinates(n_in: int, n_out: int, mode: str, start: float, end: float) -> np.ndarray:
    """The input coordinate of each output position along one axis (TOPI's ``get_inx``), in float64 (none for an
    output size of 0)."""
    x = np.arange(n_out, dtype=np.float64)
    scale = n_in / n_out if n_out else 0.0
    if mode == "half_pixel":
        return (x + 0.5) * scale - 0.5
    if mode == "align_corners":
        return x * ((n_in - 1) / (n_out - 1)) if n_out > 1 else np.zeros(n_out)
    if mode == "asymmetric":
        return x * scale
    if mode == "pytorch_half_pixel":
        return (x + 0.5) * scale - 0.5 if n_out > 1 else np.zeros(n_out)
    if mode == "tf_half_pixel_for_nn":
        return (x + 0.5) * scale
    # tf_crop_and_resize: the roi's start and end, as fractions of the image
    if n_out > 1:
        return start * (n_in - 1) + x * (end - start) * (n_in - 1) / (n_out - 1)
    return np.full(n_out, 0.5 * (start + end) * (n_in - 1))


def _nearest(coords: np.ndarray, rounding: str, mode: str, n_in: int, n_out: int) -> np.ndarray:
    """The nearest input index of each coordinate (TOPI's ``get_closest_index``): ``round`` is to even (TVM's
    ``nearbyint``); ``floor``/``ceil`` move by 1e-5 first, as TVM's. The default ``""`` is ``round`` with
    ``align_corners`` and ``floor`` otherwise. An asymmetric upscale by a whole factor divides integers, as TVM's."""
    rounding = rounding or ("round" if mode == "align_corners" else "floor")
    if mode == "asymmetric" and rounding == "floor" and n_in and n_out % n_in == 0 and \
            n_out // n_in <= 1 / (1e-5 * n_in + 1e-5):
        return np.arange(n_out) // (n_out // n_in)
    return {"round": np.rint,
            "round_prefer_floor": lambda c: np.ceil(c - 0.5),
            "round_prefer_ceil": lambda c: np.floor(c + 0.5),
            "floor": lambda c: np.floor(c + 1e-5),
            "ceil": lambda c: np.ceil(c - 1e-5)}[rounding](coords).astype(np.int64)


def _cubic_weights(t: np.ndarray, alpha: float) -> list[np.ndarray]:
    """The four weights of the taps at -1, 0, 1, 2 from ``floor(coordinate)`` (Keys' cubic convolution)."""
    t2, t3 = t * t, t * t * t
    return [alpha * (t3 - 2 * t2 + t), (alpha + 2) * t3 - (alpha + 3) * t2 + 1,
            -(alpha + 2) * t3 + (2 * alpha + 3) * t2 - alpha * t, -alpha * t3 + alpha * t2]


def axis_taps(n_in: int, n_out: int, attrs: dict, axis: str):
    """Resizing one axis (``"H"`` or ``"W"``) of ``n_in`` to ``n_out`` positions: a list of taps ``(indices,
    weights)``, each of ``n_out`` entries (``out[x] = sum over taps of weights[x] * in[indices[x]]``, indices
    clamped into the image), and the positions whose coordinate lies inside the image (``tf_crop_and_resize``:
    the others take ``extrapolation_value``), or ``None``."""
    mode = attrs["coordinate_transformation_mode"]
    roi = attrs["roi"]
    start, end = (roi[0], roi[2]) if axis == "H" else (roi[1], roi[3])
    coords = _source_coordinates(n_in, n_out, mode, start, end)
    inside = (coords >= 0) & (coords <= n_in - 1) if mode == "tf_crop_and_resize" else None

    def clamp(i):
        return np.clip(i, 0, n_in - 1).astype(np.int64)

    method = attrs["method"]
    if method == "nearest_neighbor":
        return [(clamp(_nearest(coords, attrs["rounding_method"], mode, n_in, n_out)), np.ones(n_out))], inside
    base = np.floor(coords)
    t = coords - base
    base = base.astype(np.int64)
    if method == "linear":
        return [(clamp(base), 1.0 - t), (clamp(base + 1), t)], inside
    weights = _cubic_weights(t, attrs["cubic_alpha"])
    if attrs["cubic_exclude"]:
        weights = [np.where((base - 1 + i < 0) | (base + i > n_in), 0.0, w) for i, w in enumerate(weights)]
        total = sum(weights)
        weights = [w / total for w in weights]
    return [(clamp(base - 1 + i), w) for i, w in enumerate(weights)], inside


def compute_dtype(dtype: str, method: str) -> str:
    """Where the pixels are combined: nearest neighbour reads them as they are; float64 data in float64, the rest
    in float32 (TVM's kernel: float32 throughout)."""
    if method == "nearest_neighbor":
        return dtype
    return "float64" if dtype == "float64" else "float32"


# -- reference ----------------------------------------------------------------------------------------------

def _reference(data, size, roi, layout, method, coordinate_transformation_mode, rounding_method, cubic_alpha,
               cubic_exclude, extrapolation_value, out_dtype):
    attrs = dict(roi=roi, method=method, coordinate_transformation_mode=coordinate_transformation_mode,
                 rounding_method=rounding_method, cubic_alpha=cubic_alpha, cubic_exclude=cubic_exclude)
    h, w = spatial_axes(layout)
    nchw = np.moveaxis(np.asarray(data), (h, w), (2, 3)).astype(np.float64)
    _check_pixels(nchw.shape[2:], size)  # (a symbolic size that is 0 at run time)
    taps_h, inside_h = axis_taps(nchw.shape[2], size[0], attrs, "H")
    taps_w, inside_w = axis_taps(nchw.shape[3], size[1], attrs, "W")
    out = np.zeros(nchw.shape[:2] + tuple(size))
    for iy, wy in taps_h:
        for ix, wx in taps_w:
            out += nchw[:, :, iy[:, None], ix[None, :]] * (wy[:, None] * wx[None, :])
    if inside_h is not None:
        out = np.where(inside_h[:, None] & inside_w[None, :], out, extrapolation_value)
    dtype = to_numpy(out_dtype or _dtype_name(data))
    if np.issubdtype(dtype, np.integer):
        out = np.trunc(out)
    return np.moveaxis(out, (2, 3), (h, w)).astype(dtype)


def _dtype_name(a) -> str:
    from ..ir.dtype import from_numpy

    return from_numpy(a.dtype)


# -- decomposition ------------------------------------------------------------------------------------------

def _decompose(call):
    """Per spatial axis (W, then H, the order of TVM's interpolation): ``sum_k take(x, indices_k, axis) *
    weights_k``, with the tables of :func:`axis_taps` as constants; then the extrapolation mask and the cast."""
    from ..ir.expr import const
    from . import add, astype, multiply, take, where

    x, a = call.args[0], call.attrs
    who = "relax.image.resize2d decomposition"
    shape = gu.shape_of(x, who)
    h, w = spatial_axes(a["layout"])
    sizes = (shape[h], shape[w]) + tuple(a["size"])
    if not all(isinstance(d, int) for d in sizes):
        raise gu.ShapeNeeded(who, f"the input height and width ({sym.format_dim(shape[h])}, "
                                  f"{sym.format_dim(shape[w])}) and the output size {fmt(a['size'])} must be static "
                                  "(the interpolation tables are built from them)", "static shape")
    dtype = x.struct_info.dtype
    ct = compute_dtype(dtype, a["method"])
    y = x if ct == dtype else astype(x, ct)
    masks = []
    for axis, name, n_in, n_out in ((w, "W", sizes[1], sizes[3]), (h, "H", sizes[0], sizes[2])):
        taps, inside = axis_taps(n_in, n_out, a, name)
        masks.append((axis, inside))
        y = _resample(y, axis, taps, ct, const, take, multiply, add)
    if masks[0][1] is not None:
        keep = np.ones([1] * 4, bool)
        for axis, inside in masks:
            keep = keep & inside.reshape([-1 if i == axis else 1 for i in range(4)])
        y = where(const(keep, "bool"), y, const(a["extrapolation_value"], ct))
    out = a["out_dtype"] or dtype
    return y if out == ct else astype(y, out)


def _resample(y, axis, taps, ct, const, take, multiply, add):
    """``sum_k take(y, indices_k, axis) * weights_k`` without the taps whose weights are all 0, and without the
    multiplication of a tap whose weights are all 1 (nearest neighbour: a gather; the same size with every index
    its own: ``y`` itself)."""
    n_in = gu.shape_of(y)[axis]
    live = [(i, wt) for i, wt in taps if np.any(wt != 0)] or taps[:1]
    total = None
    for indices, weights in live:
        same = len(indices) == n_in and np.array_equal(indices, np.arange(n_in))
        picked = y if same else take(y, const(indices, "int64"), axis=axis)
        if not np.all(weights == 1):
            picked = multiply(picked, const(weights.reshape([-1 if i == axis else 1 for i in range(4)]), ct))
        total = picked if total is None else add(total, picked)
    return total


def _image(rng, sinfos, attrs):
    return [rng.uniform(-2, 2, sinfos[0].shape).astype(to_numpy(sinfos[0].dtype))]


resize2d = register(Op(
    name="relax.image.resize2d", inputs=("data",),
    attrs={"size": REQUIRED, "roi": (0.0, 0.0, 0.0, 0.0), "layout": "NCHW", "method": "linear",
           "coordinate_transformation_mode": "half_pixel", "rounding_method": "round", "cubic_alpha": -0.75,
           "cubic_exclude": 0, "extrapolation_value": 0.0, "out_dtype": None},
    canonicalize=_canon, check_attrs=_check, infer=_infer, reference=_reference, decompose=_decompose,
    gradient=gu.through_decomposition,
    samples=[Sample([_T((1, 2, 4, 5), "float32")], {"size": (7, 3)}),
             Sample([_T(("n", 3, 4, 4), "float64")], {"size": (8, 6), "method": "linear",
                                                        "coordinate_transformation_mode": "align_corners"}),
             Sample([_T((2, 5, 3, 2), "float32")], {"size": (4, 5), "layout": "NHWC",
                                                     "method": "nearest_neighbor",
                                                     "coordinate_transformation_mode": "asymmetric",
                                                     "rounding_method": "floor"}),
             Sample([_T((1, 1, 3, 4), "int32")], {"size": 6, "method": "nearest_neighbor"}, low=-50, high=50),
             Sample([_T((1, 2, 5, 4), "float64")], {"size": (3, 7), "method": "cubic"}),
             Sample([_T((1, 1, 4, 4), "float32")], {"size": (6, 5), "method": "cubic", "cubic_exclude": 1,
                                                     "cubic_alpha": -0.5,
                                                     "coordinate_transformation_mode": "pytorch_half_pixel"}),
             Sample([_T((1, 2, 4, 5), "float64")], {"size": (5, 6), "coordinate_transformation_mode":
                                                     "tf_crop_and_resize", "roi": (-0.2, 0.1, 0.9, 1.3),
                                                     "extrapolation_value": 3.5}),
             Sample([_T((1, 1, 3, 3), "float16")], {"size": (2, 5), "out_dtype": "float32"}),
             Sample([_T((1, 3, 3, 1), "float32")], {"size": (1, 4), "layout": "NHWC",
                                                     "coordinate_transformation_mode": "tf_half_pixel_for_nn",
                                                     "method": "nearest_neighbor",
                                                     "rounding_method": "round_prefer_ceil"})],
    bad_samples=[BadSample([_T((1, 2, 4), "float32")], {"size": (2, 2)}, r"data must have rank 4 \(layout NCHW\)"),
                 BadSample([_T((1, 2, 4, 4), "float32")], {"size": (2, 2, 2)}, r"size must give the output height"),
                 BadSample([_T((1, 2, 4, 4), "float32")], {"size": (2, 2), "method": "bilinear"},
                           r"method must be one of 'nearest_neighbor', 'linear', 'cubic', got 'bilinear'"),
                 BadSample([_T((1, 2, 4, 4), "float32")], {"size": (2, 2), "layout": "NCHW4c"},
                           r"layout must order the axes N, C, H and W"),
                 BadSample([_T((1, 2, 4, 4), "float32")], {"size": (2, 2), "coordinate_transformation_mode": "x"},
                           r"coordinate_transformation_mode must be one of"),
                 BadSample([_T((1, 2, 4, 4), "float32")], {"size": (2, 2), "rounding_method": "even"},
                           r"rounding_method must be one of"),
                 BadSample([_T((1, 2, 4, 4), "float32")], {"size": (2, 2), "roi": (0.0, 1.0)}, r"roi must be None"),
                 BadSample([_T((1, 2, 4, 4), "float32")], {"size": (2, 2), "cubic_exclude": 2},
                           r"cubic_exclude must be 0 or 1"),
                 BadSample([_T((1, 2, 4, 4), "bool")], {"size": (2, 2)}, r"data must be numeric")],
    doc="Resize the H and W axes of a 4-D image to ``size`` (TVM's ``image.resize2d``, ONNX's Resize): "
        "``method`` 'nearest_neighbor', 'linear' (bilinear) or 'cubic' (bicubic, ``cubic_alpha``; "
        "``cubic_exclude=1`` drops the taps outside the image and renormalizes), "
        "``coordinate_transformation_mode`` 'half_pixel' (PyTorch's ``align_corners=False``), 'align_corners', "
        "'asymmetric', 'pytorch_half_pixel', 'tf_half_pixel_for_nn' or 'tf_crop_and_resize' (the ``roi`` (start_h, "
        "start_w, end_h, end_w) as fractions of the image; outside it ``extrapolation_value``), "
        "``rounding_method`` for nearest neighbour ('round' to even, 'floor', 'ceil', 'round_prefer_floor', "
        "'round_prefer_ceil'; '' is 'round' with align_corners, else 'floor'). ``layout`` any order of N, C, H, W. "
        "The result has ``out_dtype`` (default: the data's). Composite: per-axis gathers and weights (static "
        "spatial sizes); differentiable through them."))

__all__ = ["resize2d"]
