"""What the PyTorch and ONNX importers share: the result type, the one error for unsupported ops, argument names,
and the builder that turns "inputs, parameters, states, a list of nodes" into the ``main`` function.

An importer is two passes over the graph. The first only looks up each node's op in the importer's table and
collects every op that has no entry (with the nodes that use it), so one :class:`UnsupportedOpsError` lists them
all and no module is built. The second converts node by node inside a ``BlockBuilder`` dataflow block; a problem
found there (an attribute value the op cannot take) raises at once, naming the node: either way the caller gets
a whole module or an exception, never a partial module.
"""

from __future__ import annotations

import keyword
import math
import re
from dataclasses import dataclass
from typing import Callable, Iterable, NamedTuple, Optional, Sequence

import numpy as np

from ..ir import BlockBuilder, IRModule, TensorStructInfo, Var
from ..ir.dtype import compute_dtype
from ..ir.expr import Expr, Tuple, TupleGetItem, const
from ..ir.sym import Dim, SymDim


class UnsupportedOpsError(ValueError, NotImplementedError):
    """Raised before anything is built when a graph uses ops the importer has no conversion for; ``ops`` maps
    each such op to the nodes using it. A ``ValueError`` (the model is an input the importer refuses) and a
    ``NotImplementedError``."""

    def __init__(self, frontend: str, ops: dict[str, list[str]]):
        self.ops = ops
        listed = "; ".join(f"{name} (used by {_few(nodes)})" for name, nodes in sorted(ops.items()))
        super().__init__(f"{frontend}: {len(ops)} unsupported op(s): {listed}")


def _few(nodes: Sequence[str], limit: int = 5) -> str:
    more = f" and {len(nodes) - limit} more" if len(nodes) > limit else ""
    return ", ".join(nodes[:limit]) + more


def check_supported(frontend: str, uses: Iterable[tuple[str, str]], table: dict) -> None:
    """Raise one :class:`UnsupportedOpsError` for every ``(op, node)`` pair whose op is not in ``table``."""
    missing: dict[str, list[str]] = {}
    for op_name, node in uses:
        if op_name not in table:
            missing.setdefault(op_name, []).append(node)
    if missing:
        raise UnsupportedOpsError(frontend, missing)


class ImportedModel(NamedTuple):
    """What an importer returns: ``mod, params, states = from_...(...)``.

    ``mod["main"]`` takes the inputs, then the parameters, then the states (``param_num``/``state_num`` are module
    attributes). ``params`` and ``states`` map the argument names to their NumPy values in that order, so
    ``Trainer.load_params(params)`` / ``load_states(states)`` take them as they are. TVM stores the values in
    ``mod["main"].attrs["params"]`` instead; here they stay beside the module, so the module's text (and its compile
    cache key) does not carry megabytes of weights.
    """

    mod: IRModule
    params: dict[str, np.ndarray]
    states: dict[str, np.ndarray]


class Names:
    """Turns framework names (``fc.weight``, ``onnx::MatMul_12``, ``0.bias``) into distinct Python identifiers,
    which the text format needs for argument names."""

    def __init__(self) -> None:
        self.taken: set[str] = set()

    def __call__(self, raw: str) -> str:
        name = re.sub(r"\W", "_", raw).strip("_") or "v"
        if name[0].isdigit():
            name = "p" + name
        if keyword.iskeyword(name) or name in ("R", "I", "T"):
            name += "_"
        base, i = name, 1
        while name in self.taken:
            name, i = f"{base}_{i}", i + 1
        self.taken.add(name)
        return name


def dtype_name(numpy_dtype) -> str:
    """A NumPy dtype as a Relax dtype string (``bool`` stays ``bool``)."""
    return str(np.dtype(numpy_dtype))


def build_main(inputs: Sequence[Var], params: Sequence[Var], states: Sequence[Var],
               body: Callable[[BlockBuilder], tuple[list[Expr], list[Expr]]], func_name: str = "main") -> IRModule:
    """``func_name(inputs..., params..., states...)`` whose dataflow block ``body(bb)`` emits; ``body`` returns
    the outputs and the new states. It returns the output (a tuple if several), or ``(output, new states...)``
    as ``SetupTrainer`` expects when there are states."""
    bb = BlockBuilder()
    with bb.function(func_name, [*inputs, *params, *states]):
        with bb.dataflow():
            outputs, new_states = body(bb)
            outs = [bb.emit_output(o, "output" if len(outputs) == 1 else f"output{i}") for i, o in enumerate(outputs)]
            if len(outs) > 1:
                outs = [bb.emit_output(Tuple(outs), "outputs")]
            news = [bb.emit_output(s, f"{v.name_hint}_new") for s, v in zip(new_states, states)]
        bb.emit_func_output(Tuple([outs[0], *news]) if news else outs[0])
    # Aliases (clone, the output bindings) and dead values (PyTorch's batch counter) go.
    from .. import transform

    mod = transform.Sequential([transform.CanonicalizeBindings(), transform.DeadCodeElimination()])(bb.get())
    return mod.with_attrs({"param_num": len(params), "state_num": len(states)})


def tensor_var(name: str, shape: Sequence, dtype: str) -> Var:
    return Var(name, TensorStructInfo(tuple(shape), dtype))


def dtype_of(x: Expr) -> str:
    return x.struct_info.dtype


def ndim_of(x: Expr) -> int:
    return x.struct_info.ndim


def split_pieces(x: Expr, axis: int, sizes: Sequence[Dim]) -> list[Expr]:
    """The pieces of ``x`` along ``axis``, of ``sizes`` (PyTorch's ``split``, ONNX's ``Split``). Relax's ``split``
    takes numeric indices; pieces of symbolic sizes (``z.split([n, n])`` of a ``2 * n`` batch) are slices between
    their symbolic bounds instead."""
    from .. import op

    if len(sizes) == 1:  # one piece: Relax's (TVM's) split returns the data itself, not a tuple
        return [x]
    bounds = [0]
    for size in sizes:
        bounds.append(bounds[-1] + size)
    if any(isinstance(b, SymDim) for b in bounds):
        return [op.strided_slice(x, axes=[axis], begin=[bounds[i]], end=[bounds[i + 1]]) for i in range(len(sizes))]
    pieces = op.split(x, indices_or_sections=[int(b) for b in bounds[1:-1]], axis=axis)
    return [TupleGetItem(pieces, i) for i in range(len(sizes))]


def elu(x: Expr, alpha: float, scale: float = 1.0, input_scale: float = 1.0) -> Expr:
    """ELU (no Relax op), PyTorch's ``elu(x, alpha, scale, input_scale)`` (SELU and CELU are ELUs too):
    ``scale * x`` where positive, ``scale * alpha * expm1(input_scale * x)`` elsewhere, in float32 for half floats.

    The exponential reads ``x`` only where it is not positive (0 elsewhere): ``where`` computes both branches,
    and ``exp`` of a positive ``x`` above ~88 is inf in float32, whose adjoint in the branch not taken was
    0 * inf = NaN (training stopped on a NaN gradient wherever a pre-activation was large)."""
    from .. import op

    def in_float(x: Expr) -> Expr:
        positive = op.greater(x, scalar_like(0.0, x))
        exponent = op.multiply(op.where(positive, scalar_like(0.0, x), x), scalar_like(input_scale, x))
        negative = op.multiply(expm1(exponent), scalar_like(alpha * scale, x))
        return op.where(positive, x if scale == 1 else op.multiply(x, scalar_like(scale, x)), negative)

    return in_float32(x, in_float)


#: Half floats, whose composites are computed in float32 and rounded once.
def in_float32(x: Expr, fn: Callable[[Expr], Expr]) -> Expr:
    """``fn(x)``, computed in float32 and rounded once to ``x``'s dtype if that is a half float (PyTorch's "opmath",
    and how ONNX's expected outputs are made); ``fn(x)`` otherwise. A composite rounded to bfloat16 at every step
    was far off: ELU(-0.002) was -0.0039 and ELU of every x in (-0.002, 0) was 0 (``exp(x)`` rounded to 1)."""
    from .. import op

    dtype = dtype_of(x)
    wide = compute_dtype(dtype)
    return op.astype(fn(op.astype(x, wide)), dtype) if wide != dtype else fn(x)


def expm1(z: Expr) -> Expr:
    """``exp(z) - 1`` (no Relax op) to within a few ulps for small ``z`` too, where ``exp(z) - 1`` keeps only the
    digits of ``exp(z)`` above 1's ulp (float32 ``ELU(-1e-8)`` was 0, ``ELU(-3e-8)`` -6e-8): for ``|z| < 1/2`` its
    Taylor polynomial of degree 9 (float32; 15 in float64), whose remainder is far below an ulp there; elsewhere
    ``exp(z) - 1``, of magnitude 0.39 or more, so ``exp``'s rounding costs an ulp or two at most. Float32 ELU, SELU
    and CELU are within 2 ulps of PyTorch's (``std::expm1``). The polynomial reads ``z`` clamped to
    ``[-1/2, 1/2]``, so that the branch ``where`` does not take stays finite and its adjoint is not 0 * inf; its
    derivative is ``exp``'s Taylor polynomial of one degree less."""
    from .. import op

    degree = 15 if dtype_of(z) == "float64" else 9
    near = op.clip(z, min=-0.5, max=0.5)
    series = scalar_like(1 / math.factorial(degree), z)
    for k in range(degree - 1, 0, -1):  # Horner's rule: z * (1 + z * (1/2 + z * (1/6 + ...)))
        series = op.add(op.multiply(series, near), scalar_like(1 / math.factorial(k), z))
    far = op.subtract(op.exp(z), scalar_like(1.0, z))
    return op.where(op.less(op.abs(z), scalar_like(0.5, z)), op.multiply(series, near), far)


def mish(x: Expr) -> Expr:
    """Mish (no Relax op): ``x * tanh(softplus(x))``, through Relax's softplus, whose gradient stays finite where
    ``exp(x)`` overflows (PyTorch's decomposition ``where(x > 20, x, log1p(exp(x)))`` has a NaN adjoint there)."""
    from .. import op

    return op.multiply(x, op.tanh(op.nn.softplus(x)))


def scalar_like(value, like: Expr) -> Expr:
    """A Python number as a 0-d constant of ``like``'s dtype (frameworks' scalar operands take the tensor's)."""
    return const(value, dtype_of(like))


@dataclass(frozen=True)
class Updates:
    """A converter's result that also updates states (batch-norm running statistics): ``call`` is emitted;
    the node's result ``i`` is the call's field ``results[i]`` (None: not produced); the state bound to ``b``
    gets the call's field ``updates[b]``."""

    call: Expr
    results: tuple[Optional[int], ...]
    updates: dict


def emit_updates(bb, result: Updates, name: str, states: Sequence[Var], new_state: dict) -> list:
    """Emit ``result.call``; record the new values of those of its updated values that are states; return the
    node's results."""
    call = bb.emit(result.call, name)
    fields = {i: bb.emit(TupleGetItem(call, i)) for i in {*result.results, *result.updates.values()} - {None}}
    for target, i in result.updates.items():
        if any(target is s for s in states):
            new_state[target] = fields[i]
    return [None if i is None else fields[i] for i in result.results]
