"""The ATen op table of :mod:`relax_mlir.frontend.torch`: ``CONVERTERS`` maps each core ATen op
(``aten.addmm.default``) to ``convert(node, args, kwargs)``, which gets the node's arguments with graph nodes
replaced by Relax values and returns a Relax expression, a list of them (an op with several results; None for
a result it does not produce) or :class:`~.common.Updates` (an op that also updates states: batch norm)."""

from __future__ import annotations

import contextlib
import contextvars
import warnings
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from .. import op
from ..ir import sym
from ..ir.dtype import to_numpy
from ..ir.expr import Expr, TupleGetItem, const
from ..ir.sym import Dim, SymDim
from .common import Updates, dtype_of, elu, in_float32, mish, ndim_of, scalar_like, split_pieces
from . import rnn

FRONTEND = "from_exported_program"


class TorchImportError(ValueError):
    """A node the importer knows but cannot convert as it stands (an argument value it does not support)."""


def node_error(node, what: str) -> TorchImportError:
    target = str(node.target)
    if target.startswith("<"):  # a Python function (operator.mul, torch.sym_max): its name, not its repr
        target = getattr(node.target, "__name__", target)
    return TorchImportError(f"{FRONTEND}: node {node.name} ({target}): {what}")


# -- symbolic sizes ---------------------------------------------------------------------------------------------

class _Unrepresentable(ValueError):
    """A torch size no Relax size expresses (said of the size, the caller names the node)."""


class SymbolicSizes:
    """torch.export's dynamic sizes as Relax dimensions (:mod:`relax_mlir.ir.sym`).

    torch records a dynamic size as a ``torch.SymInt`` whose ``node.expr`` is a sympy expression over its symbols
    (``s77``, ``2*s77``, ``s27*s52``, ``FloorDiv(s77, 2)``). A symbol that is a dimension of an input becomes the
    Relax size variable of that name, as TVM's importer names its ``tir.Var`` (``torch.export.Dim("batch")`` is
    ``s77`` in the program: torch does not keep the name); sums, products, non-negative powers and floor quotients
    of those become the same expressions of the variables. A root symbol that only a derived dimension of an input
    carries (``dynamic_shapes={"y": {0: 2 * batch}}`` with no input of size ``batch``: ``y`` is ``(2*s26,)``)
    defines no variable as it stands (the parameter ``(2 * s26,)`` cannot bind ``s26``): that dimension gets a
    variable of its own, ``y_dim0``, and ``s26`` is ``y_dim0 // 2``. A size over any other symbol (``u0``, the
    count of a ``nonzero`` or an ``.item()``: known only when it runs) or another function (``Max``, ``Mod``) is
    refused, naming the node; torch's range constraints (``min``/``max``) are not checked.

    ``strict=False`` (converters called outside an import) reads every symbol as the variable of its name."""

    def __init__(self, inputs: Sequence = (), strict: bool = True):
        self.strict = strict
        self.roots: dict[str, Dim] = {}  # torch symbol name -> its Relax dim
        self.known: dict[Any, Dim] = {}  # an input dimension's sympy expression -> its Relax dim
        dims = [(node, axis, _sympy(d)) for node in inputs for axis, d in enumerate(node.meta["val"].shape)]
        for node, _, expr in dims:
            if expr.is_Symbol and str(expr) not in self.roots:
                self.roots[str(expr)] = self._variable(str(expr), node)
        for node, axis, expr in dims:
            if expr not in self.known and not expr.is_Integer and not expr.is_Symbol \
                    and any(str(s) not in self.roots for s in expr.free_symbols):
                self._define_derived(node, axis, expr)

    def _variable(self, name: str, node) -> SymDim:
        try:
            return sym.SizeVar(name)
        except ValueError as exc:
            raise _input_error(node, f"its size {name!r} is no Relax size name: {exc}") from None

    def _define_derived(self, node, axis: int, expr) -> None:
        """``expr`` (``a*s + b``, ``s`` no input's size by itself) is an input dimension: a variable of its own,
        and ``s`` is ``(variable - b) // a``."""
        undefined = [s for s in expr.free_symbols if str(s) not in self.roots]
        root = undefined[0] if len(undefined) == 1 else None
        scale = expr.coeff(root) if root is not None else None
        rest = expr - scale * root if root is not None else None
        if root is None or not scale.is_Integer or scale <= 0 or root in rest.free_symbols:
            raise _input_error(node, f"dimension {axis} is {expr}, which defines none of its sizes "
                               f"({', '.join(sorted(map(str, undefined)))}): give an input the size itself")
        taken = set(self.roots) | {str(d) for d in self.known.values()}
        name, i = f"{node.name}_dim{axis}", 1
        while name in taken:
            name, i = f"{node.name}_dim{axis}_{i}", i + 1
        variable = self._variable(name, node)
        self.known[expr] = variable
        self.roots[str(root)] = sym.floor_div(variable - self._convert(rest), int(scale))

    def dim(self, value, node) -> Dim:
        """A dimension torch recorded (an int or a ``torch.SymInt``) as a Relax dimension."""
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        expr = _sympy(value)
        try:
            return self._convert(expr)
        except _Unrepresentable as exc:
            raise node_error(node, f"the size {expr} {exc}") from None

    def shape(self, shape, node) -> tuple[Dim, ...]:
        return tuple(self.dim(d, node) for d in shape)

    def _convert(self, expr) -> Dim:
        if expr in self.known:
            return self.known[expr]
        if expr.is_Integer:
            return int(expr)
        if expr.is_Symbol:
            return self._symbol(str(expr))
        if expr.is_Add:
            return sum((self._convert(a) for a in expr.args), 0)
        if expr.is_Mul:
            return sym.product(self._convert(a) for a in expr.args)
        if expr.is_Pow and expr.exp.is_Integer and expr.exp >= 0:
            return sym.product([self._convert(expr.base)] * int(expr.exp))
        if type(expr).__name__ in ("FloorDiv", "CleanDiv"):  # torch.utils._sympy.functions
            a, b = (self._convert(e) for e in expr.args)
            try:
                return sym.divide(a, b)
            except ValueError as exc:
                raise _Unrepresentable(f"cannot be a Relax size: {exc}") from None
        raise _Unrepresentable(f"uses {type(expr).__name__}, which a Relax size cannot express (sizes are sums, "
                               "products and floor quotients by an int of input sizes)")

    def _symbol(self, name: str) -> Dim:
        if name in self.roots:
            return self.roots[name]
        if not self.strict:
            return sym.SizeVar(name)
        raise _Unrepresentable(f"depends on {name}, which is no input's size: a size known only when the program "
                               "runs (the count of a nonzero, a boolean mask or .item()) cannot be a Relax size")


def _input_error(node, what: str) -> TorchImportError:
    return TorchImportError(f"{FRONTEND}: input {node.name}: {what}")


def _sympy(value):
    """The sympy expression of a ``torch.SymInt`` (or an int)."""
    import sympy

    return sympy.Integer(value) if isinstance(value, int) else value.node.expr


_SIZES: contextvars.ContextVar[SymbolicSizes] = contextvars.ContextVar("torch_sizes",
                                                                       default=SymbolicSizes(strict=False))


@contextlib.contextmanager
def using_sizes(sizes: SymbolicSizes) -> Iterator[SymbolicSizes]:
    """The converters read torch's sizes through ``sizes`` (an import's inputs) inside the block."""
    token = _SIZES.set(sizes)
    try:
        yield sizes
    finally:
        _SIZES.reset(token)


def shape_of(shape, node) -> tuple[Dim, ...]:
    """A shape torch recorded (ints and ``torch.SymInt``s) as Relax dimensions."""
    return _SIZES.get().shape(shape, node)


#: Ops that only assert conditions on sizes (torch's runtime checks): the conditions they take have no value.
ASSERTS = ("aten._assert_scalar.default", "aten.sym_constrain_range_for_size.default",
           "aten.sym_constrain_range.default")


def size_value(node):
    """The value of a node computing a number from sizes (``aten.sym_size.int``, ``operator.mul`` of sizes): a
    Relax dimension; None for a condition only assertions read (the range constraints are not checked)."""
    import torch

    val = node.meta["val"]
    if isinstance(val, (bool, torch.SymBool)):
        if all(str(user.target) in ASSERTS for user in node.users):
            return None
        raise node_error(node, f"a condition on sizes ({val}) used as a value is not supported")
    if isinstance(val, float):
        return val
    if isinstance(val, torch.SymFloat):
        raise node_error(node, f"the float {val} computed from sizes is not supported (only integer arithmetic on "
                         "sizes is imported)")
    return _SIZES.get().dim(val, node)


def static_dim(d: Dim, node, what: str) -> int:
    """``d`` where a converter needs a static size: a symbolic one is refused naming the node and ``what``."""
    if isinstance(d, int):
        return d
    raise node_error(node, f"{what} is the symbolic size {d}; only a static size is supported here (export "
                     "without a dynamic size there)")


# -- helpers for converters --------------------------------------------------------------------------------------

def _operand(value, like: Expr) -> Expr:
    if isinstance(value, SymDim):
        return _size_tensor(value, dtype_of(like))
    return value if isinstance(value, Expr) else scalar_like(value, like)


def _size_tensor(size: Dim, dtype: str) -> Expr:
    """A size as a 0-d tensor of ``dtype`` (``x.sum(1) / x.shape[1]``): no Relax op reads a size variable into a
    tensor, so it is the sum of as many int64 ones, whose shape carries the size. A shape cannot be negative, so an
    expression with negative terms (``-s``, ``s - 1`` where ``s`` may be 0: clamp bounds) is its positive terms'
    count less its negative terms' count."""
    if isinstance(size, int):
        return const(size, dtype)
    positive, negative = _signed_parts(size)
    count = _count(positive)
    if negative != 0:
        count = op.subtract(count, _count(negative))
    return count if dtype == "int64" else op.astype(count, dtype)


def _signed_parts(size: SymDim) -> tuple[Dim, Dim]:
    """``size`` as ``positive - negative``, each a sum of ``size``'s terms with non-negative coefficients."""
    positive, negative = 0, 0
    for monomial, coefficient in size.terms:
        term = abs(coefficient) * sym.product(sym.factor_dim(f) for f in monomial)
        positive, negative = (positive + term, negative) if coefficient > 0 else (positive, negative + term)
    return positive, negative


def _count(size: Dim) -> Expr:
    """A size that is never negative as a 0-d int64 tensor: the sum of that many ones."""
    return const(size, "int64") if isinstance(size, int) else op.sum(op.ones((size,), "int64"))


def _out_shape(node) -> tuple[Dim, ...]:
    """The shape of a node's (first) result, from the fake tensor torch.export recorded: ints, and the Relax
    sizes of its symbolic dimensions."""
    val = node.meta["val"]
    val = val[0] if isinstance(val, (tuple, list)) else val
    return shape_of(val.shape, node)


def result_dtype(node) -> str | None:
    """The dtype PyTorch gave a node's (first) result, from the fake tensor torch.export recorded."""
    val = node.meta.get("val")
    val = val[0] if isinstance(val, (tuple, list)) and val else val
    return torch_dtype(val.dtype) if hasattr(val, "dtype") else None


def _binary(fn: Callable, compare: bool = False) -> Callable:
    """``aten.<op>.Tensor`` / ``.Scalar``: either operand may be a Python number. Operands are first brought to
    the dtype PyTorch's type promotion gave the result (``int_tensor / 2`` and ``int_tensor * 0.5`` are float32,
    ``int32 + float32`` float32; Relax's ops take one dtype); a comparison's to the promoted dtype of its inputs."""
    def convert(node, args, kwargs):
        a, b = args[0], args[1]
        dtype = _promoted(node) if compare else result_dtype(node)
        if dtype is not None and (compare or dtype != "bool"):
            a, b = (op.astype(x, dtype) if isinstance(x, Expr) and dtype_of(x) != dtype else x for x in (a, b))
        if not isinstance(a, Expr):
            a = _operand(a, b)
        alpha = kwargs.get("alpha", 1)
        if alpha != 1:
            b = op.multiply(_operand(b, a), scalar_like(alpha, a))
        return fn(a, _operand(b, a))
    return convert


def _promoted(node) -> str | None:
    """The dtype PyTorch computes a comparison in: its operands' (``torch.result_type``: a Python number does not
    widen a tensor of its kind)."""
    import torch

    values = [a.meta.get("val") if hasattr(a, "meta") else a for a in node.args[:2]]
    if len(values) != 2 or any(v is None for v in values):
        return None
    return torch_dtype(torch.result_type(*values))


def _unary(fn: Callable) -> Callable:
    return lambda node, args, kwargs: fn(args[0])


def _identity(node, args, kwargs):
    return args[0]


def _reshape(node, args, kwargs):
    return op.reshape(args[0], _out_shape(node))


def _view(node, args, kwargs):
    """``view``/``reshape(x, shape)`` to its shape argument (numbers, sizes the program read, one -1), not to the
    shape torch recorded, which can hold forms of the same size no Relax size expresses (``reshape(-1, 2, 3)`` of
    ``(s, 3)`` records ``(s//2, s//(s//2), 3)``). A -1 is the element count divided by the other sizes' product:
    exactly, or floor-divided by a static product (torch checked that it divides)."""
    x, shape = args[0], list(args[1])
    if -1 not in shape:
        return op.reshape(x, shape)
    at = shape.index(-1)
    count, known = sym.product(x.struct_info.shape), sym.product(shape[:at] + shape[at + 1:])
    inferred = sym.exact_div(count, known) if known != 0 else None
    if inferred is None and isinstance(known, int) and known > 0:
        inferred = sym.floor_div(count, known)
    if inferred is None:
        inferred = _out_shape(node)[at]
    return op.reshape(x, shape[:at] + [inferred] + shape[at + 1:])


def _expand(node, args, kwargs):
    """``expand(x, sizes)``: ``broadcast_to`` its size argument, a -1 keeping the size of ``x`` there."""
    x, sizes = args[0], list(args[1])
    own = (None,) * (len(sizes) - ndim_of(x)) + tuple(x.struct_info.shape)
    return op.broadcast_to(x, [own[i] if isinstance(d, int) and d == -1 else d for i, d in enumerate(sizes)])


def _axes(dims, ndim: int) -> list[int]:
    dims = [dims] if isinstance(dims, int) else list(dims)
    return [d % ndim for d in dims]


# -- converters, one per ATen op ----------------------------------------------------------------------------------

def _permute(node, args, kwargs):
    return op.permute_dims(args[0], axes=_axes(args[1], ndim_of(args[0])))


def _transpose(node, args, kwargs):
    x = args[0]
    axes = list(range(ndim_of(x)))
    i, j = _axes([args[1], args[2]], ndim_of(x))
    axes[i], axes[j] = axes[j], axes[i]
    return op.permute_dims(x, axes=axes)


def _t(node, args, kwargs):
    return op.permute_dims(args[0], axes=list(range(ndim_of(args[0])))[::-1])


def _pair(v, n: int) -> tuple[int, ...]:
    v = [v] if isinstance(v, int) else list(v)
    return tuple(v * n) if len(v) == 1 else tuple(v)


def _convolution(node, args, kwargs):
    x, w, bias, stride, padding, dilation, transposed, output_padding, groups = args[:9]
    nd = ndim_of(x) - 2
    if nd not in (1, 2, 3):
        raise node_error(node, f"{nd}-D convolution; only 1-D, 2-D and 3-D are supported")
    pad = _pair(padding, nd)
    attrs = dict(strides=_pair(stride, nd), padding=pad + pad, dilation=_pair(dilation, nd), groups=groups)
    if transposed:
        conv = {1: op.nn.conv1d_transpose, 2: op.nn.conv2d_transpose, 3: op.nn.conv3d_transpose}[nd]
        y = conv(x, w, output_padding=_pair(output_padding, nd), **attrs)
    else:
        y = {1: op.nn.conv1d, 2: op.nn.conv2d, 3: op.nn.conv3d}[nd](x, w, **attrs)
    if bias is None:
        return y
    return op.add(y, op.reshape(bias, (1, -1) + (1,) * nd))


def _batch_norm(training_arg: bool):
    """``_native_batch_norm_legit_functional(x, w, b, mean, var, training, momentum, eps)`` (5 results, the last
    two the new running statistics) and ``_native_batch_norm_legit_no_training(x, w, b, mean, var, momentum, eps)``
    (3 results): both become ``R.nn.batch_norm`` in its inference form (SetupTrainer switches it)."""
    def convert(node, args, kwargs):
        x, w, b, mean, var = args[:5]
        momentum, eps = (args[6], args[7]) if training_arg else (args[5], args[6])
        if not isinstance(momentum, (int, float)) or mean is None or var is None:
            raise node_error(node, "batch norm needs running statistics and a fixed momentum "
                              "(track_running_stats=True, momentum not None)")
        if not training_arg and momentum == 0:
            warnings.warn(f"{node.name}: batch norm with momentum 0.0, which an eval-mode torch.export also records "
                          "for momentum=None (a cumulative average, not supported): trained, the imported model keeps "
                          "its running statistics as they are", RuntimeWarning, stacklevel=2)
        w, b = _affine_or_identity(x, w, b, mean.struct_info.shape[0])
        bn = op.nn.batch_norm(x, w, b, mean, var, axis=1, epsilon=float(eps), momentum=float(momentum))
        results = (0, None, None, 1, 2) if training_arg else (0, None, None)
        return Updates(bn, results, {mean: 1, var: 2})
    return convert


def _max_pool2d(node, args, kwargs):
    x, kernel = args[0], _pair(args[1], 2)
    stride = _pair(args[2], 2) if len(args) > 2 and args[2] else kernel
    padding = _pair(args[3], 2) if len(args) > 3 else (0, 0)
    dilation = _pair(args[4], 2) if len(args) > 4 else (1, 1)
    ceil_mode = bool(args[5]) if len(args) > 5 else False
    y = op.nn.max_pool2d(x, pool_size=kernel, strides=stride, padding=padding + padding, dilation=dilation,
                         ceil_mode=ceil_mode)
    return [y, None]  # the indices are not produced


def _avg_pool2d(node, args, kwargs):
    x, kernel = args[0], _pair(args[1], 2)
    stride = _pair(args[2], 2) if len(args) > 2 and args[2] else kernel
    padding = _pair(_arg(args, kwargs, 3, "padding", 0), 2)
    ceil_mode = bool(_arg(args, kwargs, 4, "ceil_mode", False))
    count_include_pad = bool(_arg(args, kwargs, 5, "count_include_pad", True))
    divisor = _arg(args, kwargs, 6, "divisor_override")
    y = op.nn.avg_pool2d(x, pool_size=kernel, strides=stride, padding=padding + padding, ceil_mode=ceil_mode,
                         count_include_pad=count_include_pad or divisor is not None)
    return y if divisor is None else _override_divisor(node, y, x, kernel, stride, padding, ceil_mode, divisor)


def _override_divisor(node, y: Expr, x: Expr, kernel, stride, padding, ceil_mode: bool, divisor: int) -> Expr:
    """An average pool's ``divisor_override``: PyTorch divides each window's sum by ``divisor``. ``y`` is the pool
    with ``count_include_pad``, each sum divided by its window's positions on the input and padding, so it is
    multiplied by ``count / divisor``: per axis the count is ``k``, except a ceil-mode window hanging past the end
    padding (PyTorch's ``min(start + k, size + pad) - start``), which needs the static sizes."""
    spatial = len(kernel)
    counts = []
    for a in range(spatial):
        if not ceil_mode:
            counts.append(np.full(1, kernel[a]))
            continue
        size = static_dim(x.struct_info.shape[a - spatial], node,
                          "a spatial size of a ceil-mode average pool with divisor_override")
        n_out = y.struct_info.shape[a - spatial]  # static, as the input's sizes are
        start = np.arange(n_out) * stride[a] - padding[a]
        counts.append(np.minimum(start + kernel[a], size + padding[a]) - start)
    factor = counts[0].astype(np.float64) / divisor
    for c in counts[1:]:
        factor = np.multiply.outer(factor, c)
    if np.all(factor == factor.flat[0]):
        return op.multiply(y, scalar_like(float(factor.flat[0]), y))
    return op.multiply(y, const(factor.astype(to_numpy(dtype_of(y)))))


def _layer_norm(node, args, kwargs):
    x, normalized_shape, w, b, eps = args[:5]
    n = len(normalized_shape)
    axes = list(range(ndim_of(x) - n, ndim_of(x)))
    if w is None or b is None:
        shape = tuple(static_dim(d, node, "the normalized shape of a layer norm without weight or bias")
                      for d in normalized_shape)
    w = w if w is not None else const(np.ones(shape, np.dtype(dtype_of(x))), dtype_of(x))
    b = b if b is not None else const(np.zeros(shape, np.dtype(dtype_of(x))), dtype_of(x))
    return [op.nn.layer_norm(x, w, b, axes=axes, epsilon=float(eps)), None, None]


def _gelu(node, args, kwargs):
    approximate = kwargs.get("approximate", "none")
    return (op.nn.gelu_tanh if approximate == "tanh" else op.nn.gelu)(args[0])


def _softmax(fn):
    return lambda node, args, kwargs: fn(args[0], axis=args[1])


def _reduce(fn):
    def convert(node, args, kwargs):
        keep = bool(args[2]) if len(args) > 2 else bool(kwargs.get("keepdim", False))
        if kwargs.get("dtype") is not None:
            raise node_error(node, "a reduction with a dtype argument is not supported")
        return fn(args[0], axis=_dims(args, 1), keepdims=keep)
    return convert


def _select(node, args, kwargs):
    x, dim, index = args
    dim = dim % ndim_of(x)
    size = x.struct_info.shape[dim]
    index = index % size if isinstance(index, int) and isinstance(size, int) else _bound(index, size)
    sliced = op.strided_slice(x, axes=[dim], begin=[index], end=[index + 1])
    return op.reshape(sliced, _out_shape(node))


def _slice(node, args, kwargs):
    x = args[0]
    dim = (args[1] if len(args) > 1 else 0) % ndim_of(x)
    start = args[2] if len(args) > 2 and args[2] is not None else 0
    end = args[3] if len(args) > 3 and args[3] is not None else 2**63 - 1
    step = args[4] if len(args) > 4 else 1
    size = x.struct_info.shape[dim]
    return op.strided_slice(x, axes=[dim], begin=[_bound(start, size)], end=[_bound(end, size)], strides=[step])


def _bound(i, size: Dim) -> Dim:
    """A slice bound or an index ``i`` on an axis of ``size`` as ``strided_slice`` takes it: clamped into the axis
    (a negative one counted from its end) where both are static; on a symbolic axis, PyTorch's "to the end"
    (``2**63 - 1``) is its size and a negative bound ``size + i``; a symbolic bound as it is (torch.export checks
    that it lies in the axis)."""
    if isinstance(i, SymDim):
        return i
    if isinstance(size, int):
        return max(min(i, size), -size)
    return size if i >= 2**62 else size + i if i < 0 else i


def _embedding(node, args, kwargs):
    """``embedding(weight, indices, padding_idx=-1, ...)``: a ``take``; the rows of ``padding_idx`` get no
    gradient (PyTorch keeps that row as it is): read there through ``grad.no_grad``."""
    weight, indices = args[0], args[1]
    padding_idx = args[2] if len(args) > 2 else kwargs.get("padding_idx", -1)
    rows = op.take(weight, indices, axis=0)
    if padding_idx is None or padding_idx == -1:
        return rows
    padding_idx %= weight.struct_info.shape[0]
    at_padding = op.expand_dims(op.equal(indices, const(padding_idx, dtype_of(indices))), -1)
    return op.where(at_padding, op.grad.no_grad(rows), rows)


def _sdpa(node, args, kwargs):
    """``scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa)`` on
    (B, H, S, D): ``R.nn.attention`` works on (B, S, H, D), so transpose in and out. Grouped-query attention (k and v
    with fewer heads) repeats each k/v head for its group of query heads, as PyTorch's ``repeat_interleave``."""
    q, k, v = args[:3]
    get = lambda i, name, default: args[i] if len(args) > i else kwargs.get(name, default)  # noqa: E731
    mask, dropout_p, causal, scale = get(3, "attn_mask", None), get(4, "dropout_p", 0.0), \
        get(5, "is_causal", False), get(6, "scale", None)
    if ndim_of(q) != 4:
        raise node_error(node, f"attention on rank-{ndim_of(q)} tensors; only (batch, heads, seq, dim) is supported")
    if dropout_p:
        raise node_error(node, f"attention dropout ({dropout_p}) is not supported")
    heads, kv_heads = q.struct_info.shape[1], k.struct_info.shape[1]
    if kv_heads != heads:  # grouped-query (enable_gqa=True; PyTorch checks that kv_heads divides heads)
        k, v = (op.repeat(t, repeats=heads // kv_heads, axis=1) for t in (k, v))
    if mask is not None and dtype_of(mask) == "bool":
        mask = op.where(mask, scalar_like(0.0, q), scalar_like(float("-inf"), q))
    bsnh = [0, 2, 1, 3]
    out = op.nn.attention(*(op.permute_dims(t, axes=bsnh) for t in (q, k, v)), mask, scale=scale,
                          causal_mask="TopLeft" if causal else None)
    return op.permute_dims(out, axes=bsnh)


def _full_like(node, args, kwargs):
    dtype = kwargs.get("dtype")
    return op.full_like(args[0], fill_value=args[1], dtype=None if dtype is None else torch_dtype(dtype))


def _clamp(node, args, kwargs):
    """``clamp(x, min, max)`` (``hardtanh``): Relax's ``clip`` for numeric bounds. A symbolic bound (the replicate
    pad's ``clamp(positions, 0, size - 1)``, ``x.clamp(max=x.shape[1])``) is a size tensor, which ``clip`` does not
    take: ``where(x < min, min, x)``, then ``where(y > max, max, y)``, which is PyTorch's ``min(max(x, min), max)``
    (NaN passes) with its gradient (through where ``min <= x <= max``)."""
    x = args[0]
    lo, hi = (args[i] if len(args) > i and args[i] is not None else None for i in (1, 2))
    if not any(isinstance(b, SymDim) for b in (lo, hi)):
        return op.clip(x, min=-np.inf if lo is None else lo, max=np.inf if hi is None else hi)
    if lo is not None:
        lo = _operand(lo, x)
        x = op.where(op.less(x, lo), lo, x)
    if hi is not None:
        hi = _operand(hi, x)
        x = op.where(op.greater(x, hi), hi, x)
    return x


# -- activations at their kinks -----------------------------------------------------------------------------------
# Relax's relu, clip, leakyrelu and abs have TVM's gradients, which let the gradient through at a kink (relu'(0) = 1,
# clip's bounds inclusive, abs'(0) = 1); PyTorch's autograd does not (relu'(0) = 0, hardtanh' = 0 on its bounds,
# abs'(0) = 0, leaky_relu'(0) = its slope). That is no corner case: a ReLU input is exactly 0 wherever a zero bias
# meets an all-zero patch (an image's black border, zero padding), and every bias of the layer then trains
# differently. Each converter keeps the Relax op and picks, with a ``where`` at the kinks, the value PyTorch gives
# there (its signed zeros too: PyTorch's ``relu(-0.0)`` is ``-0.0``, Relax's ``max(x, 0)`` gives ``0.0``) through
# ``grad.no_grad``: Relax's (and TVM's) gradient of the composition is PyTorch's, the op stays readable, and a TVM
# program's relu keeps TVM's gradient.

def _is_float(x: Expr) -> bool:
    return dtype_of(x).startswith(("float", "bfloat"))


def _held_at(x: Expr, kinks: Sequence[float], value: Expr) -> Expr:
    """``value``, except ``x`` itself, through which no gradient flows, where ``x`` equals one of ``kinks``. One
    ``where`` per kink: with a ``logical_or`` of the tests a small ReLU6 CNN's compiled training step took 6% longer,
    with nested ``where`` ops no measurably longer than with ``clip`` alone."""
    held = op.grad.no_grad(x)
    for kink in dict.fromkeys(kinks):
        value = op.where(op.equal(x, scalar_like(kink, x)), held, value)
    return value


def _relu_of(x: Expr) -> Expr:
    """PyTorch's ``relu`` is ``x < 0 ? 0 : x`` with the gradient ``relu(x) <= 0 ? 0 : g``: Relax's ``relu``, and
    ``x`` (``0.0`` or ``-0.0``) with no gradient where ``x`` is 0. (NaN passes, with its gradient, in both.) Also
    an ``nn.RNN(nonlinearity="relu")``'s activation."""
    return _held_at(x, [0], op.nn.relu(x)) if _is_float(x) else op.nn.relu(x)


def _relu(node, args, kwargs):
    return _relu_of(args[0])


def _hardtanh_of(x: Expr, lo, hi) -> Expr:
    return _held_at(x, [lo, hi], op.clip(x, min=lo, max=hi)) if _is_float(x) else op.clip(x, min=lo, max=hi)


def _hardtanh(node, args, kwargs):
    """``hardtanh(x, min_val=-1, max_val=1)`` (``relu6`` is ``hardtanh(x, 0, 6)``): ``clip``, and ``x`` itself, with
    no gradient, on the bounds, where PyTorch's gradient is 0 (``clamp``'s passes there: ``aten.clamp`` stays
    ``clip``) and its value is ``x`` (``relu6(-0.0)`` is ``-0.0``)."""
    lo, hi = _arg(args, kwargs, 1, "min_val", -1.0), _arg(args, kwargs, 2, "max_val", 1.0)
    if any(isinstance(b, SymDim) for b in (lo, hi)):
        return _clamp(node, [args[0], lo, hi], {})
    return _hardtanh_of(args[0], lo, hi)


def _leaky_relu(node, args, kwargs):
    """PyTorch's ``leaky_relu`` is ``x > 0 ? x : x * slope``, its gradient ``x > 0 ? g : g * slope``: the slope at 0
    and at NaN, where Relax's ``leakyrelu`` (``x >= 0 ? x : alpha * x``, as TVM's) has 1, and ``0.0 * slope`` at
    ``0.0`` (``-0.0`` for a negative slope): ``leakyrelu`` where ``x > 0``, ``x * slope`` elsewhere."""
    x, slope = args[0], float(_arg(args, kwargs, 1, "negative_slope", 0.01))
    return op.where(op.greater(x, scalar_like(0, x)), op.nn.leakyrelu(x, alpha=slope),
                    op.multiply(x, scalar_like(slope, x)))


def _abs(node, args, kwargs):
    """PyTorch's ``abs`` has the gradient ``g * sgn(x)``: 0 at 0 (and at NaN), where Relax's (TVM's) is ``g``:
    ``|x|`` with no gradient where it is not positive."""
    x = args[0]
    if not _is_float(x):
        return op.abs(x)
    a = op.abs(x)
    return op.where(op.greater(a, scalar_like(0, a)), a, op.grad.no_grad(a))


def _hardsigmoid(node, args, kwargs):
    """``min(max(x + 3, 0), 6) / 6``, as PyTorch computes it, with its gradient: ``1/6`` inside ``(-3, 3)``, 0 on
    the bounds, outside and at NaN (``clip`` would pass on the bounds), where ``|x| < 3`` only. For a program that
    keeps ``hardsigmoid`` whole: torch's decomposition is two ``clamp`` calls, whose gradients pass on the bounds.
    Half floats compute in float32 and round once, as PyTorch's (rounded at every step, 403 of 4097 bfloat16 values
    in [-6, 6] differed)."""
    def hardsigmoid(x):
        y = op.divide(op.clip(op.add(x, scalar_like(3, x)), min=0, max=6), scalar_like(6, x))
        return op.where(op.less(op.abs(x), scalar_like(3, x)), y, op.grad.no_grad(y))
    return in_float32(args[0], hardsigmoid)


def _hardswish(node, args, kwargs):
    """``x * min(max(x + 3, 0), 6) / 6``, as PyTorch computes it, with the inner clamp a ``hardtanh``: its gradient
    is PyTorch's, 0 at -3 and 1 at 3 (``clip``'s gives -0.5 and 1.5); at NaN it is NaN, as in PyTorch's vectorized
    loop (its scalar tail gives ``g``). For a program that keeps ``hardswish`` whole, as ``hardsigmoid``; half
    floats in float32 too."""
    return in_float32(args[0], lambda x: op.divide(op.multiply(x, _hardtanh_of(op.add(x, scalar_like(3, x)), 0, 6)),
                                                   scalar_like(6, x)))


def _cat(node, args, kwargs):
    tensors = args[0]
    dim = args[1] if len(args) > 1 else 0
    return op.concat(list(tensors), axis=dim % ndim_of(tensors[0]))


def _to_copy(node, args, kwargs):
    """``_to_copy(x, dtype=...)`` (``x.float()``, ``x.to(dtype)``): a cast; device and layout are ignored."""
    dtype = kwargs.get("dtype")
    return args[0] if dtype is None else op.astype(args[0], torch_dtype(dtype))


def _no_value(node, args, kwargs):
    """Checks PyTorch inserts (``_assert_tensor_metadata``; with dynamic sizes ``_assert_scalar`` of their range
    constraints, which are not enforced): nothing to emit."""
    return None


def _dropout(node, args, kwargs):
    """``native_dropout(x, p, train)``: Relax's dropout (its own random numbers, not PyTorch's); its output, the
    mask is not produced."""
    return [TupleGetItem(op.nn.dropout(args[0], rate=float(args[1])), 0), None]


def _dims(args, i: int, default=None) -> list[int] | None:
    """Argument ``i``, a dim or a list of dims made non-negative; None for every dim (left out, None, or PyTorch's
    ``dim=[]``: ``x.sum()``, a 1-D dot product)."""
    dims = args[i] if len(args) > i else default
    if dims is None or (not isinstance(dims, int) and len(dims) == 0):
        return None
    return _axes(dims, ndim_of(args[0]))


def _nearest_source(n_in: int, n_out: int, scale) -> np.ndarray:
    """PyTorch's source index of each output of a nearest interpolation along one axis, as its kernel computes it
    (``nearest_idx``; that is ``'nearest'``, not ``'nearest-exact'``): the index itself for an equal size, half of
    it for twice the size, else ``floor(o * step)`` in float32 (at most ``n_in - 1``), the step ``1 /
    scale_factor`` when one was given (``scale_factor=1.7`` from 5 to 8 reads other pixels than ``5 / 8`` would),
    else ``n_in / n_out``."""
    o = np.arange(n_out)
    if n_out == n_in:
        return o
    if n_out == 2 * n_in:
        return o >> 1
    step = np.float32(1.0 / scale) if scale else np.float32(n_in) / np.float32(n_out)
    return np.minimum(np.floor(o.astype(np.float32) * step).astype(np.int64), n_in - 1)


def _nearest_along(node, x: Expr, axis: int, n_out: Dim, scale) -> Expr:
    """``x`` interpolated to ``n_out`` along ``axis`` by :func:`_nearest_source`: a ``repeat`` where that reads
    each pixel in turn a whole number of times, else a ``take``. A symbolic size needs a whole factor (and no other
    scale factor given)."""
    n_in = x.struct_info.shape[axis]
    factor = sym.exact_div(n_out, n_in) if n_in != 0 else None
    whole = isinstance(factor, int) and factor >= 1
    if isinstance(n_in, int) and isinstance(n_out, int):
        source = _nearest_source(n_in, n_out, scale)
        if not whole or not np.array_equal(source, np.arange(n_out) // factor):
            return op.take(x, const(source, "int64"), axis=axis)
    elif not whole or (scale and factor not in (1, 2) and float(scale) != factor):
        raise node_error(node, f"nearest upsampling from {n_in} to {n_out} along the symbolic axis {axis} by "
                         f"{scale or 'a scale that is not whole'}: only whole scale factors are supported there")
    return x if factor == 1 else op.repeat(x, repeats=factor, axis=axis)


def _upsample_nearest(node, args, kwargs):
    """``upsample_nearest2d.vec(x, output_size, scale_factors)`` (and ``.default`` with ``scales_h``,
    ``scales_w``): along H, then W (:func:`_nearest_along`). The 1-D and 3-D interpolations come decomposed
    (indexing), as the same indices."""
    x = args[0]
    if str(node.target).endswith("vec"):
        scales = list(args[2]) if len(args) > 2 and args[2] is not None else [None, None]
    else:
        scales = [_arg(args, kwargs, 2, "scales_h"), _arg(args, kwargs, 3, "scales_w")]
    out = _out_shape(node)
    for axis in (2, 3):
        x = _nearest_along(node, x, axis, out[axis], scales[axis - 2])
    return x


def _arange(node, args, kwargs):
    """``arange(start, end, step)``: a constant where its bounds are numbers (the dtype PyTorch gave it), else
    :func:`_symbolic_arange`."""
    bounds = [a for a in args if isinstance(a, (int, float, SymDim))]
    if any(isinstance(a, SymDim) for a in bounds):
        return _symbolic_arange(node, bounds)
    values = np.arange(*bounds, dtype=result_dtype(node))
    return const(values, str(values.dtype))


def _symbolic_arange(node, bounds: list) -> Expr:
    """``arange`` with a symbolic bound (``torch.arange(x.shape[1])``: positions): Relax's ``arange`` takes
    numbers, so ``start + step * i`` for ``i`` counted by a cumulative sum of ones, as many as PyTorch's result
    has (in int64 for integer ``start`` and ``step``, else float64, then PyTorch's dtype)."""
    start, step = (0, 1) if len(bounds) == 1 else (bounds[0], bounds[2] if len(bounds) > 2 else 1)
    if isinstance(step, SymDim):
        raise node_error(node, f"arange with the symbolic step {step}; only a static step is supported")
    (length,) = _out_shape(node)
    wide = "int64" if all(isinstance(v, (int, SymDim)) for v in (start, step)) else "float64"
    index = op.subtract(op.cumsum(op.ones((length,), "int64"), axis=0), const(1, "int64"))
    values = index if wide == "int64" else op.astype(index, wide)
    if step != 1:
        values = op.multiply(values, const(step, wide))
    if not (isinstance(start, int) and start == 0):
        values = op.add(values, _size_tensor(start, wide) if isinstance(start, SymDim) else const(start, wide))
    dtype = result_dtype(node)
    return values if dtype == wide else op.astype(values, dtype)


def _sort(node, args, kwargs):
    """``sort(x, dim=-1, descending=False)``: values and int64 indices."""
    x = args[0]
    axis = (args[1] if len(args) > 1 else kwargs.get("dim", -1)) % ndim_of(x)
    descending = bool(args[2] if len(args) > 2 else kwargs.get("descending", False))
    return [op.sort(x, axis=axis, descending=descending), op.argsort(x, axis=axis, descending=descending,
                                                                      dtype="int64")]


def _topk(node, args, kwargs):
    """``topk(x, k, dim=-1, largest=True, sorted=True)``: values and int64 indices."""
    x, k = args[0], args[1]
    axis = (args[2] if len(args) > 2 else kwargs.get("dim", -1)) % ndim_of(x)
    largest = bool(args[3] if len(args) > 3 else kwargs.get("largest", True))
    both = op.topk(x, k=k, axis=axis, ret_type="both", largest=largest, dtype="int64")
    return [TupleGetItem(both, 0), TupleGetItem(both, 1)]


def _elu(node, args, kwargs):
    """``elu(x, alpha=1, scale=1, input_scale=1)`` (SELU is ``elu(x, 1.673..., 1.050...)``)."""
    alpha, scale, input_scale = (list(args[1:4]) + [1.0, 1.0, 1.0][len(args[1:4]):])[:3]
    return elu(args[0], alpha, scale, input_scale)


def _celu(node, args, kwargs):
    """``celu(x, alpha=1)``, ``elu(x, alpha, 1, 1 / alpha)``: kept whole (its decomposition is
    ``where(x > 0, x, alpha * expm1(x / alpha))``, whose gradient is NaN where ``x`` is large, see
    :func:`~.common.elu`)."""
    alpha = args[1] if len(args) > 1 else kwargs.get("alpha", 1.0)
    if alpha == 0:
        raise node_error(node, "celu with alpha 0 is not supported")
    return elu(args[0], alpha, 1.0, 1.0 / alpha)


def _softplus(node, args, kwargs):
    """``softplus(x, beta=1, threshold=20)``: ``R.nn.softplus`` has PyTorch's semantics (``x`` where
    ``beta * x > threshold``). Kept whole: the decomposition's ``where(.., x, log1p(exp(beta * x)) / beta)`` has a
    NaN gradient where ``exp`` overflows in the branch not taken."""
    beta = args[1] if len(args) > 1 else kwargs.get("beta", 1.0)
    threshold = args[2] if len(args) > 2 else kwargs.get("threshold", 20.0)
    return op.nn.softplus(args[0], beta=float(beta), threshold=float(threshold))


def _log_sigmoid(node, args, kwargs):
    """``log_sigmoid(x) = -softplus(-x)``, kept whole: the decomposition ``min(0, x) - log1p(exp(-|x|))`` has
    kinks at 0, where the gradients Relax gives ``minimum``'s ties and ``abs`` (TVM's) add up to 1.5, not the
    smooth function's 0.5."""
    return op.negative(op.nn.softplus(op.negative(args[0])))


def _max_dim(reduce, arg):
    """``max.dim(x, dim, keepdim)``: values and indices (the first of equal ones)."""
    def convert(node, args, kwargs):
        x, dim = args[0], args[1] % ndim_of(args[0])
        keep = bool(args[2]) if len(args) > 2 else bool(kwargs.get("keepdim", False))
        return [reduce(x, axis=[dim], keepdims=keep), arg(x, axis=dim, keepdims=keep)]
    return convert


def _argmax(fn):
    def convert(node, args, kwargs):
        dim = args[1] if len(args) > 1 else kwargs.get("dim")
        keep = bool(args[2]) if len(args) > 2 else bool(kwargs.get("keepdim", False))
        return fn(args[0], axis=None if dim is None else dim % ndim_of(args[0]), keepdims=keep)
    return convert


def _split_with_sizes(node, args, kwargs):
    x, sizes = args[0], list(args[1])
    return split_pieces(x, (args[2] if len(args) > 2 else 0) % ndim_of(x), sizes)


def _split_tensor(node, args, kwargs):
    """``split.Tensor(x, size, dim)`` (``chunk``): pieces of ``size``, the last one shorter. Along a symbolic
    dimension the pieces torch recorded (their number is fixed in the program)."""
    x, size = args[0], args[1]
    dim = (args[2] if len(args) > 2 else 0) % ndim_of(x)
    n = x.struct_info.shape[dim]
    if isinstance(n, int) and isinstance(size, int):
        return split_pieces(x, dim, [min(size, n - s) for s in range(0, n, size)])
    return split_pieces(x, dim, [shape_of(piece.shape, node)[dim] for piece in node.meta["val"]])


def _repeat(node, args, kwargs):
    """``repeat(x, repeats)`` (``x`` read with leading 1s to the length of ``repeats``): Relax's ``tile`` for
    numeric counts. A symbolic count (``torch.ones(1, 4).repeat(x.shape[0], 1)``; instance norm's weight repeated
    per sample) is broadcasting, as ``tile`` takes numbers only: each repeated axis of size ``d`` gets a new axis
    before it (none where ``d`` is 1), broadcast to the count, and the two are merged (``count * d``: the copies
    whole, one after another, as ``repeat`` lays them out)."""
    x, repeats = args[0], list(args[1])
    if not any(isinstance(r, SymDim) for r in repeats):
        return op.tile(x, repeats=repeats)
    shape = [1] * (len(repeats) - ndim_of(x)) + list(x.struct_info.shape)
    spread, target = [], []
    for count, d in zip(repeats, shape):
        if isinstance(count, int) and count == 1:
            spread, target = spread + [d], target + [d]
        elif isinstance(d, int) and d == 1:
            spread, target = spread + [1], target + [count]
        else:
            spread, target = spread + [1, d], target + [count, d]
    merged = [count * d for count, d in zip(repeats, shape)]
    return op.reshape(op.broadcast_to(op.reshape(x, spread), target), merged)


def _pad(node, args, kwargs):
    """``constant_pad_nd(x, pad, value)``: PyTorch's pad lists (before, after) from the last dim backwards."""
    x, pad = args[0], list(args[1])
    value = args[2] if len(args) > 2 else kwargs.get("value", 0.0)
    if any(p < 0 for p in pad):
        raise node_error(node, f"negative padding {pad} (cropping) is not supported")
    width = [0] * (2 * ndim_of(x))
    for i in range(len(pad) // 2):
        axis = ndim_of(x) - 1 - i
        width[2 * axis], width[2 * axis + 1] = pad[2 * i], pad[2 * i + 1]
    return op.nn.pad(x, pad_width=width, pad_value=float(value))


def _flip(node, args, kwargs):
    x = args[0]
    for axis in _axes(args[1], ndim_of(x)):
        x = op.flip(x, axis=axis)
    return x


def _div_mode(node, args, kwargs):
    """``div.Tensor_mode(a, b, rounding_mode=)``: "floor" is floor division, "trunc" division rounded toward 0."""
    mode = kwargs.get("rounding_mode")
    if mode is None:
        return _binary(op.divide)(node, args, {})
    if mode == "floor":
        return _binary(op.floor_divide)(node, args, {})
    quotient = _binary(op.divide)(node, args, {})  # integers: truncated already
    return op.trunc(quotient) if dtype_of(quotient).startswith(("float", "bfloat")) else quotient


def _addmm(node, args, kwargs):
    bias, a, b = args[:3]
    beta, alpha = kwargs.get("beta", 1), kwargs.get("alpha", 1)
    product = op.matmul(a, b)
    if alpha != 1:
        product = op.multiply(product, scalar_like(alpha, product))
    if beta == 0:
        return product
    return op.add(product, bias if beta == 1 else op.multiply(bias, scalar_like(beta, bias)))


def _constant(node, args, kwargs):
    """``full(size, value)`` / ``scalar_tensor(value)``: a constant of the dtype PyTorch gave it; ``R.full`` for
    a symbolic size (``torch.zeros(x.shape[0], 4)``), a symbolic value broadcast from :func:`_size_tensor`."""
    size, value = (tuple(args[0]), args[1]) if str(node.target).startswith("aten.full") else ((), args[0])
    dtype = result_dtype(node)
    if isinstance(value, SymDim):
        scalar = _size_tensor(value, dtype)
        return op.broadcast_to(scalar, size) if size else scalar
    if any(isinstance(d, SymDim) for d in size):
        return op.full(size, fill_value=value, dtype=dtype)
    values = np.full(size, value, dtype=dtype)
    return const(values, str(values.dtype))


def _variance(take_root: bool):
    """``var.correction`` / ``std.correction(x, dim, correction=1, keepdim)``: Relax's variance divides by n; a
    correction c scales it by n / (n - c) (Bessel's for c = 1, PyTorch's default)."""
    def convert(node, args, kwargs):
        x = args[0]
        axes = _dims(args, 1, kwargs.get("dim"))
        correction = kwargs.get("correction", 1)
        correction = 1 if correction is None else correction
        keep = bool(kwargs.get("keepdim", False))
        shape = x.struct_info.shape
        n = sym.product(shape[a] for a in (axes if axes is not None else range(len(shape))))
        v = op.variance(x, axis=axes, keepdims=keep)
        if correction and isinstance(n, int):
            v = op.multiply(v, scalar_like(n / (n - correction) if n > correction else float("inf"), v))
        elif correction:  # n / max(n - c, 0), inf where n <= c, computed when it runs
            count = _size_tensor(n, dtype_of(v))
            v = op.multiply(v, op.divide(count, op.maximum(op.subtract(count, scalar_like(correction, v)),
                                                           scalar_like(0, v))))
        return op.sqrt(v) if take_root else v
    return convert


def _affine_or_identity(x: Expr, w, b, channels: int) -> tuple[Expr, Expr]:
    """A norm's weight and bias, ones and zeros where the module has none (``affine=False``)."""
    dtype = np.dtype(dtype_of(x))
    return (w if w is not None else const(np.ones(channels, dtype), str(dtype)),
            b if b is not None else const(np.zeros(channels, dtype), str(dtype)))


def _group_norm(node, args, kwargs):
    """``native_group_norm(x, w, b, N, C, HxW, group, eps)``: the normalized output (mean and rstd not made)."""
    x, w, b, _, channels, _, groups, eps = args[:8]
    rest = list(range(2, ndim_of(x)))
    w, b = _affine_or_identity(x, w, b, channels)
    return [op.nn.group_norm(x, w, b, num_groups=groups, channel_axis=1, axes=rest, epsilon=float(eps)), None, None]


def _arg(args, kwargs, i: int, name: str, default=None):
    """Argument ``i`` of a node, given by position or by ``name``."""
    return args[i] if len(args) > i else kwargs.get(name, default)


def _safe_root(s: Expr, p: float) -> Expr:
    """``s ** (1 / p)`` for ``s >= 0``, with a zero gradient where ``s`` is 0 (as PyTorch's norms): the root's own
    gradient is infinite there, and the chain rule's ``0 * inf`` would be NaN. The root is taken of 1 where ``s`` is
    0, so neither branch of the ``where`` has an infinite gradient."""
    zero = op.equal(s, scalar_like(0, s))
    safe = op.where(zero, scalar_like(1, s), s)
    root = op.sqrt(safe) if p == 2 else op.power(safe, scalar_like(1.0 / p, s))
    return op.where(zero, scalar_like(0, s), root)


def _magnitude(x: Expr) -> Expr:
    """``|x|`` as ``x * sign(x)``, whose gradient is ``sign(x)``: 0 at 0, as PyTorch's ``abs`` (Relax's ``abs``
    has TVM's gradient, +1 at 0, which would give a zero row of ``F.normalize(p=1)`` a gradient)."""
    return op.multiply(x, op.sign(x))


def _vector_norm(node, args, kwargs):
    """``linalg_vector_norm(x, ord=2, dim=None, keepdim=False, dtype=None)`` (``F.normalize``, ``x.norm()``):
    ``max``/``min`` of ``|x|`` for ``ord`` inf/-inf, the count of non-zeros for 0, ``sum(|x|)`` for 1, and
    ``sum(|x| ** ord) ** (1 / ord)`` for other positive orders (``sqrt(sum(x * x))`` for 2), whose gradient is 0 at
    a zero vector, as PyTorch's (``F.normalize`` of an all-zero row)."""
    x, ord_ = args[0], _arg(args, kwargs, 1, "ord", 2)
    axes, keep = _dims(args, 2, kwargs.get("dim")), bool(_arg(args, kwargs, 3, "keepdim", False))
    if kwargs.get("dtype") is not None:
        x = op.astype(x, torch_dtype(kwargs["dtype"]))
    reduce = dict(axis=axes, keepdims=keep)
    if ord_ == 0:
        return op.sum(op.astype(op.not_equal(x, scalar_like(0, x)), dtype_of(x)), **reduce)
    if ord_ in (np.inf, -np.inf):
        return (op.max if ord_ > 0 else op.min)(_magnitude(x), **reduce)
    if ord_ < 0:
        raise node_error(node, f"vector norm of order {ord_}; only positive orders, 0, inf and -inf are supported")
    if ord_ == 1:
        return op.sum(_magnitude(x), **reduce)
    if ord_ == 2:
        return _safe_root(op.sum(op.multiply(x, x), **reduce), 2)
    a = _magnitude(x)  # |x| ** ord with a zero gradient at 0 (for ord < 1 the power's own is infinite there)
    zero = op.equal(a, scalar_like(0, a))
    powered = op.where(zero, scalar_like(0, a), op.power(op.where(zero, scalar_like(1, a), a), scalar_like(ord_, a)))
    return _safe_root(op.sum(powered, **reduce), float(ord_))


def _var_mean(node, args, kwargs):
    """``var_mean.correction(x, dim, correction=1, keepdim=False)``: the corrected variance, then the mean."""
    keep = bool(kwargs.get("keepdim", False))
    return [_variance(False)(node, args, kwargs), op.mean(args[0], axis=_dims(args, 1, kwargs.get("dim")),
                                                          keepdims=keep)]


def _prod(node, args, kwargs):
    """``prod.default(x, dtype)`` and ``prod.dim_int(x, dim, keepdim=False, dtype)`` (a bool or narrow int tensor
    is brought to PyTorch's int64 result by the promotion of the caller)."""
    x, dtype = args[0], kwargs.get("dtype")
    if dtype is not None:
        x = op.astype(x, torch_dtype(dtype))
    if str(node.target).endswith("default"):
        return op.prod(x)
    return op.prod(x, axis=_dims(args, 1), keepdims=bool(_arg(args, kwargs, 2, "keepdim", False)))


def _truth(x: Expr) -> Expr:
    """A tensor as booleans, as PyTorch's logical ops read it: non-zero (NaN included) is true."""
    return x if dtype_of(x) == "bool" else op.not_equal(x, scalar_like(0, x))


def _logical(fn: Callable) -> Callable:
    """``logical_not``/``and``/``or`` of tensors of any dtype (Relax's take booleans): their truth values."""
    return lambda node, args, kwargs: fn(*(_truth(_operand(a, args[0])) for a in args[:2]))


def _any(every: bool):
    """``any``/``all`` (``.default``, ``.dim``, ``.dims``): whether any (every) element is non-zero (NaN counts as
    non-zero, as in PyTorch), as a count: of the true elements above 0 (of the false ones equal to 0). A count of
    nothing is 0, so over an empty axis (which a symbolic size can be) ``any`` is false and ``all`` true, as in
    PyTorch; a maximum or minimum of nothing has no value."""
    def convert(node, args, kwargs):
        x = args[0]
        counted = op.logical_not(_truth(x)) if every else _truth(x)
        whole = str(node.target).endswith("default")
        axes = None if whole else _dims(args, 1, kwargs.get("dim"))
        keep = not whole and bool(_arg(args, kwargs, 2, "keepdim", False))
        count = op.sum(op.astype(counted, "int64"), axis=axes, keepdims=keep)
        return (op.equal if every else op.greater)(count, const(0, "int64"))
    return convert


def _gather(node, args, kwargs):
    """``gather(x, dim, index)``: Relax's ``gather_elements`` with ``negative_indices=False``: PyTorch raises for a
    negative index (where ONNX's GatherElements, Relax's default, counts it from the end), and so does the imported
    program, naming the index, its position, the axis and the range ``[0, size)``."""
    x, axis, index = args[0], args[1] % ndim_of(args[0]), args[2]
    return op.gather_elements(x, index, axis=axis, negative_indices=False)


def _one_hot(node, args, kwargs):
    """``one_hot(indices, num_classes)``, kept whole: Relax's one_hot raises ``IndexError`` for a class outside
    ``[0, num_classes)``, as PyTorch does (its decomposition checks with asserts the importer would skip).
    ``num_classes=-1`` (the largest class plus one, a size known only when it runs) does not export."""
    return op.one_hot(args[0], on_value=1, off_value=0, depth=_arg(args, kwargs, 1, "num_classes"), dtype="int64")


def _bitwise_not(node, args, kwargs):
    """``~x``: bitwise on integers, logical on booleans (Relax's ``bitwise_not`` takes integers only)."""
    return (op.logical_not if dtype_of(args[0]) == "bool" else op.bitwise_not)(args[0])


_BAG_MODES = {0: "sum", 1: "mean", 2: "max"}


def _embedding_bag(node, args, kwargs):
    """``_embedding_bag(weight, indices, offsets, scale_grad_by_freq, mode, sparse, per_sample_weights,
    include_last_offset, padding_idx)`` (``nn.EmbeddingBag``; a 2-D input comes as flat indices and offsets):
    the bags are known only when it runs (``offsets`` is a tensor), so a (bags, indices) membership mask is
    computed, ``offsets[b] <= i < offsets[b + 1]`` (and ``indices[i]`` not ``padding_idx``), and the looked-up
    rows are summed with it (a matmul), averaged, or maxed where it holds. An empty bag gives zeros, as in
    PyTorch. Max: a row that is the maximum twice in a bag (an index repeated) shares its gradient between the two,
    where PyTorch gives it to the first."""
    weight, indices, offsets = args[:3]
    get = lambda i, name, default: _arg(args, kwargs, i, name, default)  # noqa: E731
    mode, weights = _BAG_MODES[get(4, "mode", 0)], get(6, "per_sample_weights", None)
    last, padding_idx = bool(get(7, "include_last_offset", False)), get(8, "padding_idx", -1)
    if get(3, "scale_grad_by_freq", False):
        raise node_error(node, "embedding bag with scale_grad_by_freq is not supported")
    (n,), (count,) = indices.struct_info.shape, offsets.struct_info.shape
    n = static_dim(n, node, "the number of indices of an embedding bag")
    bags = count - 1 if last else count
    begin = op.strided_slice(offsets, axes=[0], begin=[0], end=[bags]) if last else offsets
    end = op.strided_slice(offsets, axes=[0], begin=[1], end=[bags + 1]) if last else \
        op.concat([op.strided_slice(offsets, axes=[0], begin=[1], end=[count]),
                   const(np.array([n], to_numpy(dtype_of(offsets))), dtype_of(offsets))], axis=0)
    position = const(np.arange(n, dtype=to_numpy(dtype_of(offsets))).reshape(1, n), dtype_of(offsets))
    member = op.logical_and(op.less_equal(op.reshape(begin, (bags, 1)), position),
                            op.less(position, op.reshape(end, (bags, 1))))
    if padding_idx is not None and padding_idx >= 0:
        member = op.logical_and(member, op.reshape(op.not_equal(indices, scalar_like(padding_idx, indices)), (1, n)))
    rows = op.take(weight, indices, axis=0)
    if weights is not None:
        rows = op.multiply(rows, op.reshape(weights, (n, 1)))
    mask = op.astype(member, dtype_of(weight))
    sizes = op.sum(mask, axis=[1], keepdims=True)
    if mode == "sum":
        out = op.matmul(mask, rows)
    elif mode == "mean":
        out = op.divide(op.matmul(mask, rows), op.maximum(sizes, scalar_like(1, sizes)))
    else:
        picked = op.where(op.expand_dims(member, -1), op.expand_dims(rows, 0), scalar_like(float("-inf"), rows))
        out = op.where(op.greater(sizes, scalar_like(0, sizes)), op.max(picked, axis=[1]), scalar_like(0, rows))
    return [out, None, None, None]


def _batch_norm_no_stats(node, args, kwargs):
    """``_native_batch_norm_legit.no_stats(x, w, b, training, momentum, eps)``: normalized with the batch's
    statistics over every axis but 1 (no running statistics: ``nn.InstanceNorm*``, exported as this on the
    (1, N * C, ...) view, and ``nn.BatchNorm*(track_running_stats=False)``); the saved mean and rstd not made."""
    x, w, b, eps = args[0], args[1], args[2], args[5]
    axes = [0] + list(range(2, ndim_of(x)))
    channel = (1, -1) + (1,) * (ndim_of(x) - 2)
    mean, var = op.mean(x, axis=axes, keepdims=True), op.variance(x, axis=axes, keepdims=True)
    y = op.multiply(op.subtract(x, mean), op.rsqrt(op.add(var, scalar_like(float(eps), var))))
    if w is not None:
        y = op.multiply(y, op.reshape(w, channel))
    return [y if b is None else op.add(y, op.reshape(b, channel)), None, None]


def _index(node, args, kwargs):
    """``index.Tensor(x, [i0, None, i2, ...])`` (``x[idx]``, and the reflect/replicate pads' decomposition):
    NumPy's advanced indexing as one ``take``. Several index tensors are merged into one (their broadcast, each
    times its axis' stride, on ``x`` with those axes merged), moved first when they are not adjacent, as NumPy and
    PyTorch put the result's indexed dims."""
    x, indices = args[0], list(args[1])
    axes = [a for a, i in enumerate(indices) if i is not None]
    if axes != list(range(axes[0], axes[-1] + 1)):
        order = axes + [a for a in range(ndim_of(x)) if a not in axes]
        x, indices, axes = op.permute_dims(x, axes=order), [indices[a] for a in axes], list(range(len(axes)))
    if len(axes) == 1:
        return op.take(x, indices[axes[0]], axis=axes[0])
    shape = list(x.struct_info.shape)
    sizes = [shape[a] for a in axes]
    flat = None
    for a, size in zip(axes, sizes):
        i = op.astype(indices[a], "int64") if dtype_of(indices[a]) != "int64" else indices[a]
        i = op.where(op.less(i, scalar_like(0, i)), op.add(i, _operand(size, i)), i)  # negatives from the end
        stride = sym.product(sizes[axes.index(a) + 1:])
        term = i if stride == 1 else op.multiply(i, _operand(stride, i))
        flat = term if flat is None else op.add(flat, term)
    merged = shape[:axes[0]] + [sym.product(sizes)] + shape[axes[-1] + 1:]
    return op.take(op.reshape(x, merged), flat, axis=axes[0])


def _linear_weights(n_in: int, n_out: int, align_corners: bool, scale, f) -> tuple[np.ndarray, ...]:
    """PyTorch's bilinear source positions along one axis, computed in the float type ``f`` as its kernel computes
    them (float32; float64 for a float64 input): the lower and upper source index of each output and the upper
    one's weight. The step is ``(n_in - 1) / (n_out - 1)`` with ``align_corners``, else ``1 / scale_factor`` when
    one was given (``F.interpolate(scale_factor=1.5)``: not ``n_in / n_out``), else ``n_in / n_out``; without
    ``align_corners`` pixel centres are matched (``(o + 0.5) * step - 0.5``, at least 0)."""
    if align_corners:
        step = f(n_in - 1) / f(n_out - 1) if n_out > 1 else f(0)
        source = step * np.arange(n_out, dtype=f)
    else:
        step = f(1.0 / scale) if scale else f(n_in) / f(n_out)
        source = np.maximum(step * (np.arange(n_out, dtype=f) + f(0.5)) - f(0.5), f(0))
    low = source.astype(np.int64)
    return low, np.minimum(low + 1, n_in - 1), np.clip(source - low.astype(f), 0, 1).astype(f)


def _upsample_bilinear(node, args, kwargs):
    """``upsample_bilinear2d.vec(x, output_size, align_corners, scale_factors)`` (and ``.default`` with
    ``scales_h``, ``scales_w``): along W, then H (the order of PyTorch's kernel), each output a blend of two
    ``take``s of the input with constant weights."""
    x, align_corners = args[0], bool(args[2])
    if str(node.target).endswith("vec"):
        scales = list(args[3]) if len(args) > 3 and args[3] is not None else [None, None]
    else:
        scales = [_arg(args, kwargs, 3, "scales_h"), _arg(args, kwargs, 4, "scales_w")]
    for axis in (3, 2):
        n_in, n_out = (static_dim(d, node, f"dimension {axis} of a bilinear interpolation")
                       for d in (x.struct_info.shape[axis], _out_shape(node)[axis]))
        f = np.float64 if dtype_of(x) == "float64" else np.float32
        low, high, weight = _linear_weights(n_in, n_out, align_corners, scales[axis - 2], f)
        shape = (n_out,) + (1,) * (3 - axis)
        upper = const(weight.reshape(shape).astype(to_numpy(dtype_of(x))), dtype_of(x))
        lower = const((f(1) - weight).reshape(shape).astype(to_numpy(dtype_of(x))), dtype_of(x))
        x = op.add(op.multiply(op.take(x, const(low, "int64"), axis=axis), lower),
                   op.multiply(op.take(x, const(high, "int64"), axis=axis), upper))
    return x


def _recurrent(kind: str, activation: Callable = op.tanh) -> Callable:
    """``lstm.input(x, [h0, c0], params, has_biases, num_layers, dropout, train, bidirectional, batch_first)``
    (``gru.input``, ``rnn_tanh.input``, ``rnn_relu.input``: ``h0`` alone), kept whole by the decomposition and
    unrolled by :mod:`.rnn`. ``params`` holds each layer's directions' ``w_ih, w_hh[, b_ih, b_hh][, w_hr]``
    (``w_hr``: an LSTM's ``proj_size``, whose ``h0`` is narrower than ``c0``). A training export's ``dropout``
    is Relax's dropout between layers, as PyTorch applies it (its own decomposition drops it)."""
    cell = rnn.Cell(kind, {"lstm": "ifgo", "gru": "rzn"}.get(kind, ""), activation)

    def convert(node, args, kwargs):
        x, hx, params, has_biases, num_layers, p, train, bidirectional, batch_first = args[:9]
        h0, c0 = (hx[0], hx[1]) if kind == "lstm" else (hx, None)
        projected = c0 is not None and h0.struct_info.shape[2] != c0.struct_info.shape[2]
        group, directions = 2 + 2 * bool(has_biases) + projected, 2 if bidirectional else 1
        groups = [params[i:i + group] for i in range(0, len(params), group)]
        weights = [[_rnn_weights(g, has_biases, projected) for g in groups[i:i + directions]]
                   for i in range(0, num_layers * directions, directions)]
        dropout = (lambda y: TupleGetItem(op.nn.dropout(y, rate=float(p)), 0)) if train and p > 0 else (lambda y: y)
        results = rnn.layers(cell, op.permute_dims(x, axes=[1, 0, 2]) if batch_first else x, weights, h0, c0, dropout)
        return [op.permute_dims(results[0], axes=[1, 0, 2]) if batch_first else results[0], *results[1:]]
    return convert


def _rnn_weights(group: Sequence[Expr], has_biases: bool, projected: bool) -> rnn.Weights:
    biases = group[2:4] if has_biases else (None, None)
    return rnn.Weights(group[0], group[1], *biases, w_hr=group[-1] if projected else None)


# -- layers composed from Relax ops: adaptive max pools, bilinear forms, clamps, cosine, cumprod ----------------------

def _batched(x: Expr, spatial: int, fn: Callable[[Expr], Expr]) -> Expr:
    """``fn`` of ``x`` with a batch axis: an unbatched input (``spatial + 1`` dims, PyTorch's ``(C, D, H, W)``)
    gets a batch of 1, dropped after."""
    if ndim_of(x) == spatial + 2:
        return fn(x)
    return op.squeeze(fn(op.expand_dims(x, 0)), axis=[0])


def _max_pool3d(node, args, kwargs):
    """``max_pool3d_with_indices(x, kernel, stride, padding, dilation, ceil_mode)`` (``nn.MaxPool3d``):
    ``R.nn.max_pool3d`` (a tie's gradient goes to the window's first maximum in row-major order, as PyTorch's).
    The indices are not produced."""
    kernel = _pair(args[1], 3)
    stride = _pair(args[2], 3) if len(args) > 2 and args[2] else kernel
    padding = _pair(_arg(args, kwargs, 3, "padding", 0), 3)
    dilation = _pair(_arg(args, kwargs, 4, "dilation", 1), 3)
    ceil_mode = bool(_arg(args, kwargs, 5, "ceil_mode", False))
    return [_batched(args[0], 3, lambda x: op.nn.max_pool3d(
        x, pool_size=kernel, strides=stride, padding=padding, dilation=dilation, ceil_mode=ceil_mode)), None]


def _avg_pool3d(node, args, kwargs):
    """``avg_pool3d(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)`` (``nn.AvgPool3d``,
    and ``nn.LocalResponseNorm``'s decomposition): ``R.nn.avg_pool3d``."""
    kernel = _pair(args[1], 3)
    stride = _pair(args[2], 3) if len(args) > 2 and args[2] else kernel
    padding = _pair(_arg(args, kwargs, 3, "padding", 0), 3)
    ceil_mode = bool(_arg(args, kwargs, 4, "ceil_mode", False))
    count_include_pad = bool(_arg(args, kwargs, 5, "count_include_pad", True))
    divisor = _arg(args, kwargs, 6, "divisor_override")

    def pool(x: Expr) -> Expr:
        y = op.nn.avg_pool3d(x, pool_size=kernel, strides=stride, padding=padding, ceil_mode=ceil_mode,
                             count_include_pad=count_include_pad or divisor is not None)
        return y if divisor is None else _override_divisor(node, y, x, kernel, stride, padding, ceil_mode, divisor)
    return _batched(args[0], 3, pool)


def _adaptive_avg_pool3d(node, args, kwargs):
    """``_adaptive_avg_pool3d(x, output_size)`` (``nn.AdaptiveAvgPool3d``; an unbatched input gets a batch of 1)."""
    size = list(_out_shape(node)[-3:])
    sizes = [static_dim(d, node, "an adaptive average pool's output size") for d in size]
    return _batched(args[0], 3, lambda x: op.nn.adaptive_avg_pool3d(x, output_size=sizes))


def _adaptive_max_along(node, x: Expr, axis: int, n_out: int) -> Expr:
    """The max over PyTorch's adaptive windows along ``axis``: output ``i`` covers ``[floor(i * n / n_out),
    ceil((i + 1) * n / n_out))``. Where ``n_out`` divides ``n`` the windows tile the axis; else each window is taken
    as ``k`` (the widest window's) indices, the shorter ones filled at their end with an index past the axis, which
    reads a lowest value padded on. Then a (k, 1) max pool with stride k on the (before, 1, n_out * k, after) view:
    its gradient goes to the first maximum of a window, as PyTorch's."""
    shape = list(x.struct_info.shape)
    n = static_dim(shape[axis], node, f"dimension {axis} of an adaptive max pool")
    if n == n_out:
        return x
    k, windows = n // n_out, x
    if n % n_out:
        i = np.arange(n_out)
        start, end = i * n // n_out, -(-(i + 1) * n // n_out)
        k = int((end - start).max())
        index = start[:, None] + np.arange(k)
        index = np.where(index < end[:, None], index, n)
        lowest = -np.inf if _is_float(x) else np.iinfo(to_numpy(dtype_of(x))).min
        width = [0] * (2 * len(shape))
        width[2 * axis + 1] = 1
        padded = op.nn.pad(x, pad_width=width, pad_value=float(lowest))
        windows = op.take(padded, const(index.reshape(-1), "int64"), axis=axis)
    rows = op.reshape(windows, (sym.product(shape[:axis]), 1, n_out * k, sym.product(shape[axis + 1:])))
    pooled = op.nn.max_pool2d(rows, pool_size=(k, 1), strides=(k, 1))
    return op.reshape(pooled, shape[:axis] + [n_out] + shape[axis + 1:])


def _adaptive_max_pool(node, args, kwargs):
    """``adaptive_max_pool2d(x, output_size)`` and ``adaptive_max_pool3d`` (``nn.AdaptiveMaxPool1d/2d/3d``, the 1-D
    one on an unsqueezed axis): the max over each spatial axis' windows in turn, the last axis first (a box's max is
    that of its rows' maxes; :func:`_adaptive_max_along`), so that a tie's gradient goes to the first maximum in
    row-major order, as PyTorch's. The indices are not produced."""
    x, spatial = args[0], len(args[1])
    out = _out_shape(node)
    for axis in reversed(range(ndim_of(x) - spatial, ndim_of(x))):
        x = _adaptive_max_along(node, x, axis, static_dim(out[axis], node, "an adaptive max pool's output size"))
    return [x, None]


def _trilinear(node, args, kwargs):
    """``_trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim, unroll_dim)`` (``nn.Bilinear``'s
    ``x1 W x2``): each input read with size-1 dims inserted at its ``expand`` positions, their product summed over
    ``sumdim``. One einsum: each input labelled by the dims it has, the output by the kept dims an input has (a
    kept dim none has is 1: the reshape to torch's shape)."""
    tensors, expands, summed = args[:3], args[3:6], args[6]
    total = ndim_of(tensors[0]) + len(expands[0])
    letters = [chr(ord("a") + d) for d in range(total)]
    labels = ["".join(letters[d] for d in range(total) if d not in _axes(e, total)) for e in expands]
    kept = [letters[d] for d in range(total) if d not in _axes(summed, total) and any(letters[d] in s for s in labels)]
    product = op.einsum(list(tensors), ",".join(labels) + "->" + "".join(kept))
    return op.reshape(product, _out_shape(node))


def _clamp_tensor(node, args, kwargs):
    """``clamp.Tensor(x, min, max)`` (``torch.clamp`` with tensor bounds): PyTorch's ``min(max(x, min), max)`` as
    ``minimum(max, maximum(x, min))``, whose ties give the gradient to ``x`` as PyTorch does: ``x`` gets it where
    ``min <= x <= max``, ``min`` where ``x < min <= max``, ``max`` where ``x > max`` or ``max < min``. (Where
    ``min == max`` and ``x`` is below them PyTorch gives none of the three a gradient; ``min`` gets it here.)"""
    y = args[0]
    lo, hi = _arg(args, kwargs, 1, "min"), _arg(args, kwargs, 2, "max")
    if lo is not None:
        y = op.maximum(y, _operand(lo, y))
    if hi is not None:
        y = op.minimum(_operand(hi, y), y)
    return y


def _broadcast_both(a: Expr, b: Expr) -> tuple[Expr, Expr]:
    """``a`` and ``b`` broadcast to their common shape (PyTorch's ``expand_outplace``)."""
    n = max(ndim_of(a), ndim_of(b))
    sa, sb = ([1] * (n - ndim_of(t)) + list(t.struct_info.shape) for t in (a, b))
    shape = [y if isinstance(x, int) and x == 1 else x for x, y in zip(sa, sb)]
    return tuple(t if ndim_of(t) == n and list(t.struct_info.shape) == shape else op.broadcast_to(t, shape)
                 for t in (a, b))


def _cosine_similarity(node, args, kwargs):
    """``cosine_similarity(x1, x2, dim=1, eps=1e-8)``, kept whole by the import. PyTorch divides each input by its
    norm clamped to at least ``eps``, clamping in place under ``NoGradGuard``: the gradient flows through the norm
    as if unclamped. torch's decomposition makes that a ``clamp.Tensor``, which passes no gradient below ``eps``
    (a small input trains otherwise). Here the inputs are broadcast to one shape, each norm (whose gradient is 0
    at a zero vector, as PyTorch's) is ``norm - no_grad(norm) + eps`` below ``eps`` (the value ``eps``, the
    norm's gradient), then ``sum(x1 / n1 * (x2 / n2), dim)``; integer inputs are first cast to PyTorch's float."""
    dtype = result_dtype(node)
    x1, x2 = _broadcast_both(*(op.astype(x, dtype) if dtype_of(x) != dtype else x for x in args[:2]))
    axis = _arg(args, kwargs, 2, "dim", 1) % ndim_of(x1)
    eps = float(_arg(args, kwargs, 3, "eps", 1e-8))
    scaled = []
    for x in (x1, x2):
        norm = _safe_root(op.sum(op.multiply(x, x), axis=[axis], keepdims=True), 2)
        floor = scalar_like(eps, norm)
        held = op.add(op.subtract(norm, op.grad.no_grad(norm)), floor)
        scaled.append(op.divide(x, op.where(op.less(norm, floor), held, norm)))
    return op.sum(op.multiply(*scaled), axis=[axis])


def _cumprod(node, args, kwargs):
    """``cumprod(x, dim, dtype=None)``: no Relax op computes it, so a scan of ``ceil(log2 n)`` steps (Hillis and
    Steele's), each multiplying the running products by themselves shifted along the axis by 1, 2, 4, ... (ones
    shifted in). Its products are PyTorch's in another association (floats within a few ulps; integers, wrapping
    alike, exactly), and its gradient is the product rule through each step: finite and right at zeros too."""
    x, dtype = args[0], _arg(args, kwargs, 2, "dtype")
    if dtype is not None:
        x = op.astype(x, torch_dtype(dtype))
    axis = _arg(args, kwargs, 1, "dim") % ndim_of(x)
    shape = list(x.struct_info.shape)
    n = static_dim(shape[axis], node, "the axis of a cumulative product")
    shift = 1
    while shift < n:
        ones = op.ones(shape[:axis] + [shift] + shape[axis + 1:], dtype_of(x))
        body = op.strided_slice(x, axes=[axis], begin=[0], end=[n - shift])
        x = op.multiply(x, op.concat([ones, body], axis=axis))
        shift *= 2
    return x


CONVERTERS: dict[str, Callable] = {
    "aten.lstm.input": _recurrent("lstm"), "aten.gru.input": _recurrent("gru"),
    "aten.rnn_tanh.input": _recurrent("rnn"), "aten.rnn_relu.input": _recurrent("rnn", _relu_of),
    "aten.add.Tensor": _binary(op.add), "aten.add.Scalar": _binary(op.add),
    "aten.sub.Tensor": _binary(op.subtract), "aten.sub.Scalar": _binary(op.subtract),
    "aten.rsub.Scalar": lambda n, a, k: op.subtract(_operand(a[1], a[0]), a[0]),
    "aten.mul.Tensor": _binary(op.multiply), "aten.mul.Scalar": _binary(op.multiply),
    "aten.div.Tensor": _binary(op.divide), "aten.div.Scalar": _binary(op.divide),
    "aten.pow.Tensor_Scalar": _binary(op.power), "aten.pow.Tensor_Tensor": _binary(op.power),
    "aten.maximum.default": _binary(op.maximum), "aten.minimum.default": _binary(op.minimum),
    **{f"aten.{name}.{kind}": _binary(fn, compare=True) for name, fn in [
        ("eq", op.equal), ("ne", op.not_equal), ("lt", op.less), ("le", op.less_equal), ("gt", op.greater),
        ("ge", op.greater_equal)] for kind in ("Tensor", "Scalar")},
    "aten.remainder.Tensor": _binary(op.floor_mod), "aten.remainder.Scalar": _binary(op.floor_mod),
    "aten.fmod.Tensor": _binary(op.mod), "aten.fmod.Scalar": _binary(op.mod),
    "aten.logical_and.default": _logical(op.logical_and), "aten.logical_or.default": _logical(op.logical_or),
    "aten.logical_not.default": _logical(op.logical_not), "aten.bitwise_not.default": _bitwise_not,
    "aten.floor.default": _unary(op.floor), "aten.ceil.default": _unary(op.ceil),
    "aten.round.default": _unary(op.round), "aten.sign.default": _unary(op.sign),
    "aten.trunc.default": _unary(op.trunc), "aten.log1p.default": _unary(op.log1p),
    "aten.log2.default": _unary(op.log2), "aten.sin.default": _unary(op.sin), "aten.cos.default": _unary(op.cos),
    "aten.tan.default": _unary(op.tan), "aten.atan.default": _unary(op.atan),
    "aten.isnan.default": _unary(op.isnan), "aten.isinf.default": _unary(op.isinf),
    "aten.reciprocal.default": lambda n, a, k: op.divide(scalar_like(1.0, a[0]), a[0]),
    "aten.elu.default": _elu, "aten.celu.default": _celu, "aten.softplus.default": _softplus,
    "aten.mish.default": _unary(mish), "aten.log_sigmoid.default": _log_sigmoid,
    "aten.sort.default": _sort, "aten.topk.default": _topk, "aten.upsample_nearest2d.vec": _upsample_nearest,
    "aten.upsample_nearest2d.default": _upsample_nearest, "aten.arange.start_step": _arange,
    "aten.arange.default": _arange, "aten.arange.start": _arange,
    "aten.sum.default": lambda n, a, k: op.sum(a[0]), "aten.mean.default": lambda n, a, k: op.mean(a[0]),
    "aten.max.default": lambda n, a, k: op.max(a[0]), "aten.min.default": lambda n, a, k: op.min(a[0]),
    "aten.max.dim": _max_dim(op.max, op.argmax), "aten.min.dim": _max_dim(op.min, op.argmin),
    "aten.argmax.default": _argmax(op.argmax), "aten.argmin.default": _argmax(op.argmin),
    "aten.split_with_sizes.default": _split_with_sizes, "aten.split.Tensor": _split_tensor,
    "aten.constant_pad_nd.default": _pad, "aten.flip.default": _flip,
    "aten.index_select.default": lambda n, a, k: op.take(a[0], a[2], axis=a[1] % ndim_of(a[0])),
    "aten.repeat.default": _repeat,
    "aten.cumsum.default": lambda n, a, k: op.cumsum(a[0], axis=a[1] % ndim_of(a[0])),
    "aten.div.Tensor_mode": _div_mode,
    "aten.pow.Scalar": lambda n, a, k: op.power(scalar_like(a[0], a[1]), a[1]),
    "aten.full.default": _constant, "aten.scalar_tensor.default": _constant,
    "aten.var.correction": _variance(False), "aten.std.correction": _variance(True),
    "aten.native_group_norm.default": _group_norm,
    "aten._adaptive_avg_pool2d.default": lambda n, a, k: op.nn.adaptive_avg_pool2d(a[0], output_size=list(a[1])),
    "aten.where.self": lambda n, a, k: op.where(a[0], a[1], _operand(a[2], a[1])),
    "aten.relu.default": _relu, "aten.sigmoid.default": _unary(op.sigmoid),
    "aten.tanh.default": _unary(op.tanh), "aten.exp.default": _unary(op.exp), "aten.log.default": _unary(op.log),
    "aten.sqrt.default": _unary(op.sqrt), "aten.rsqrt.default": _unary(op.rsqrt),
    "aten.neg.default": _unary(op.negative), "aten.abs.default": _abs, "aten.erf.default": _unary(op.erf),
    "aten.silu.default": _unary(op.nn.silu), "aten.gelu.default": _gelu,
    "aten.clamp.default": _clamp, "aten.hardtanh.default": _hardtanh,
    "aten.leaky_relu.default": _leaky_relu,
    "aten.hardswish.default": _hardswish, "aten.hardsigmoid.default": _hardsigmoid,
    "aten._softmax.default": _softmax(op.nn.softmax), "aten._log_softmax.default": _softmax(op.nn.log_softmax),
    "aten.addmm.default": _addmm, "aten.mm.default": _binary(op.matmul), "aten.bmm.default": _binary(op.matmul),
    "aten.matmul.default": _binary(op.matmul),
    "aten.permute.default": _permute, "aten.transpose.int": _transpose, "aten.t.default": _t,
    "aten.view.default": _view, "aten._unsafe_view.default": _view, "aten.reshape.default": _view,
    "aten.squeeze.dims": _reshape, "aten.squeeze.dim": _reshape, "aten.squeeze.default": _reshape,
    "aten.unsqueeze.default": _reshape, "aten.flatten.using_ints": _reshape,
    "aten.expand.default": _expand,
    "aten.clone.default": _identity, "aten.alias.default": _identity, "aten.detach.default": _identity,
    "aten.lift_fresh_copy.default": _identity,
    "aten.convolution.default": _convolution,
    "aten.max_pool2d_with_indices.default": _max_pool2d, "aten.avg_pool2d.default": _avg_pool2d,
    "aten.native_layer_norm.default": _layer_norm,
    "aten._native_batch_norm_legit_functional.default": _batch_norm(True),
    "aten._native_batch_norm_legit_no_training.default": _batch_norm(False),
    "aten.mean.dim": _reduce(op.mean), "aten.sum.dim_IntList": _reduce(op.sum),
    "aten.amax.default": _reduce(op.max), "aten.amin.default": _reduce(op.min),
    "aten.select.int": _select, "aten.slice.Tensor": _slice, "aten.cat.default": _cat,
    "aten.embedding.default": _embedding,
    "aten.scaled_dot_product_attention.default": _sdpa,
    "aten.full_like.default": _full_like,
    "aten.native_dropout.default": _dropout,
    "aten._to_copy.default": _to_copy, "aten._assert_tensor_metadata.default": _no_value,
    **{name: _no_value for name in ASSERTS},
    "aten.linalg_vector_norm.default": _vector_norm, "aten.var_mean.correction": _var_mean,
    "aten.prod.default": _prod, "aten.prod.dim_int": _prod,
    **{f"aten.{name}.{kind}": _any(name == "all") for name in ("any", "all") for kind in ("default", "dim", "dims")},
    "aten.gather.default": _gather,
    "aten.one_hot.default": _one_hot,
    **{f"aten.bitwise_{name}.{kind}": _binary(getattr(op, f"bitwise_{name}")) for name in ("and", "or", "xor")
       for kind in ("Tensor", "Scalar")},
    "aten._embedding_bag.default": _embedding_bag, "aten._embedding_bag_forward_only.default": _embedding_bag,
    "aten._native_batch_norm_legit.no_stats": _batch_norm_no_stats, "aten.index.Tensor": _index,
    "aten.upsample_bilinear2d.vec": _upsample_bilinear, "aten.upsample_bilinear2d.default": _upsample_bilinear,
    "aten.max_pool3d_with_indices.default": _max_pool3d, "aten.avg_pool3d.default": _avg_pool3d,
    "aten._adaptive_avg_pool3d.default": _adaptive_avg_pool3d,
    "aten.adaptive_max_pool2d.default": _adaptive_max_pool, "aten.adaptive_max_pool3d.default": _adaptive_max_pool,
    "aten._trilinear.default": _trilinear,
    "aten.clamp.Tensor": _clamp_tensor, "aten.cumprod.default": _cumprod,
    "aten.cosine_similarity.default": _cosine_similarity,
}



def torch_dtype(dtype) -> str:
    return str(dtype).replace("torch.", "")
