"""``from_onnx``: an ONNX model (opset 17 or later) as a Relax module (TVM's ``relax.frontend.onnx.from_onnx``).

::

    mod, params, states = from_onnx(onnx.load("model.onnx"))
    # mod["main"](inputs..., <float initializers>, <batch-norm running statistics>)

Initializers: the float ones are parameters (``keep_params_in_input=True``), except those a
``BatchNormalization`` reads as its running mean and variance, which are states (``main`` returns
``(output, new states...)``), and those read as values while importing (a ``Clip`` bound, ``Resize`` scales:
``_VALUE_INPUTS``); integer initializers (shapes, indices) are constants. Each ONNX op is one entry of
``CONVERTERS``; every op missing there is reported at once before anything is built.

Shape arithmetic (``Shape``, ``Gather``, ``Concat``, ``Mod`` ... on shapes, as PyTorch's exporter writes it) is
evaluated while importing: a call whose arguments are all constants becomes a constant, computed by the op's
NumPy reference. So ``Reshape``/``Slice``/``Unsqueeze`` operands that are computed from shapes work, provided the
shapes are static: a symbolic input dimension must be fixed with ``shape_dict={"input": (8, 3, 32, 32)}``.

``BatchNormalization`` is imported in its inference form (as from PyTorch); ``SetupTrainer`` switches it to
training. ONNX's ``momentum`` weighs the running value (``running * momentum + batch * (1 - momentum)``), so the
Relax op gets ``1 - momentum``.
"""

from __future__ import annotations

import copy
import functools
import os
import warnings
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np

from .. import op
from ..ir import DTYPES, Var
from ..ir.dtype import is_floating
from ..ir.expr import Call, Constant, Expr, Tuple, TupleGetItem, const
from ..op.registry import Op
from .common import (ImportedModel, Names, Updates, build_main, check_supported, dtype_of, elu, emit_updates,
                     in_float32, mish, ndim_of, scalar_like, split_pieces, tensor_var)
from . import onnx_ops, onnx_resize, rnn
from .onnx_attention import attention as _attention

FRONTEND = "from_onnx"
MIN_OPSET = 17


class OnnxImportError(ValueError):
    """A node the importer knows but cannot convert as it stands (an attribute or operand it does not support)."""


class ShapeDictError(ValueError):
    """``shape_dict`` misses the size of an input with symbolic dims, or names something that is not an input. The
    message names ``shape_dict``; ``for_cli`` says the same with ``relax-mlir import``'s ``--shape`` option, which
    its users pass shapes with."""

    def __init__(self, message: str, for_cli: str):
        super().__init__(message)
        self.for_cli = for_cli


class _Node:
    """A node with its attributes decoded: ``name`` (its name, else its first output), ``op_type``, ``attrs``, and
    the model's ``opset`` (for the ops whose defaults changed with it). An attribute that refers to an enclosing
    function's (``ref_attr_name``, which only a function body may use) has no value to decode: refused naming the
    node, rather than with onnx's bare ``ValueError``."""

    def __init__(self, proto, opset: int = MIN_OPSET) -> None:
        from onnx import helper

        self.proto, self.op_type, self.opset = proto, proto.op_type, opset
        self.name = proto.name or (proto.output[0] if proto.output else proto.op_type)
        for a in proto.attribute:
            if a.ref_attr_name:
                raise self.fail(f"attribute {a.name} refers to {a.ref_attr_name}, an attribute of an enclosing "
                                "function, which only a node of a function body may; expected a value")
        self.attrs = {a.name: _decode(helper.get_attribute_value(a)) for a in proto.attribute}

    def fail(self, what: str) -> OnnxImportError:
        return OnnxImportError(f"{FRONTEND}: node {self.name} ({self.op_type}): {what}")


def _decode(value):
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


def _np_dtype(onnx_type: int) -> Optional[np.dtype]:
    """NumPy's dtype for an ONNX element type; None for UNDEFINED or a number that is no ONNX type."""
    from onnx import helper

    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(onnx_type))
    except KeyError:
        return None


# -- constants -----------------------------------------------------------------------------------------------------

def _known(x: Optional[Expr]) -> Optional[np.ndarray]:
    return x.data if isinstance(x, Constant) else None


def _need(node: _Node, x: Optional[Expr], what: str) -> np.ndarray:
    """The value of an operand that must be known while importing (a shape, axes)."""
    value = _known(x)
    if value is None:
        raise node.fail(f"{what} must be a constant (or computed from static shapes), got a value computed at run "
                        "time")
    return value


def _ints(node: _Node, x: Optional[Expr], what: str) -> list[int]:
    return [int(v) for v in np.ravel(_need(node, x, what))]


def fold(expr: Expr, done: Optional[dict] = None) -> Expr:
    """A call whose arguments are all constants, replaced by its value (the op's NumPy reference); nested calls
    first. Other expressions are returned as they are. A nested expression used more than once (a converter's
    unrolled recurrence reads its state twice a step) is folded once and stays one object, so that the block
    builder binds it once: walked as a tree, 25 window positions of MaxPool's Indices took 2**25 steps."""
    done = {} if done is None else done
    if id(expr) in done:
        return done[id(expr)][1]
    if not isinstance(expr, Call) or not isinstance(expr.op, Op):
        return expr
    args = [Tuple([fold(f, done) for f in a.fields]) if isinstance(a, Tuple) else fold(a, done) for a in expr.args]
    values = [_known_tree(a) for a in args]
    if any(v is None for v in values) or expr.op.reference is None or expr.op.name.startswith("relax.random"):
        result = Call(expr.op, args, expr.attrs)
    else:
        value = expr.op.reference(*values, **dict(expr.attrs))
        result = const(np.asarray(value), str(np.asarray(value).dtype)) if not isinstance(value, tuple) else expr
    done[id(expr)] = (expr, result)  # (the expression kept with its id, which stays its own while it lives)
    return result


def _known_tree(x: Expr):
    """A constant's array, a tuple of constants' arrays, else None."""
    if isinstance(x, Tuple):
        fields = [_known(f) for f in x.fields]
        return None if any(f is None for f in fields) else tuple(fields)
    return _known(x)


def _shape(x: Expr) -> tuple[int, ...]:
    return tuple(x.struct_info.shape)


def _axis(node: _Node, axis: int, rank: int) -> int:
    """An axis in ``[-rank, rank)`` (ONNX's range) as a non-negative one; any other is refused naming the node."""
    if not -rank <= axis < rank:
        raise node.fail(f"axis {axis} is out of range for rank {rank} (expected [{-rank}, {rank - 1}])")
    return axis % rank


# -- converters, one per ONNX op ------------------------------------------------------------------------------------

def _unary(fn: Callable) -> Callable:
    return lambda node, xs: fn(xs[0])


def _binary(fn: Callable) -> Callable:
    return lambda node, xs: fn(xs[0], xs[1])


def _variadic(fn: Callable) -> Callable:
    """``Max``, ``Min``, ``Sum``, ``Mean``-like ops of one or more inputs, folded left (one input: itself; the
    converter read only the first two, dropping the rest)."""
    def convert(node, xs):
        result = xs[0]
        for x in xs[1:]:
            result = fn(result, x)
        return result
    return convert


def _pow(node, xs):
    """ONNX's ``Pow`` allows an exponent of another type than the base (``x ** int64(2)``): it is cast to the base's.
    An integer base (Relax's ``power`` takes floats only) is raised in float64 and truncated back, as
    onnxruntime's ``static_cast<T>(std::pow(x, y))``, through a 64-bit integer so that a narrower dtype wraps as
    the reference evaluator's integer power does: exact where the true power is below 2**53 in magnitude; beyond,
    float64's rounding (and past 2**63 the cast) differ from the reference's wrapped integer."""
    base, exponent = xs
    dtype = dtype_of(base)
    if dtype[0] in "iu":  # through the 64-bit integer of the base's signedness, so a narrower result wraps
        power = op.power(op.astype(base, "float64"), op.astype(exponent, "float64"))
        return op.astype(op.astype(power, "uint64" if dtype[0] == "u" else "int64"), dtype)
    return op.power(base, exponent if dtype_of(exponent) == dtype else op.astype(exponent, dtype))


def _gemm(node, xs):
    a, b = xs[0], xs[1]
    c = xs[2] if len(xs) > 2 else None
    if node.attrs.get("transA", 0):
        a = op.permute_dims(a, axes=list(range(ndim_of(a)))[::-1])
    if node.attrs.get("transB", 0):
        b = op.permute_dims(b, axes=list(range(ndim_of(b)))[::-1])
    y = op.matmul(a, b)
    alpha, beta = node.attrs.get("alpha", 1.0), node.attrs.get("beta", 1.0)
    if alpha != 1.0:
        y = op.multiply(y, scalar_like(alpha, y))
    if c is None:
        return y
    return op.add(y, c if beta == 1.0 else op.multiply(c, scalar_like(beta, c)))


def _spatial(node, xs, n: int, same: bool = True) -> dict:
    """``strides``, ``padding`` (Relax's begin..., end... order is ONNX's too), ``dilation`` of a conv or pool.
    ``auto_pad=SAME_UPPER``/``SAME_LOWER`` pads so that the output has ``ceil(in / stride)`` pixels, the odd one at
    the end (upper) or the start (lower); ``VALID`` pads nothing. ``same=False`` leaves a SAME padding (zeros) to
    the caller (a transposed convolution's differs)."""
    _check_per_axis(node, xs[0], n)
    auto_pad = node.attrs.get("auto_pad", "NOTSET")
    if auto_pad not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
        raise node.fail(f"auto_pad={auto_pad!r}; expected NOTSET, VALID, SAME_UPPER or SAME_LOWER")
    strides, dilation = tuple(node.attrs.get("strides", [1] * n)), tuple(node.attrs.get("dilations", [1] * n))
    pads = tuple(node.attrs.get("pads", [0] * 2 * n)) if auto_pad == "NOTSET" else (0,) * (2 * n)
    if auto_pad.startswith("SAME") and same:
        kernel = node.attrs.get("kernel_shape") or _shape(xs[1])[2:]
        sizes = _shape(xs[0])[2:]
        totals = [max((-(-size // s) - 1) * s + (k - 1) * d + 1 - size, 0)
                  for size, s, k, d in zip(sizes, strides, kernel, dilation)]
        pads = _split_pads(totals, upper=auto_pad == "SAME_UPPER")
    return dict(strides=strides, padding=pads, dilation=dilation)


def _split_pads(totals: Sequence[int], upper: bool) -> tuple[int, ...]:
    """Each axis' total padding as ONNX's auto_pad splits it: half at each end, the odd one at the end
    (``SAME_UPPER``) or the start (``SAME_LOWER``); begins, then ends."""
    small = [t // 2 for t in totals]
    large = [t - t // 2 for t in totals]
    return tuple(small + large) if upper else tuple(large + small)


#: The conv and pool attributes with one value per spatial axis (``pads``: two, every begin then every end).
_PER_AXIS = ("kernel_shape", "strides", "dilations", "output_padding", "pads")


def _check_per_axis(node, x: Expr, n: int) -> None:
    """Each conv or pool attribute with one value per spatial axis has one for each of the input's ``n`` (``pads``
    a begin and an end), as ONNX's shape inference and onnxruntime demand: Relax's ops expand a single value to
    every axis (and read two pads of a 2-D op as symmetric ones), so ``kernel_shape=[2]`` on a 2-D pool was a
    2x2 window and ``pads=[1]`` padded every side."""
    for name in _PER_AXIS:
        values = node.attrs.get(name)
        expected = 2 * n if name == "pads" else n
        if values is not None and len(values) != expected:
            each = "a begin and an end" if name == "pads" else "one"
            axes = "the 1 spatial axis" if n == 1 else f"each of the {n} spatial axes"
            raise node.fail(f"attribute {name} has {len(values)} value{'s' * (len(values) != 1)} ({values}); "
                            f"expected {expected}, {each} for {axes} of the input {_shape(x)}")


def _check_kernel(node, w: Expr) -> None:
    """A conv's ``kernel_shape``, where given, is its weight's spatial shape (ONNX infers it from the weight when
    absent; onnxruntime refuses a disagreement): Relax's convolutions take the weight's, so a disagreeing one was
    silently ignored."""
    kernel = node.attrs.get("kernel_shape")
    if kernel is not None and tuple(kernel) != _shape(w)[2:]:
        raise node.fail(f"kernel_shape {kernel} disagrees with the weight's spatial shape {list(_shape(w)[2:])} "
                        f"(W {_shape(w)}); expected them equal")


def _conv(node, xs):
    x, w = xs[0], xs[1]
    n = ndim_of(x) - 2
    if n not in (1, 2, 3):
        raise node.fail(f"{n}-D convolution; only 1-D, 2-D and 3-D are supported")
    spatial = _spatial(node, xs, n)
    _check_kernel(node, w)
    conv = {1: op.nn.conv1d, 2: op.nn.conv2d, 3: op.nn.conv3d}[n]
    y = conv(x, w, groups=node.attrs.get("group", 1), **spatial)
    if len(xs) > 2 and xs[2] is not None:
        y = op.add(y, op.reshape(xs[2], (1, -1) + (1,) * n))
    return y


def _pool(fn: Callable, fn_3d: Callable, **extra: Callable) -> Callable:
    """``MaxPool``/``AveragePool`` (2-D with ``fn``, 3-D with ``fn_3d``; 1-D as 2-D of height 1); MaxPool's
    ``Indices`` output where the graph names it (:func:`.onnx_ops.max_pool_indices`, 1-D and 2-D)."""
    def convert(node, xs):
        _check_pool_rank(node, xs[0])
        more = {k: f(node.attrs) for k, f in extra.items()}
        wanted = len(node.proto.output) > 1 and node.proto.output[1]
        if wanted and ndim_of(xs[0]) == 5:
            raise node.fail(f"the Indices output of a 3-D MaxPool (input {_shape(xs[0])}) is not supported; "
                            "expected a 1-D or 2-D pool, or the values output alone")
        indices = []

        def pool(x, **attrs):
            y = (fn_3d if ndim_of(x) == 5 else fn)(x, **attrs, **more)
            if wanted:
                column_major = bool(node.attrs.get("storage_order", 0))
                indices.append(onnx_ops.max_pool_indices(x, _shape(y), attrs["pool_size"], attrs["strides"],
                                                         attrs["padding"], attrs["dilation"], column_major))
            return y

        y = _pool_nd(node, xs, pool)
        if not wanted:
            return y
        return [y, indices[0] if ndim_of(y) == 4 else op.squeeze(indices[0], axis=[2])]
    return convert


def _check_pool_rank(node, x: Expr) -> None:
    if ndim_of(x) not in (3, 4, 5):
        raise node.fail(f"input {_shape(x)}: only 1-D, 2-D and 3-D pooling (NCW, NCHW, NCDHW) is supported")


def _pool_nd(node, xs, pool: Callable) -> Expr:
    """``pool(x, pool_size, strides, padding, dilation, ceil_mode)`` of the node's input and attributes (2-D or
    3-D); a 1-D input ``(N, C, W)`` is pooled as ``(N, C, 1, W)`` with a window of height 1."""
    x = xs[0]
    if ndim_of(x) == 3:
        _check_per_axis(node, x, 1)
        return op.squeeze(_pool_nd(_unit_height(node), [op.expand_dims(x, axis=2)], pool), axis=[2])
    return pool(x, pool_size=tuple(node.attrs["kernel_shape"]), ceil_mode=bool(node.attrs.get("ceil_mode", 0)),
                **_spatial(node, xs, ndim_of(x) - 2))


def _lp_pool(node, xs):
    """``LpPool``: ``(sum of |x|**p over the window) ** (1/p)``, the sum an average pool that counts the zero padding,
    times the window's size (1-D, 2-D and 3-D)."""
    x, p = xs[0], node.attrs.get("p", 2)
    _check_pool_rank(node, x)
    if p < 1:
        raise node.fail(f"p={p}; expected a positive p")
    size = int(np.prod(node.attrs["kernel_shape"]))
    powered = op.power(op.abs(x), scalar_like(float(p), x))
    total = _pool_nd(node, [powered], lambda x, **attrs: op.multiply(
        (op.nn.avg_pool3d if ndim_of(x) == 5 else op.nn.avg_pool2d)(x, count_include_pad=True, **attrs),
        scalar_like(float(size), x)))
    return op.power(total, scalar_like(1.0 / p, x))


def _batch_norm(node, xs):
    x, scale, bias, mean, var = xs
    if node.attrs.get("training_mode", 0):  # the batch's statistics: what SetupTrainer makes of the inference form
        raise node.fail("training_mode=1 is not supported: export the model in inference mode (model.eval()); "
                        "training through relax_mlir.training uses the batch's statistics")
    momentum = float(node.attrs.get("momentum", 0.9))
    bn = op.nn.batch_norm(x, scale, bias, mean, var, axis=1, epsilon=float(node.attrs.get("epsilon", 1e-5)),
                          momentum=1.0 - momentum)
    results = (0, 1, 2)[:len(node.proto.output)]
    return Updates(bn, results, {mean: 1, var: 2})


def _layer_norm(node, xs):
    """``LayerNormalization`` over the axes from ``axis`` on. ONNX lets the scale and bias broadcast to the
    normalized shape (Relax's op wants that shape): they are broadcast to it. The optional ``Mean`` and
    ``InvStdDev`` outputs (kept dims, as ONNX's) are computed beside it when the graph names them."""
    x = xs[0]
    axis = _axis(node, node.attrs.get("axis", -1), ndim_of(x))
    axes, normalized = list(range(axis, ndim_of(x))), _shape(x)[axis:]
    epsilon = float(node.attrs.get("epsilon", 1e-5))
    scale = xs[1] if _shape(xs[1]) == normalized else op.broadcast_to(xs[1], normalized)
    bias = xs[2] if len(xs) > 2 and xs[2] is not None else const(np.zeros(normalized, dtype_of(x)), dtype_of(x))
    bias = bias if _shape(bias) == normalized else op.broadcast_to(bias, normalized)
    results: list[Optional[Expr]] = [op.nn.layer_norm(x, scale, bias, axes=axes, epsilon=epsilon)]
    if any(node.proto.output[1:]):
        mean = op.mean(x, axis=axes, keepdims=True)
        centred = op.subtract(x, mean)
        var = op.mean(op.multiply(centred, centred), axis=axes, keepdims=True)
        results += [mean, op.divide(scalar_like(1.0, x), op.sqrt(op.add(var, scalar_like(epsilon, x))))]
    return results[:len(node.proto.output)]



def _rms_norm(node, xs):
    """``RMSNormalization`` (opset 23) over the axes from ``axis`` on, as ONNX's function body computes it:
    ``X`` cast to ``stash_type`` (float32 by default, also for a float64 ``X``), normalized there, cast back to
    ``X``'s type, then times ``scale`` (which broadcasts) in that type. Relax's ``rms_norm`` does the normalizing;
    where ``X`` is already of the stash type it also applies the scale (the same steps)."""
    x, scale = xs
    axis = _axis(node, node.attrs.get("axis", -1), ndim_of(x))
    axes, normalized = list(range(axis, ndim_of(x))), _shape(x)[axis:]
    epsilon = float(node.attrs.get("epsilon", 1e-5))
    stash = _np_dtype(node.attrs.get("stash_type", 1))
    if stash is None or not is_floating(str(stash)) or str(stash) not in DTYPES:
        raise node.fail(f"stash_type={node.attrs.get('stash_type')} is not a float element type Relax holds; "
                        "expected FLOAT (1), DOUBLE (11), FLOAT16 (10) or BFLOAT16 (16)")
    dtype = dtype_of(x)
    if str(stash) == dtype and np.broadcast_shapes(_shape(scale), normalized) == normalized:
        weight = scale if _shape(scale) == normalized else op.broadcast_to(scale, normalized)
        return op.nn.rms_norm(x, weight, axes=axes, epsilon=epsilon)
    ones = const(np.ones(normalized, stash), str(stash))
    unit = op.nn.rms_norm(op.astype(x, str(stash)), ones, axes=axes, epsilon=epsilon)
    return op.multiply(op.astype(unit, dtype), scale)


def _nll_attrs(node, classes: int) -> dict:
    """Relax's ``nll_loss`` attributes of a loss node. Without ONNX's ``ignore_index`` every target counts; Relax's
    op always ignores one index (-100 by default, which a wrong negative target could equal), so it gets the class
    count, which no valid target equals."""
    reduction = node.attrs.get("reduction", "mean")
    if reduction not in ("none", "sum", "mean"):
        raise node.fail(f"reduction {reduction!r} is not one of 'none', 'sum', 'mean'")
    return {"reduction": reduction, "ignore_index": int(node.attrs.get("ignore_index", classes))}


def _loss_operands(node, scores: Expr, target: Expr, weight: Optional[Expr]) -> list[Expr]:
    """The operands of ``nll_loss`` (the weight only when given); a scores tensor without a class axis is refused
    (ONNX's losses take ``(N, C)`` or ``(N, C, d1, ..., dk)``; Relax's would take a ``(C,)`` one)."""
    if ndim_of(scores) < 2:
        raise node.fail(f"the input must have shape (N, C) or (N, C, d1, ..., dk), got {_shape(scores)}")
    return [scores, target] + ([weight] if weight is not None else [])


def _nll_loss(node, xs):
    """``NegativeLogLikelihoodLoss``: Relax's ``nll_loss`` (the same reductions; ``mean`` divides by the summed
    weights of the targets not ignored)."""
    weight = xs[2] if len(xs) > 2 else None
    return op.nn.nll_loss(*_loss_operands(node, xs[0], xs[1], weight), **_nll_attrs(node, _shape(xs[0])[1]))


def _softmax_cross_entropy(node, xs):
    """``SoftmaxCrossEntropyLoss``: ``nll_loss`` of ``log_softmax`` over the class axis (1), which is the optional
    second output ``log_prob``."""
    scores, target, *weight = _loss_operands(node, xs[0], xs[1], xs[2] if len(xs) > 2 else None)
    log_prob = op.nn.log_softmax(scores, axis=1)
    loss = op.nn.nll_loss(log_prob, target, *weight, **_nll_attrs(node, _shape(scores)[1]))
    return [loss, log_prob][:len(node.proto.output)]


def _softmax(fn: Callable) -> Callable:
    return lambda node, xs: fn(xs[0], axis=node.attrs.get("axis", -1))


def _reduce(fn: Callable) -> Callable:
    """ReduceMean/Sum/Max/Min: axes an attribute (before opset 18) or the second input; ReduceMax/Min of bools
    (opset 20) are Relax's any/all of bools (over no elements False/True: through int8, the -128 a max starts from
    was True)."""
    def convert(node, xs):
        axes = node.attrs.get("axes")
        if len(xs) > 1 and xs[1] is not None:
            axes = _ints(node, xs[1], "axes")
        if not axes:
            if node.attrs.get("noop_with_empty_axes", 0):
                return xs[0]
            axes = None
        keepdims = bool(node.attrs.get("keepdims", 1))
        if fn is op.mean and dtype_of(xs[0])[0] in "iu":  # Relax's mean takes floats: the sum over the count
            return _integer_mean(xs[0], axes, keepdims)
        return fn(xs[0], axis=axes, keepdims=keepdims)
    return convert


def _integer_mean(x: Expr, axes: Optional[list[int]], keepdims: bool) -> Expr:
    """``ReduceMean`` of integers: the sum (in the input's dtype, wrapping) divided by the count, truncated toward
    zero, as ONNX's reference (NumPy's ``mean(dtype=int)``) and onnxruntime compute it (not NumPy's float mean)."""
    shape = _shape(x)
    count = int(np.prod([shape[a] for a in axes])) if axes is not None else int(np.prod(shape))
    return op.divide(op.sum(x, axis=axes, keepdims=keepdims), scalar_like(count, x))


def _reshape(node, xs):
    x, shape = xs[0], _ints(node, xs[1], "the shape")
    if not node.attrs.get("allowzero", 0):
        shape = [_shape(x)[i] if d == 0 else d for i, d in enumerate(shape)]
    return op.reshape(x, tuple(shape))


def _flatten(node, xs):
    shape = _shape(xs[0])
    axis = node.attrs.get("axis", 1)
    if not -len(shape) <= axis <= len(shape):  # ONNX: in [-r, r], a negative axis counting from the rank
        raise node.fail(f"axis {axis} is out of range for rank {len(shape)} (expected [{-len(shape)}, {len(shape)}])")
    axis = axis + len(shape) if axis < 0 else axis
    return op.reshape(xs[0], (int(np.prod(shape[:axis])), int(np.prod(shape[axis:]))))


def _transpose(node, xs):
    perm = node.attrs.get("perm") or list(range(ndim_of(xs[0])))[::-1]
    return op.permute_dims(xs[0], axes=perm)


def _unsqueeze(node, xs):
    shape = list(_shape(xs[0]))
    axes = sorted(a % (len(shape) + len(_ints(node, xs[1], "axes"))) for a in _ints(node, xs[1], "axes"))
    for a in axes:
        shape.insert(a, 1)
    return op.reshape(xs[0], tuple(shape))


def _squeeze(node, xs):
    shape = _shape(xs[0])
    axes = {a % len(shape) for a in _ints(node, xs[1], "axes")} if len(xs) > 1 and xs[1] is not None else \
        {i for i, d in enumerate(shape) if d == 1}
    return op.reshape(xs[0], tuple(d for i, d in enumerate(shape) if i not in axes))


def _slice(node, xs):
    x = xs[0]
    starts, ends = _ints(node, xs[1], "starts"), _ints(node, xs[2], "ends")
    axes = _ints(node, xs[3], "axes") if len(xs) > 3 and xs[3] is not None else list(range(len(starts)))
    steps = _ints(node, xs[4], "steps") if len(xs) > 4 and xs[4] is not None else [1] * len(starts)
    shape = _shape(x)
    axes = [a % len(shape) for a in axes]
    clamp = lambda v, a: max(min(v, shape[a]), -shape[a] - 1)  # noqa: E731 - INT64_MAX means "to the end"
    return op.strided_slice(x, axes=axes, begin=[clamp(s, a) for s, a in zip(starts, axes)],
                            end=[clamp(e, a) for e, a in zip(ends, axes)], strides=steps)


def _expand(node, xs):
    shape = np.broadcast_shapes(_shape(xs[0]), tuple(_ints(node, xs[1], "the shape")))
    return op.broadcast_to(xs[0], shape)


def _shape_of(node, xs):
    shape = _shape(xs[0])
    if not all(isinstance(d, int) for d in shape):
        raise node.fail(f"Shape of a tensor with symbolic dims {shape}; fix them with shape_dict")
    lo, hi = node.attrs.get("start", 0), node.attrs.get("end", len(shape))
    return const(np.array(shape[lo:hi], np.int64), "int64")


def _constant(node, xs):
    from onnx import numpy_helper

    a = node.attrs
    if "value" in a:
        value = numpy_helper.to_array(a["value"]).copy()
        return const(value, str(value.dtype))
    for key, dtype in (("value_float", np.float32), ("value_floats", np.float32), ("value_int", np.int64),
                       ("value_ints", np.int64)):
        if key in a:
            return const(np.array(a[key], dtype), np.dtype(dtype).name)
    raise node.fail(f"a Constant with {sorted(a)} is not supported")


def _constant_of_shape(node, xs):
    from onnx import numpy_helper

    fill = numpy_helper.to_array(node.attrs["value"]) if "value" in node.attrs else np.zeros(1, np.float32)
    return const(np.full(_ints(node, xs[0], "the shape"), fill.reshape(-1)[0], fill.dtype), str(fill.dtype))


def _mod(node, xs):
    """``Mod``: the sign of the divisor (``floor_mod``), or of the dividend with ``fmod=1`` (``mod``); folded when
    both operands are known (shape arithmetic)."""
    known = [_known(x) for x in xs[:2]]
    if all(k is not None for k in known):
        folded = (np.fmod if node.attrs.get("fmod", 0) else np.mod)(*known)
        return const(folded, str(folded.dtype))
    return (op.mod if node.attrs.get("fmod", 0) else op.floor_mod)(xs[0], xs[1])


def _clip(node, xs):
    """``Clip(x, min, max)`` (bounds as inputs since opset 11; either may be left out). With ``min > max`` ONNX
    gives ``max`` everywhere (``Min(max, Max(x, min))``), which Relax's ``clip`` refuses: clipped to ``[max, max]``."""
    bound = lambda i, default: float(_need(node, xs[i], "a Clip bound")) if len(xs) > i and xs[i] is not None \
        else default  # noqa: E731
    lo, hi = bound(1, -np.inf), bound(2, np.inf)
    return op.clip(xs[0], min=min(lo, hi), max=hi)


def _hard_sigmoid(x: Expr, alpha: float, beta: float) -> Expr:
    """``HardSigmoid``: ``max(0, min(1, alpha * x + beta))``, in float32 for half floats and rounded once (rounded
    at each step, bfloat16's ``HardSigmoid(-2.484)`` was 0.00195 where ONNX and PyTorch give 0.00313)."""
    return in_float32(x, lambda x: _hard_sigmoid_of(x, alpha, beta))


def _hard_sigmoid_of(x: Expr, alpha: float, beta: float) -> Expr:
    return op.clip(op.add(op.multiply(x, scalar_like(alpha, x)), scalar_like(beta, x)), min=0.0, max=1.0)


def _hard_swish(node, xs):
    """``HardSwish``: ``x * HardSigmoid(x, 1/6, 1/2)``, in float32 for half floats and rounded once."""
    return in_float32(xs[0], lambda x: op.multiply(x, _hard_sigmoid_of(x, 1.0 / 6.0, 0.5)))


def _arg(fn: Callable) -> Callable:
    """``ArgMax``/``ArgMin`` along ``axis``: the first of equal values, or with ``select_last_index=1`` the last (the
    first along the flipped axis, counted back from the end)."""
    def convert(node, xs):
        x = xs[0]
        axis = _axis(node, node.attrs.get("axis", 0), ndim_of(x))
        keepdims = bool(node.attrs.get("keepdims", 1))
        if not node.attrs.get("select_last_index", 0):
            return fn(x, axis=axis, keepdims=keepdims)
        first = fn(op.flip(x, axis=axis), axis=axis, keepdims=keepdims)
        return op.subtract(scalar_like(_shape(x)[axis] - 1, first), first)
    return convert


def _pad_value(node, value) -> float:
    """Pad's ``constant_value``: a scalar, or a tensor of one element (ONNX's Attention function body writes
    ``[0]``; NumPy 2 no longer makes a float of a 1-D array)."""
    array = np.asarray(value)
    if array.size != 1:
        raise node.fail(f"constant_value has {array.size} elements (shape {array.shape}); expected one")
    return float(array.reshape(()))


def _pad(node, xs):
    """``Pad(x, pads, constant_value, axes)``: ONNX's pads list every begin, then every end. ``constant`` mode pads
    with the value; ``edge``, ``reflect`` (without repeating the edge) and ``wrap`` read the padded positions from
    the input, one ``take`` per padded axis at indices computed while importing."""
    mode = node.attrs.get("mode", "constant")
    if mode not in ("constant", "edge", "reflect", "wrap"):
        raise node.fail(f"mode={mode!r}; expected 'constant', 'edge', 'reflect' or 'wrap'")
    pads = _ints(node, xs[1], "pads")
    value = _pad_value(node, _need(node, xs[2], "the pad value")) if len(xs) > 2 and xs[2] is not None else 0.0
    rank = ndim_of(xs[0])
    axes = [a % rank for a in _ints(node, xs[3], "axes")] if len(xs) > 3 and xs[3] is not None else list(range(rank))
    if any(p < 0 for p in pads):
        raise node.fail(f"negative pads {pads} (cropping) are not supported")
    width = [0] * (2 * rank)
    for i, a in enumerate(axes):
        width[2 * a], width[2 * a + 1] = pads[i], pads[i + len(axes)]
    if mode == "constant":
        return op.nn.pad(xs[0], pad_width=width, pad_value=value)
    x = xs[0]
    for axis in range(rank):
        before, after = width[2 * axis], width[2 * axis + 1]
        if before or after:
            n = _shape(x)[axis]
            if n == 0 or (mode == "reflect" and n == 1):
                raise node.fail(f"mode={mode} pads axis {axis} of size {n}; expected a size of at least "
                                f"{2 if mode == 'reflect' else 1}")
            x = op.take(x, const(_pad_indices(mode, n, before, after), "int64"), axis=axis)
    return x


def _pad_indices(mode: str, n: int, before: int, after: int) -> np.ndarray:
    """The input positions of an axis of ``n`` padded with ``before`` and ``after`` in ``mode`` (NumPy's
    ``edge``, ``reflect`` and ``wrap``, which ONNX's reference is)."""
    i = np.arange(-before, n + after)
    if mode == "edge":
        return np.clip(i, 0, n - 1)
    if mode == "wrap":
        return np.mod(i, n)
    period = 2 * (n - 1)  # reflect: back and forth, the edges not repeated
    i = np.mod(i, period)
    return np.where(i < n, i, period - i)


def _split(node, xs):
    """``Split(x, split)`` along ``axis``: sizes given, else ``num_outputs`` (or the outputs') equal parts."""
    x, axis = xs[0], _axis(node, node.attrs.get("axis", 0), ndim_of(xs[0]))
    n = _shape(x)[axis]
    if len(xs) > 1 and xs[1] is not None:  # (an input since opset 13: a split attribute is refused as unknown)
        sizes = _ints(node, xs[1], "split")
    else:
        parts = node.attrs.get("num_outputs", len(node.proto.output))
        if parts < 1:
            raise node.fail(f"num_outputs={parts}; expected a positive number of parts")
        size = -(-n // parts)  # ONNX: equal parts of ceil(n / parts), the last one what is left (maybe nothing)
        sizes = [size] * (parts - 1) + [n - size * (parts - 1)]
        if sizes[-1] < 0:
            raise node.fail(f"{n} elements along axis {axis} cannot be split into {parts} parts of {size}")
    if sizes and sizes[-1] == 0 and sum(sizes) == n:  # an empty last chunk: Relax's split makes none
        empty = list(_shape(x))
        empty[axis] = 0
        return split_pieces(x, axis, sizes[:-1]) + [const(np.zeros(empty, dtype_of(x)), dtype_of(x))]
    return split_pieces(x, axis, sizes)


def _tile(node, xs):
    """``Tile``; a zero repeat (which Relax's ``tile`` refuses) makes an empty tensor, a constant."""
    repeats = _ints(node, xs[1], "repeats")
    if 0 in repeats:
        return const(np.zeros([d * r for d, r in zip(_shape(xs[0]), repeats)], dtype_of(xs[0])), dtype_of(xs[0]))
    return op.tile(xs[0], repeats=repeats)


def _cumsum(node, xs):
    """``CumSum`` along ``axis``; ``exclusive`` leaves each element out of its own sum, ``reverse`` sums from the
    end (the running sum of the flipped tensor, flipped back)."""
    axis = _axis(node, int(np.ravel(_need(node, xs[1], "the axis"))[0]), ndim_of(xs[0]))
    reverse = bool(node.attrs.get("reverse", 0))
    x = op.flip(xs[0], axis=axis) if reverse else xs[0]
    y = op.cumsum(x, axis=axis, exclusive=bool(node.attrs.get("exclusive", 0)))
    return op.flip(y, axis=axis) if reverse else y


def _conv_transpose(node, xs):
    """``ConvTranspose`` (2-D and 3-D; 1-D as 2-D of height 1). ``output_shape`` or ``auto_pad=SAME_*`` (an output
    of ``in * stride``) sets the total padding ``stride * (in - 1) + output_padding + dilated kernel - out``, split
    as ONNX's specification says (the odd one at the start, except for ``SAME_UPPER``); a negative end (an output
    longer than the full one) becomes more output padding."""
    x, w = xs[0], xs[1]
    if ndim_of(x) == 3 and ndim_of(w) == 3:  # 1-D: as 2-D of height 1
        _check_per_axis(node, x, 1)
        y = _conv_transpose(_unit_height(node), [op.expand_dims(x, axis=2), op.expand_dims(w, axis=2), *xs[2:]])
        return op.squeeze(y, axis=[2])
    n = ndim_of(x) - 2
    if n not in (2, 3) or ndim_of(w) != ndim_of(x):
        raise node.fail(f"input {_shape(x)}, weight {_shape(w)}: only 1-D, 2-D and 3-D transposed convolution "
                        "is supported (input and weight of rank 3, 4 or 5)")
    auto_pad = node.attrs.get("auto_pad", "NOTSET")
    spatial = _spatial(node, xs, n, same=False)
    _check_kernel(node, w)
    extra = list(node.attrs.get("output_padding", [0] * n))
    if "output_shape" in node.attrs or auto_pad.startswith("SAME"):
        sizes, kernel = _shape(x)[2:], _shape(w)[2:]
        out = node.attrs.get("output_shape") or [size * s for size, s in zip(sizes, spatial["strides"])]
        if len(out) != n:
            raise node.fail(f"output_shape {out}: expected the {n} spatial sizes")
        totals = [s * (size - 1) + e + (k - 1) * d + 1 - o for size, s, e, k, d, o in
                  zip(sizes, spatial["strides"], extra, kernel, spatial["dilation"], out)]
        pads = list(_split_pads(totals, upper=auto_pad == "SAME_UPPER"))
        if min(pads[:n]) < 0:
            raise node.fail(f"output_shape {out} is longer than the full output at its start (pads {pads})")
        extra = [e - min(end, 0) for e, end in zip(extra, pads[n:])]
        spatial["padding"] = tuple(pads[:n] + [max(end, 0) for end in pads[n:]])
    conv = op.nn.conv3d_transpose if n == 3 else op.nn.conv2d_transpose
    y = conv(x, w, groups=node.attrs.get("group", 1), output_padding=tuple(extra), **spatial)
    if len(xs) > 2 and xs[2] is not None:
        y = op.add(y, op.reshape(xs[2], (1, -1) + (1,) * n))
    return y


def _unit_height(node: _Node) -> _Node:
    """A 1-D conv's node as a 2-D one's of height 1: its per-axis attributes with a unit height before each (a window,
    stride, dilation and output size of 1, no padding)."""
    lifted = copy.copy(node)
    lifted.attrs = dict(node.attrs)
    for name, unit in (("kernel_shape", 1), ("strides", 1), ("dilations", 1), ("output_padding", 0),
                       ("output_shape", 1)):
        if name in node.attrs:
            lifted.attrs[name] = [unit, *node.attrs[name]]
    if "pads" in node.attrs:
        lifted.attrs["pads"] = [0, node.attrs["pads"][0], 0, node.attrs["pads"][1]]
    return lifted


#: Resize's nearest modes in which a whole scale factor repeats each pixel: PyTorch's export (asymmetric, floor) and
#: ONNX's defaults (half_pixel, round_prefer_floor).
_REPEATING = {("asymmetric", "floor"), ("half_pixel", "round_prefer_floor"),
              ("pytorch_half_pixel", "round_prefer_floor")}


def _resize(node, xs):
    """``Resize``: the output sizes and per-axis scales as ONNX defines them (``floor(in * scale)`` for scales; for
    sizes, the scale ``size / in``, or with ``keep_aspect_ratio_policy`` (opset 18) the smallest (``not_larger``)
    or largest (``not_smaller``) of the sizes' ratios for every given axis, the sizes being that scale times the
    input's rounded half up), then each resized axis in turn. Nearest resizing by a whole scale in the modes where
    that repeats each pixel is a ``repeat``; every other mode, coordinate mode and scale (linear, cubic,
    ``tf_crop_and_resize`` ...) reads the pixels and weights :mod:`.onnx_resize` computes while importing."""
    x = xs[0]
    attrs = node.attrs
    mode, coordinates = attrs.get("mode", "nearest"), attrs.get("coordinate_transformation_mode", "half_pixel")
    nearest_mode = attrs.get("nearest_mode", "round_prefer_floor")
    if mode not in ("nearest", "linear", "cubic") or coordinates not in onnx_resize.COORDINATE_MODES or \
            nearest_mode not in onnx_resize.NEAREST_MODES:
        raise node.fail(f"mode={mode!r}, coordinate_transformation_mode={coordinates!r}, nearest_mode="
                        f"{nearest_mode!r}: expected ONNX's (mode nearest, linear or cubic; coordinate mode one of "
                        f"{', '.join(onnx_resize.COORDINATE_MODES)}; nearest mode one of "
                        f"{', '.join(onnx_resize.NEAREST_MODES)})")
    if mode == "nearest" and attrs.get("antialias", 0):
        raise node.fail("antialias=1 with mode nearest; ONNX antialiases linear and cubic resizing only")
    shape = _shape(x)
    axes = [a % len(shape) for a in node.attrs.get("axes", range(len(shape)))]  # opset 18: the axes given
    scales, given = _resize_sizes(node, xs, shape, axes)
    roi = None
    if coordinates == "tf_crop_and_resize":
        values = [float(v) for v in np.ravel(_need(node, xs[1] if len(xs) > 1 else None, "roi"))]
        if len(values) != 2 * len(axes):
            raise node.fail(f"roi has {len(values)} values; expected {2 * len(axes)}, a start and an end for each "
                            "resized axis")
        roi = {axis: (values[i], values[i + len(axes)]) for i, axis in enumerate(axes)}
    if mode == "nearest" and (coordinates, nearest_mode) in _REPEATING and \
            all(s == int(s) and s >= 1 and n == shape[ax] * int(s) for ax, s, n in zip(axes, scales, given)):
        for ax, n in zip(axes, given):
            if n != shape[ax]:
                x = op.repeat(x, repeats=n // shape[ax], axis=ax)
        return x
    dtype = dtype_of(x)
    if mode != "nearest":
        x = op.astype(x, onnx_resize.compute_dtype(dtype)) if onnx_resize.compute_dtype(dtype) != dtype else x
    for ax, s, n in zip(axes, scales, given):
        span = None if roi is None else roi[ax]
        if np.isclose(s, 1.0) and n == shape[ax] and (span is None or np.allclose(span, (0.0, 1.0))):
            continue  # (as ONNX's reference: an axis scaled by 1 is left as it is)
        if n == 0:
            raise node.fail(f"resizing axis {ax} from {shape[ax]} to 0 (scale {s:g}); expected a positive size")
        indices, weights, outside = onnx_resize.interpolation(
            mode, coordinates, shape[ax], n, s, roi=span, nearest_mode=nearest_mode,
            cubic_coeff_a=float(attrs.get("cubic_coeff_a", -0.75)),
            exclude_outside=bool(attrs.get("exclude_outside", 0)), antialias=bool(attrs.get("antialias", 0)))
        x = onnx_resize.resize_axis(x, ax, indices, weights, outside, float(attrs.get("extrapolation_value", 0.0)),
                                    nearest=mode == "nearest")
    return onnx_resize.cast_back(x, dtype)


def _resize_sizes(node, xs, shape, axes) -> tuple[list[float], list[int]]:
    """Resize's per-axis scales (what coordinates are mapped with) and output sizes, from ``sizes`` or ``scales``."""
    policy = node.attrs.get("keep_aspect_ratio_policy", "stretch")
    if policy not in ("stretch", "not_larger", "not_smaller"):
        raise node.fail(f"keep_aspect_ratio_policy={policy} is not an ONNX policy")
    if len(xs) > 3 and xs[3] is not None:
        given = _ints(node, xs[3], "sizes")
        if len(given) != len(axes):
            raise node.fail(f"{len(given)} sizes for {len(axes)} axes")
        scales = [n / shape[a] for a, n in zip(axes, given)]
        if policy != "stretch":  # one scale for every given axis; its sizes are rounded half up
            scale = (min if policy == "not_larger" else max)(scales)
            scales, given = [scale] * len(axes), [int(scale * shape[a] + 0.5) for a in axes]
        return scales, given
    if len(xs) < 3 or xs[2] is None:  # (both are optional inputs; ONNX requires one of them)
        raise node.fail("neither scales nor sizes is given; expected one of them")
    scales = [float(s) for s in np.ravel(_need(node, xs[2], "scales"))]
    if len(scales) != len(axes):
        raise node.fail(f"{len(scales)} scales for {len(axes)} axes")
    if any(s <= 0 for s in scales):
        raise node.fail(f"scales {scales}; expected positive scales")
    return scales, [int(np.floor(shape[a] * s)) for a, s in zip(axes, scales)]  # ONNX: floor(in * scale)


def _instance_norm(node, xs):
    """``InstanceNormalization``: a group norm with one group per channel."""
    x, scale, bias = xs[:3]
    channels = _shape(x)[1]
    return op.nn.group_norm(x, scale, bias, num_groups=channels, channel_axis=1, axes=list(range(2, ndim_of(x))),
                            epsilon=float(node.attrs.get("epsilon", 1e-5)))


def _depth_to_space(node, xs):
    """``DepthToSpace``: channel blocks to pixels; ``DCR`` (the default) reads the block before the channel,
    ``CRD`` the channel before the block (``pixel_shuffle``'s order)."""
    x, b, mode = xs[0], node.attrs["blocksize"], node.attrs.get("mode", "DCR")
    n, c, h, w = _shape(x)
    if mode not in ("DCR", "CRD"):
        raise node.fail(f"mode={mode!r}; expected 'DCR' or 'CRD'")
    if b < 1:
        raise node.fail(f"blocksize={b}; expected a positive blocksize")
    if c % (b * b):
        raise node.fail(f"{c} channels do not make blocks of blocksize**2 = {b * b}; expected a multiple of it")
    if mode == "CRD":
        return op.nn.pixel_shuffle(x, upscale_factor=b)
    blocks = op.reshape(x, (n, b, b, c // (b * b), h, w))
    return op.reshape(op.permute_dims(blocks, axes=[0, 3, 4, 1, 5, 2]), (n, c // (b * b), h * b, w * b))


def _trilu(node, xs):
    k = int(np.ravel(_need(node, xs[1], "k"))[0]) if len(xs) > 1 and xs[1] is not None else 0
    return (op.triu if node.attrs.get("upper", 1) else op.tril)(xs[0], k=k)


def _cast(node, xs):
    dtype = _np_dtype(node.attrs["to"])
    if dtype is None:
        raise node.fail(f"to={node.attrs['to']} is not an ONNX element type")
    return op.astype(xs[0], str(dtype))



def _cast_like(node, xs):
    """``CastLike``: ``Cast`` to the second input's element type (its values unused). ``saturate`` and
    ``round_mode`` concern 8- and 4-bit float targets only, which no Relax tensor holds (such an input is refused)."""
    return op.astype(xs[0], dtype_of(xs[1]))


def _size(node, xs):
    """``Size``: the element count as a 0-d int64, evaluated while importing (as ``Shape`` is)."""
    shape = _shape(xs[0])
    if not all(isinstance(d, int) for d in shape):
        raise node.fail(f"Size of a tensor with symbolic dims {shape}; fix them with shape_dict")
    return const(np.array(int(np.prod(shape, dtype=np.int64)), np.int64), "int64")


def _dropout(node, xs):
    """``Dropout``: Relax's dropout in training mode (its mask output is not produced), else the input itself with
    an all-true mask. Relax's dropout draws its mask only in the training step ``SetupTrainer`` makes (from the
    key the trainer passes); the module as imported runs it as the identity, which no ONNX runtime computes for
    ``training_mode=True``: a warning says so, naming the node."""
    ratio = float(_need(node, xs[1], "the ratio")) if len(xs) > 1 and xs[1] is not None else 0.5
    training = len(xs) > 2 and xs[2] is not None and bool(_need(node, xs[2], "training_mode"))
    if training and ratio > 0:
        warnings.warn(f"{FRONTEND}: node {node.name} (Dropout): training_mode=True with ratio {ratio:g} imports as "
                      "Relax's dropout, which drops nothing when the module is run as imported (compiled or "
                      "interpreted); only SetupTrainer's training step draws its random mask. Export the model in "
                      "inference mode to run it, or train it through SetupTrainer", UserWarning, stacklevel=2)
        return [TupleGetItem(op.nn.dropout(xs[0], rate=ratio), 0)] + [None] * (len(node.proto.output) - 1)
    # inference (or a zero ratio): the input as it is, and a mask that keeps everything
    return [xs[0], const(np.ones(_shape(xs[0]), bool), "bool")][:len(node.proto.output)]


def _gather(node, xs):
    return op.take(xs[0], xs[1], axis=node.attrs.get("axis", 0))


def _concat(node, xs):
    return op.concat(list(xs), axis=_axis(node, node.attrs["axis"], ndim_of(xs[0])))


#: ONNX's defaults of Selu's attributes (float32 values of SELU's constants).
_SELU_ALPHA, _SELU_GAMMA = 1.67326319217681884765625, 1.05070102214813232421875


def _celu(node, xs):
    """``Celu(x, alpha)``: ``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``, an ELU of input scale 1 / alpha."""
    alpha = node.attrs.get("alpha", 1.0)
    if alpha == 0:
        raise node.fail("alpha 0 is not supported")
    return elu(xs[0], alpha, 1.0, 1.0 / alpha)


def _gelu(node, xs):
    return (op.nn.gelu_tanh if node.attrs.get("approximate", "none") == "tanh" else op.nn.gelu)(xs[0])


# -- elementwise math, bits, selection and scatter ------------------------------------------------------------

def _is_inf(node, xs):
    """``IsInf``: ``detect_negative`` and ``detect_positive`` (both 1 by default) say which infinities count."""
    x = xs[0]
    negative, positive = node.attrs.get("detect_negative", 1), node.attrs.get("detect_positive", 1)
    if negative and positive:
        return op.isinf(x)
    if not (negative or positive):
        return const(np.zeros(_shape(x), bool), "bool")
    return op.logical_and(op.isinf(x), (op.greater if positive else op.less)(x, scalar_like(0.0, x)))


def _bit_shift(node, xs):
    """``BitShift`` of unsigned integers, and of signed ones (opset 28: the right shift is arithmetic). Relax has no
    shift: ``x * 2**s`` (left, wrapping) or ``floor(x / 2**s)`` (right), ``2**s`` taken from a table of the dtype's
    powers of two. A count the table lacks gives what ONNX defines: a count outside ``[0, width)`` gives what the
    sign alone gives (-1 for a right shift of a negative ``x``, else 0; a CPU takes the count modulo the width),
    and a signed right shift by ``width - 1`` is that sign fill too (the table's ``2**(width - 1)`` is negative)."""
    x, s = xs
    direction, dtype = node.attrs.get("direction"), dtype_of(x)
    if direction not in ("LEFT", "RIGHT"):
        raise node.fail(f"direction={direction!r}; expected 'LEFT' or 'RIGHT'")
    if dtype not in _SHIFTED or dtype_of(s) != dtype:
        raise node.fail(f"shifts of {dtype} by {dtype_of(s)}: ONNX's BitShift takes two tensors of one integer "
                        "dtype (unsigned, or signed since opset 28)")
    signed, bits = np.dtype(dtype).kind == "i", np.dtype(dtype).itemsize * 8
    last = bits - 2 if signed and direction == "RIGHT" else bits - 1  # the largest count the table serves
    powers = const(np.left_shift(np.ones(last + 1, dtype), np.arange(last + 1, dtype=dtype)), dtype)
    count = op.minimum(op.maximum(s, scalar_like(0, s)), scalar_like(last, s))
    index = op.astype(count, "int64")  # (a take's indices are signed)
    divide = op.floor_divide if signed else op.divide
    shifted = (op.multiply if direction == "LEFT" else divide)(x, op.take(powers, index, axis=0))
    fill = scalar_like(0, x)
    if signed and direction == "RIGHT":
        fill = op.where(op.less(x, fill), scalar_like(-1, x), fill)
    served = op.less_equal(s, scalar_like(last, s))
    if signed:
        served = op.logical_and(served, op.greater_equal(s, scalar_like(0, s)))
    return op.where(served, shifted, fill)


#: ``BitShift``'s element types: ONNX's unsigned integers, and the signed ones opset 28 added.
_SHIFTED = ("uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64")


def _top_k(node, xs):
    """``TopK(X, K)``: the ``K`` largest (``largest=0``: smallest) along ``axis`` and their int64 indices, ties in
    order of position (the reference evaluator's order). ``sorted=0`` leaves the order to the implementation: the
    sorted one is kept. ``K`` must be known while importing; ``K = 0`` gives empty outputs."""
    x = xs[0]
    k = _ints(node, xs[1], "K")
    axis = _axis(node, node.attrs.get("axis", -1), ndim_of(x))
    n = _shape(x)[axis]
    if len(k) != 1 or not 0 <= k[0] <= n:
        raise node.fail(f"K={k[0] if len(k) == 1 else k} must be one number in [0, {n}], the size of axis {axis} "
                        f"of X {_shape(x)}")
    if k[0] == 0:
        empty = tuple(0 if i == axis else d for i, d in enumerate(_shape(x)))
        return [const(np.zeros(empty, dtype_of(x)), dtype_of(x)), const(np.zeros(empty, np.int64), "int64")]
    top = op.topk(x, k=k[0], axis=axis, largest=bool(node.attrs.get("largest", 1)), dtype="int64")
    return [TupleGetItem(top, 0), TupleGetItem(top, 1)]


def _range(node, xs):
    """``Range(start, limit, delta)``, computed while importing (its size is its operands' values): NumPy's
    ``arange``, whose size ``max(ceil((limit - start) / delta), 0)`` and values ``start + i * delta`` are ONNX's."""
    start, limit, delta = (_need(node, x, what).reshape(()) for x, what in zip(xs, ("start", "limit", "delta")))
    if delta == 0:
        raise node.fail("delta is 0")
    values = np.arange(start.item(), limit.item(), delta.item()).astype(start.dtype)
    return const(values, str(values.dtype))


def _one_hot(node, xs):
    """``OneHot(indices, depth, values)``: ``values[1]`` where an index equals the position along the new ``axis``,
    ``values[0]`` elsewhere. A negative index counts from ``depth``; one outside ``[-depth, depth)`` gives
    ``values[0]`` all along (ONNX's rule; Relax's ``one_hot`` raises ``IndexError``), hence a comparison with
    ``arange(depth)``, in the indices' dtype (a float index that is not whole matches nothing, as in the
    reference evaluator). ``depth`` must be known while importing; ``values`` may be computed at run time."""
    indices, values = xs[0], xs[2]
    depth = _need(node, xs[1], "depth")
    if depth.size != 1 or int(depth.reshape(())) < 1:
        raise node.fail(f"depth must be one positive number, got {depth.tolist()}")
    depth, rank = int(depth.reshape(())), ndim_of(indices)  # ONNX casts a float depth to int64
    axis = _axis(node, node.attrs.get("axis", -1), rank + 1)
    wrapped = op.where(op.less(indices, scalar_like(0, indices)), op.add(indices, scalar_like(depth, indices)), indices)
    positions = const(np.arange(depth).reshape((depth,) + (1,) * (rank - axis)), dtype_of(indices))
    hot = op.equal(op.expand_dims(wrapped, axis=axis), positions)
    off, on = (op.take(values, const(i, "int64"), axis=0) for i in (0, 1))
    return op.where(hot, on, off)


#: ONNX's reductions of ScatterElements and ScatterND, as Relax's ``scatter_elements`` names them.
_SCATTER_REDUCTIONS = {"none": "update", "add": "add", "mul": "mul", "min": "min", "max": "max"}


def _scatter_reduction(node) -> str:
    reduction = node.attrs.get("reduction", "none")
    if reduction not in _SCATTER_REDUCTIONS:
        raise node.fail(f"reduction={reduction!r}; expected one of {', '.join(_SCATTER_REDUCTIONS)}")
    return _SCATTER_REDUCTIONS[reduction]


def _scatter_elements(node, xs):
    data, indices, updates = xs
    axis = _axis(node, node.attrs.get("axis", 0), ndim_of(data))
    return op.scatter_elements(data, indices, updates, axis=axis, reduction=_scatter_reduction(node))


def _scatter_nd(node, xs):
    """``ScatterND(data, indices, updates)``: each row of ``indices`` (its last axis, ``k`` numbers) addresses an
    element of ``data`` (``k`` = its rank), a slice (of its last ``rank - k`` axes), or with ``k = 0`` the whole of
    ``data``. Relax has no such op: it is ``scatter_elements`` on the flattened data at the flat position of every
    element written, each index first checked on its own axis (:func:`_checked_index`): a flat position outside
    one axis could land on another row, and would name neither the index nor the axis."""
    data, indices, updates = xs
    shape, rows = _shape(data), _shape(indices)
    k, inner = rows[-1], shape[rows[-1]:]
    if k > len(shape) or _shape(updates) != rows[:-1] + inner:
        raise node.fail(f"indices {rows} and updates {_shape(updates)} do not fit data {shape}: updates must be "
                        "indices.shape[:-1] + data.shape[indices.shape[-1]:]")
    total = int(np.prod(shape))
    index = op.astype(indices, "int64") if dtype_of(indices) != "int64" else indices
    flat = None  # the flat position of each row's first element
    for axis in range(k):
        term, stride = _checked_index(index, axis, shape[axis]), int(np.prod(shape[axis + 1:]))
        term = term if stride == 1 else op.multiply(term, const(stride, "int64"))
        flat = term if flat is None else op.add(flat, term)
    if flat is None:  # k = 0: each row of updates is the whole data
        flat = const(np.zeros(rows[:-1], np.int64), "int64")
    within = const(np.arange(int(np.prod(inner)), dtype=np.int64).reshape(inner), "int64")
    positions = op.add(op.reshape(flat, rows[:-1] + (1,) * len(inner)), within)
    scattered = op.scatter_elements(op.reshape(data, (total,)), op.reshape(positions, (-1,)),
                                    op.reshape(updates, (-1,)), axis=0, reduction=_scatter_reduction(node))
    return op.reshape(scattered, shape)


def _checked_index(index: Expr, axis: int, size: int) -> Expr:
    """Column ``axis`` of ScatterND's ``index`` (the rows' positions along that axis of the data) in ``[0, size)``:
    a ``take`` from ``arange(size)`` laid along ``axis``, so a negative index counts from the end (as NumPy's, the
    reference's) and one outside the axis raises ``IndexError`` naming its value, the axis and its size."""
    rows = _shape(index)[:-1]
    column = op.reshape(op.strided_slice(index, axes=[-1], begin=[axis], end=[axis + 1]), rows)
    positions = const(np.arange(size, dtype=np.int64).reshape((1,) * axis + (size,)), "int64")
    checked = op.take(positions, column, axis=axis)
    return checked if axis == 0 else op.reshape(checked, rows)


def _lrn(node, xs):
    """``LRN``: ``x / (bias + alpha / size * s) ** beta``, ``s`` the sum of squares over the channels from
    ``c - floor((size - 1) / 2)`` to ``c + ceil((size - 1) / 2)`` (those that exist): the squares padded with
    zeros along the channels and ``size`` shifted slices added."""
    x, size = xs[0], node.attrs.get("size")
    if not isinstance(size, int) or size < 1:
        raise node.fail(f"size={size!r}; LRN needs a positive int size")
    alpha, beta, bias = node.attrs.get("alpha", 1e-4), node.attrs.get("beta", 0.75), node.attrs.get("bias", 1.0)
    rank, channels = ndim_of(x), _shape(x)[1]
    before, after = (size - 1) // 2, size // 2  # floor and ceil of (size - 1) / 2
    width = [0] * (2 * rank)
    width[2], width[3] = before, after
    padded = op.nn.pad(op.multiply(x, x), pad_width=width, pad_value=0.0)
    window = functools.reduce(op.add, [op.strided_slice(padded, axes=[1], begin=[i], end=[i + channels])
                                       for i in range(size)])
    scale = op.add(scalar_like(bias, x), op.multiply(window, scalar_like(alpha / size, x)))
    return op.divide(x, op.power(scale, scalar_like(beta, x)))


def _lp_normalization(node, xs):
    """``LpNormalization``: ``x`` over its L1 (``p=1``) or L2 (``p=2``, the default) norm along ``axis``; a zero norm
    gives 0 (the reference evaluator's rule), through a divisor of 1 there, so that no NaN reaches a gradient."""
    x, p = xs[0], node.attrs.get("p", 2)
    axis = _axis(node, node.attrs.get("axis", -1), ndim_of(x))
    if p not in (1, 2):
        raise node.fail(f"p={p}; ONNX's LpNormalization takes p=1 or p=2")
    norm = op.sum(op.abs(x), axis=[axis], keepdims=True) if p == 1 else \
        op.sqrt(op.sum(op.multiply(x, x), axis=[axis], keepdims=True))
    zero = op.equal(norm, scalar_like(0.0, x))
    return op.divide(x, op.where(zero, scalar_like(1.0, x), norm))


def _hardmax(node, xs):
    """``Hardmax``: 1 at the first largest element along ``axis``, 0 elsewhere, in the input's dtype."""
    x = xs[0]
    axis = _axis(node, node.attrs.get("axis", -1), ndim_of(x))
    return op.one_hot(op.argmax(x, axis=axis), on_value=1.0, off_value=0.0, depth=_shape(x)[axis], axis=axis,
                      dtype=dtype_of(x))


#: Each recurrent op's gate order (see :class:`.rnn.Cell`) and the activations it takes per direction: ONNX's
#: defaults, and an RNN's ``Relu`` (PyTorch's ``nonlinearity="relu"``).
_RECURRENT = {"LSTM": ("iofg", [["Sigmoid", "Tanh", "Tanh"]]), "GRU": ("zrn", [["Sigmoid", "Tanh"]]),
              "RNN": ("", [["Tanh"], ["Relu"]])}


def _recurrent(node, xs):
    """``LSTM``/``GRU``/``RNN`` (inputs ``X, W, R, B, sequence_lens, initial_h[, initial_c, P]``), unrolled by
    :mod:`.rnn` over the static sequence length: each direction's slices of ``W``, ``R`` and ``B`` are PyTorch's
    weights in ONNX's gate order. What the unrolled cell does not compute is refused naming the node."""
    kind = node.op_type.lower()
    order, allowed = _RECURRENT[node.op_type]
    x, w, r = xs[:3]
    for i, name, why in ((4, "sequence_lens", ": every sequence of the batch is as long as the input"),
                         (7, "P", " (peepholes)")):
        if len(xs) > i and xs[i] is not None:
            raise node.fail(f"input {i} ({name}) is not supported{why}; expected it left out")
    for name, default in (("clip", None), ("input_forget", 0)):
        if node.attrs.get(name, default) != default:
            raise node.fail(f"{name}={node.attrs[name]} is not supported; expected it left out")
    direction, layout = node.attrs.get("direction", "forward"), node.attrs.get("layout", 0)
    if direction not in ("forward", "reverse", "bidirectional") or layout not in (0, 1):
        raise node.fail(f"direction={direction!r}, layout={layout}: expected direction forward, reverse or "
                        "bidirectional and layout 0 or 1")
    directions = 2 if direction == "bidirectional" else 1
    activations = node.attrs.get("activations", allowed[0] * directions)
    width = len(allowed[0])  # (onnxruntime reads the names in any case)
    per = {tuple(a.lower() for a in activations[i:i + width]) for i in range(0, len(activations), width)}
    if len(activations) != width * directions or len(per) != 1 or \
            not per <= {tuple(a.lower() for a in names) for names in allowed}:
        raise node.fail(f"activations {activations} are not supported; expected {' or '.join(map(str, allowed))} "
                        f"for each of the {directions} direction(s)")
    hidden = _shape(r)[-1]
    gates = rnn.GATES[kind] * hidden
    b = xs[3] if len(xs) > 3 else None
    shapes = {"W": (w, (directions, gates, _shape(x)[-1])), "R": (r, (directions, gates, hidden)),
              "B": (b, (directions, 2 * gates))}
    wrong = [f"{k} {_shape(v)} (expected {want})" for k, (v, want) in shapes.items()
             if v is not None and _shape(v) != want]
    if node.attrs.get("hidden_size", hidden) != hidden:
        raise node.fail(f"hidden_size={node.attrs['hidden_size']} disagrees with R {_shape(r)}, whose last dim is the "
                        "hidden size")
    if wrong:
        raise node.fail(f"with hidden size {hidden}, input size {_shape(x)[-1]} and direction={direction}: "
                        f"{'; '.join(wrong)}")
    cell = rnn.Cell(kind, order, op.nn.relu if per == {("relu",)} else op.tanh,
                    bool(node.attrs.get("linear_before_reset", 0)))
    if layout:
        x = op.permute_dims(x, axes=[1, 0, 2])
    states = [_initial_state(xs, i, layout, x, hidden, directions) for i in ((5, 6) if kind == "lstm" else (5,))]
    trace, sequences, finals = [], [], []
    w, r = (split_pieces(v, 0, [1] * directions) for v in (w, r))
    b = [None] * directions if b is None else split_pieces(b, 0, [1] * directions)
    for d, state in enumerate(zip(*states)):
        b_d = (None, None) if b[d] is None else split_pieces(op.squeeze(b[d], axis=[0]), 0, [gates, gates])
        weights = rnn.Weights(op.squeeze(w[d], axis=[0]), op.squeeze(r[d], axis=[0]), *b_d)
        outputs, final = rnn.run(cell, x, state, weights, direction == "reverse" or d == 1, trace)
        sequences.append(op.expand_dims(op.concat(outputs, axis=0), axis=1))
        finals.append(final)
    results = [op.concat(sequences, axis=1)] + [op.concat([f[i] for f in finals], axis=0) for i in range(len(states))]
    wanted = [v if name else None for v, name in zip(results, node.proto.output)]
    if layout:
        wanted = [v if v is None else op.permute_dims(v, axes=[2, 0, 1, 3] if i == 0 else [1, 0, 2])
                  for i, v in enumerate(wanted)]
    return rnn.in_order(wanted, trace)


def _initial_state(xs, i: int, layout: int, x: Expr, hidden: int, directions: int) -> list[Expr]:
    """Initial state input ``i`` as each direction's (1, batch, hidden); zeros where it is left out."""
    state = xs[i] if len(xs) > i and xs[i] is not None else None
    if state is None:
        state = rnn.zeros_state(x, hidden, directions)
    elif layout:
        state = op.permute_dims(state, axes=[1, 0, 2])
    return split_pieces(state, 0, [1] * directions)


CONVERTERS: dict[str, Callable] = {
    "LSTM": _recurrent, "GRU": _recurrent, "RNN": _recurrent,
    "Add": _binary(op.add), "Sub": _binary(op.subtract), "Mul": _binary(op.multiply), "Div": _binary(op.divide),
    "Pow": _pow, "Max": _variadic(op.maximum),
    "Greater": _binary(op.greater), "Less": _binary(op.less), "GreaterOrEqual": _binary(op.greater_equal),
    "LessOrEqual": _binary(op.less_equal), "Not": _unary(op.logical_not), "And": _binary(op.logical_and),
    "Or": _binary(op.logical_or), "Xor": _binary(op.logical_xor), "Clip": _clip,
    "HardSigmoid": lambda node, xs: _hard_sigmoid(xs[0], node.attrs.get("alpha", 0.2), node.attrs.get("beta", 0.5)),
    "HardSwish": _hard_swish,
    "Elu": lambda node, xs: elu(xs[0], node.attrs.get("alpha", 1.0)),
    "Selu": lambda node, xs: elu(xs[0], node.attrs.get("alpha", _SELU_ALPHA), node.attrs.get("gamma", _SELU_GAMMA)),
    "Celu": _celu, "Mish": lambda node, xs: mish(xs[0]),
    "PRelu": lambda node, xs: op.where(op.less(xs[0], scalar_like(0.0, xs[0])), op.multiply(xs[0], xs[1]), xs[0]),
    "Softplus": _unary(op.nn.softplus), "ArgMax": _arg(op.argmax), "ArgMin": _arg(op.argmin), "Pad": _pad,
    "Sum": lambda node, xs: functools.reduce(op.add, xs), "Mean": lambda node, xs: op.divide(
        functools.reduce(op.add, xs), scalar_like(float(len(xs)), xs[0])),
    "Tile": _tile, "Split": _split,
    "CumSum": _cumsum, "Resize": _resize, "InstanceNormalization": _instance_norm,
    "DepthToSpace": _depth_to_space, "Trilu": _trilu, "ConvTranspose": _conv_transpose,
    "Einsum": lambda node, xs: op.einsum(list(xs), subscripts=node.attrs["equation"].replace(" ", "")),
    "ReduceL2": lambda node, xs: op.sqrt(_reduce(op.sum)(node, [op.multiply(xs[0], xs[0])] + list(xs[1:]))),
    "ReduceL1": lambda node, xs: _reduce(op.sum)(node, [op.abs(xs[0])] + list(xs[1:])),
    "Min": _variadic(op.minimum), "Equal": _binary(op.equal),
    "Where": lambda node, xs: op.where(*xs), "MatMul": _binary(op.matmul), "Gemm": _gemm, "Mod": _mod,
    "Relu": _unary(op.nn.relu), "Sigmoid": _unary(op.sigmoid), "Tanh": _unary(op.tanh), "Exp": _unary(op.exp),
    "Log": _unary(op.log), "Sqrt": _unary(op.sqrt), "Erf": _unary(op.erf), "Neg": _unary(op.negative),
    "Abs": _unary(op.abs), "Floor": _unary(op.floor), "Ceil": _unary(op.ceil), "Identity": lambda node, xs: xs[0],
    "Reciprocal": lambda node, xs: op.divide(scalar_like(1.0, xs[0]), xs[0]), "Gelu": _gelu,
    "LeakyRelu": lambda node, xs: op.nn.leakyrelu(xs[0], alpha=node.attrs.get("alpha", 0.01)),
    "Softmax": _softmax(op.nn.softmax), "LogSoftmax": _softmax(op.nn.log_softmax),
    "Conv": _conv, "MaxPool": _pool(op.nn.max_pool2d, op.nn.max_pool3d),
    "AveragePool": _pool(op.nn.avg_pool2d, op.nn.avg_pool3d,
                         count_include_pad=lambda a: bool(a.get("count_include_pad", 0))),
    "LpPool": _lp_pool,
    "GlobalAveragePool": lambda node, xs: op.mean(xs[0], axis=list(range(2, ndim_of(xs[0]))), keepdims=True),
    "BatchNormalization": _batch_norm, "LayerNormalization": _layer_norm, "Dropout": _dropout,
    "ReduceMean": _reduce(op.mean), "ReduceSum": _reduce(op.sum), "ReduceMax": _reduce(op.max),
    "ReduceMin": _reduce(op.min),
    "Reshape": _reshape, "Flatten": _flatten, "Transpose": _transpose, "Unsqueeze": _unsqueeze, "Squeeze": _squeeze,
    "Slice": _slice, "Expand": _expand, "Concat": _concat, "Gather": _gather, "Cast": _cast,
    "Shape": _shape_of, "Constant": _constant, "ConstantOfShape": _constant_of_shape,
    "Sin": _unary(op.sin), "Cos": _unary(op.cos), "Tan": _unary(op.tan), "Asin": _unary(op.asin),
    "Acos": _unary(op.acos), "Atan": _unary(op.atan), "Sinh": _unary(op.sinh), "Cosh": _unary(op.cosh),
    "Asinh": _unary(op.asinh), "Acosh": _unary(op.acosh), "Atanh": _unary(op.atanh), "Sign": _unary(op.sign),
    "Round": _unary(op.round), "IsNaN": _unary(op.isnan), "IsInf": _is_inf, "BitShift": _bit_shift,
    "BitwiseAnd": _binary(op.bitwise_and), "BitwiseOr": _binary(op.bitwise_or), "BitwiseXor": _binary(op.bitwise_xor),
    "BitwiseNot": _unary(op.bitwise_not), "TopK": _top_k, "Range": _range, "OneHot": _one_hot,
    "GatherElements": lambda node, xs: op.gather_elements(
        xs[0], xs[1], axis=_axis(node, node.attrs.get("axis", 0), ndim_of(xs[0]))),
    "ScatterElements": _scatter_elements, "ScatterND": _scatter_nd, "LRN": _lrn,
    "LpNormalization": _lp_normalization, "Hardmax": _hardmax,
    "CastLike": _cast_like, "Size": _size, "NegativeLogLikelihoodLoss": _nll_loss,
    "SoftmaxCrossEntropyLoss": _softmax_cross_entropy, "RMSNormalization": _rms_norm, "Attention": _attention,
    **onnx_ops.converters(_reduce, _conv),
}

# Inputs these ops read as running statistics: they are states, updated by the op.
_STATE_INPUTS = {"BatchNormalization": (3, 4)}
#: Float inputs read as values while importing (a Clip bound, Resize's roi and scales, Pad's value, Dropout's
#: ratio, Range's operands, OneHot's depth and values): an initializer there is a constant, not a parameter (as one,
#: it was refused as computed at run time).
_VALUE_INPUTS = {"Clip": (1, 2), "Resize": (1, 2), "Pad": (2,), "Dropout": (1,), "Range": (0, 1, 2), "OneHot": (1, 2)}


def from_onnx(model, keep_params_in_input: bool = True, shape_dict: Optional[Mapping[str, Sequence[int]]] = None,
              *, func_name: str = "main") -> ImportedModel:
    """Import an ONNX model (a ``ModelProto`` or a path): ``mod, params, states = from_onnx(model)``.

    ``mod[func_name]`` takes the graph inputs, then the float initializers (parameters), then the batch-norm
    running statistics (states), and returns the output (a tuple if several), or ``(output, new states...)``;
    ``param_num``/``state_num`` are set for ``SetupTrainer``. ``params``/``states`` map argument names to NumPy
    values. With ``keep_params_in_input=False`` every initializer is a constant. ``shape_dict`` fixes input shapes
    (needed where an input has a symbolic dimension). Every op without a converter is listed in one
    :class:`UnsupportedOpsError` before anything is built.
    """
    model = _load(model)
    graph = model.graph
    opset = _opset(model)
    nodes = [_Node(n, opset) for n in graph.node]
    check_supported(FRONTEND, ((_op_key(n), n.name) for n in nodes), CONVERTERS)
    for node in nodes:
        schema = _schema(node, opset)
        if schema is not None:  # (without one, e.g. an op newer than the opset, the converter's own checks apply)
            _check_input_count(node, schema)
            _check_attributes(node, schema, opset)
    sig = _Signature(graph, nodes, keep_params_in_input, dict(shape_dict or {}))
    mod = build_main(sig.inputs, sig.params, sig.states, lambda bb: _convert(bb, graph, nodes, sig), func_name)
    return ImportedModel(mod, sig.values(sig.params), sig.values(sig.states))


def _load(model):
    import onnx

    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if os.path.isdir(path):
            raise IsADirectoryError(f"{FRONTEND}: {path}: a directory; expected a .onnx file")
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{FRONTEND}: {path}: no such file")
        try:
            model = onnx.load(path)
        except Exception as exc:  # protobuf's DecodeError and kin: the file is not an ONNX model
            raise ValueError(f"{FRONTEND}: {path}: not an ONNX model ({type(exc).__name__}: {exc})") from None
        if not model.HasField("graph"):  # protobuf reads an empty file (or a few stray bytes) as an empty model
            what = "an empty file" if os.path.getsize(path) == 0 else "it has no graph"
            raise ValueError(f"{FRONTEND}: {path}: not an ONNX model ({what})")
    if not isinstance(model, onnx.ModelProto):
        raise TypeError(f"{FRONTEND}: expected an onnx.ModelProto or a path to a .onnx file, "
                        f"got {type(model).__name__}")
    opset = _opset(model)
    if opset is None or opset < MIN_OPSET:
        raise ValueError(f"{FRONTEND}: the model uses ONNX opset {opset}; opset {MIN_OPSET} or later is supported "
                         "(convert it with onnx.version_converter.convert_version(model, 17))")
    return model


def _opset(model) -> Optional[int]:
    """The version of the default (``ai.onnx``) operator set the model imports."""
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)


def _schema(node: _Node, opset: int):
    """ONNX's schema of the node's op in the model's opset (``onnx.defs.OpSchema``), or None where ONNX has none."""
    from onnx import defs

    domain = node.proto.domain if node.proto.domain != "ai.onnx" else ""
    try:
        return defs.get_schema(node.op_type, opset, domain)
    except defs.SchemaError:
        return None


def _check_input_count(node: _Node, schema) -> None:
    """The node has as many inputs as its op takes in the model's opset (ONNX's schema says how many) and none it
    needs left empty: the converters read inputs by position, so one missing was an ``IndexError`` (or a None
    handed to an op) and one too many was dropped without a word."""
    from onnx import defs

    given, least, most = list(node.proto.input), schema.min_input, schema.max_input
    formal = [f.name if f.option != defs.OpSchema.FormalParameterOption.Optional else f"[{f.name}]"
              for f in schema.inputs]
    if schema.inputs and schema.inputs[-1].option == defs.OpSchema.FormalParameterOption.Variadic:
        formal[-1] += "..."
    count = f"{least} input{'s' * (least != 1)}" if least == most else \
        f"at least {least} input{'s' * (least != 1)}" if most > 2 ** 30 else f"{least} to {most} inputs"
    if not least <= len(given) <= most:
        raise node.fail(f"takes {count} ({', '.join(formal) or 'none'}), got {len(given)}")
    empty = [i for i in range(least) if not given[i]]
    if empty:
        name = formal[min(empty[0], len(formal) - 1)]
        raise node.fail(f"input {empty[0]} ({name}) is required, but its name is empty")


#: Ops whose schema lets a node carry attributes it does not list (``AllowUncheckedAttributes`` in ONNX's C++, which
#: its Python ``OpSchema`` does not expose): ``onnx.checker`` and onnxruntime accept any attribute there.
_UNCHECKED_ATTRIBUTES = frozenset({"LayerNormalization"})


def _check_attributes(node: _Node, schema, opset: int) -> None:
    """The node gives every attribute its op requires in the model's opset, none the schema does not list, and each
    the schema's type (as ``onnx.checker`` demands, an INT ``alpha`` for a FLOAT one included): the converters
    read attributes by name and type, so a missing one was a ``KeyError`` and one of another type an
    ``AttributeError``/``KeyError``, or was read as something else (a STRING ``reverse`` is true, an INT
    ``kernel_shape`` was never looked at by ``Conv``); one the schema does not list was ignored, or read where an
    older opset had it (``Split``'s ``split``, an input since opset 13, was read, and an INT one a ``TypeError``)."""
    from onnx import AttributeProto

    missing = sorted(name for name, a in schema.attributes.items() if a.required and name not in node.attrs)
    if missing:
        raise node.fail(f"missing the required attribute{'s' * (len(missing) > 1)} {', '.join(missing)}")
    for a in node.proto.attribute:
        expected = schema.attributes.get(a.name)
        if expected is None and node.op_type not in _UNCHECKED_ATTRIBUTES:
            raise node.fail(f"attribute {a.name} is not an attribute of {node.op_type} at opset {opset} "
                            f"({_unlisted_because(schema, a.name)})")
        given = AttributeProto.AttributeType.Name(a.type)
        if expected is not None and given != expected.type.name:
            raise node.fail(f"attribute {a.name} has type {given}; expected {expected.type.name}")


def _unlisted_because(schema, name: str) -> str:
    """Why ``name`` is not an attribute of the schema's op: it became an input, or ONNX removed it, at the version
    found by walking back through the op's earlier schemas; else (never an attribute) the ones it has."""
    from onnx import defs

    later = schema
    while later.since_version > 1:
        try:
            earlier = defs.get_schema(schema.name, later.since_version - 1, schema.domain)
        except defs.SchemaError:  # (no version before: the op is newer)
            break
        if name in earlier.attributes:
            if any(f.name == name for f in later.inputs):
                return f"it became an input at {later.since_version}"
            return f"ONNX removed it at {later.since_version}"
        later = earlier
    return f"its attributes: {', '.join(sorted(schema.attributes))}" if schema.attributes else "it has none"


def _op_key(node: _Node) -> str:
    domain = node.proto.domain
    return node.op_type if domain in ("", "ai.onnx") else f"{domain}.{node.op_type}"


class _Signature:
    """The graph's inputs and initializers as Relax values: user inputs, parameters, states, constants."""

    def __init__(self, graph, nodes: list[_Node], keep_params: bool, shape_dict: dict[str, Sequence[int]]):
        self.env: dict[str, Any] = {}
        self.arrays: dict[Var, np.ndarray] = {}
        self.inputs, self.params, self.states = [], [], []
        stateful = {n.proto.input[i] for n in nodes for i in _STATE_INPUTS.get(n.op_type, ()) if i < len(n.proto.input)}
        valued = {n.proto.input[i] for n in nodes for i in _VALUE_INPUTS.get(n.op_type, ()) if i < len(n.proto.input)}
        names = Names()
        initializers = {t.name: _initializer_array(t) for t in graph.initializer}
        inputs = [v.name for v in graph.input if v.name not in initializers]
        unknown = sorted(set(shape_dict) - set(inputs))  # (before an input's own complaint: a misspelt name first)
        if unknown:
            listed = ", ".join(inputs) or "none"
            problem = f"names {', '.join(unknown)}, which are not graph inputs; its inputs: {listed}"
            raise ShapeDictError(f"{FRONTEND}: shape_dict {problem}", f"{FRONTEND}: --shape {problem}")
        for value in graph.input:
            if value.name not in initializers:
                self.inputs.append(self._input(value, names, shape_dict))
        for name, array in initializers.items():
            if keep_params and is_floating(array.dtype) and name not in valued:
                var = tensor_var(names(name), array.shape, str(array.dtype))
                (self.states if name in stateful else self.params).append(var)
                self.arrays[var] = array
                self.env[name] = var
            else:
                self.env[name] = const(array, str(array.dtype))

    def _input(self, value, names: Names, shape_dict) -> Var:
        tensor = value.type.tensor_type
        if not value.type.HasField("tensor_type"):
            raise ValueError(f"{FRONTEND}: input {value.name} is not a tensor")
        dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in tensor.shape.dim]
        shape = tuple(shape_dict.get(value.name, dims))
        if not all(isinstance(d, int) for d in shape):
            problem = f"{FRONTEND}: input {value.name} has the symbolic shape {tuple(dims)}; give its size with"
            sizes = ",".join(str(d) if isinstance(d, int) else f"<{d}>" for d in dims)
            raise ShapeDictError(f"{problem} shape_dict={{{value.name!r}: (...)}}",
                                 f"{problem} --shape {value.name}={sizes}")
        dtype = _np_dtype(tensor.elem_type)
        if dtype is None:  # (was a bare KeyError)
            raise OnnxImportError(f"{FRONTEND}: input {value.name}: element type {_type_name(tensor.elem_type)} is "
                                  "not a tensor element type")
        _check_relax_dtype(f"input {value.name}", tensor.elem_type, dtype)
        var = tensor_var(names(value.name), shape, str(dtype))
        self.env[value.name] = var
        return var

    def values(self, variables: Sequence[Var]) -> dict[str, np.ndarray]:
        return {v.name_hint: self.arrays[v] for v in variables}


def _type_name(onnx_type: int) -> str:
    """``FLOAT`` for 1, ``99 (not an ONNX type)`` for 99."""
    from onnx import TensorProto

    known = onnx_type in TensorProto.DataType.values()
    return TensorProto.DataType.Name(onnx_type) if known else f"{onnx_type} (not an ONNX type)"


def _initializer_array(tensor) -> np.ndarray:
    """An initializer's array. A malformed one (element type UNDEFINED or unknown, data of another size than its
    dims), or one of an element type no Relax tensor holds, is refused naming it, rather than with onnx's, NumPy's
    or Relax's bare TypeError, KeyError or ValueError."""
    from onnx import numpy_helper

    try:
        array = numpy_helper.to_array(tensor).copy()
    except (TypeError, KeyError, ValueError) as exc:
        raise OnnxImportError(f"{FRONTEND}: initializer {tensor.name}: element type {_type_name(tensor.data_type)}, "
                              f"dims {list(tensor.dims)}: not a readable tensor ({type(exc).__name__}: {exc}); "
                              "expected data of a known element type that fills its dims") from None
    _check_relax_dtype(f"initializer {tensor.name}", tensor.data_type, array.dtype)
    return array


def _check_relax_dtype(what: str, onnx_type: int, dtype: np.dtype) -> None:
    """An input's or initializer's element type is one a Relax tensor holds: a STRING, complex or 8-bit float one
    was Relax's bare ``ValueError`` (``unknown dtype 'object'``), which did not say which value had it."""
    if str(dtype) not in DTYPES:
        from onnx import TensorProto

        held = [TensorProto.DataType.Name(t) for t in TensorProto.DataType.values() if str(_np_dtype(t)) in DTYPES]
        raise OnnxImportError(f"{FRONTEND}: {what}: element type {_type_name(onnx_type)} is not supported; expected "
                              f"one of {', '.join(held)}")


def _convert(bb, graph, nodes: list[_Node], sig: _Signature) -> tuple[list[Expr], list[Expr]]:
    env, new_state = sig.env, {}
    unproduced: dict[str, _Node] = {}  # an output the importer does not produce -> its node
    for node in nodes:
        for name in node.proto.input:
            if name in unproduced:
                raise node.fail(f"it reads {name}, output {list(unproduced[name].proto.output).index(name)} of "
                                f"node {unproduced[name].name} ({unproduced[name].op_type}), which the importer "
                                "does not produce")
            if name and name not in env:
                raise node.fail(f"its input {name} is produced by no node, graph input or initializer before it")
        xs = [env[name] if name else None for name in node.proto.input]
        outputs = list(node.proto.output)
        try:
            result = CONVERTERS[_op_key(node)](node, xs)
            if isinstance(result, Updates):
                values = emit_updates(bb, result, _hint(outputs[0]), sig.states, new_state)
            else:
                values = result if isinstance(result, list) else [result]
                values = [v if v is None else _bind(bb, fold(v), out) for v, out in zip(values, outputs)]
        except OnnxImportError:
            raise
        except (ValueError, TypeError) as exc:  # a Relax op's own check: said of the ONNX node it came from
            raise node.fail(str(exc)) from exc
        values = list(values) + [None] * (len(outputs) - len(values))
        for out, value in zip(outputs, values):
            if out and value is None:
                unproduced[out] = node
            elif out:
                env[out] = value
    missing = [v.name_hint for v in sig.states if v not in new_state]
    if missing:
        raise OnnxImportError(f"{FRONTEND}: the running statistics {', '.join(missing)} are also used elsewhere "
                              "than as a BatchNormalization's mean and variance")
    outputs = []
    for value in graph.output:
        if value.name in unproduced:
            producer = unproduced[value.name]
            raise producer.fail(f"its output {list(producer.proto.output).index(value.name)} ({value.name}), a graph "
                                "output, is not produced by the importer")
        if env.get(value.name) is None:
            raise OnnxImportError(f"{FRONTEND}: graph output {value.name} is not produced by the importer")
        outputs.append(env[value.name])
    return outputs, [new_state[v] for v in sig.states]


def _bind(bb, value: Expr, output: str) -> Expr:
    return value if isinstance(value, (Var, Constant)) else bb.emit(value, _hint(output))


def _hint(onnx_name: str) -> str:
    """``/layer/linear1/MatMul_output_0`` -> ``layer_linear1_MatMul``: a readable binding name."""
    return Names()(onnx_name.replace("_output_0", ""))
