"""``from_exported_program``: a ``torch.export.ExportedProgram`` as a Relax module (TVM's
``relax.frontend.torch.from_exported_program``).

::

    ep = torch.export.export(model.train(), (example_x,))
    mod, params, states = from_exported_program(ep)
    # mod["main"](x, <parameters in ep's order>, <buffers the model updates: batch-norm running statistics>)

The program is first decomposed to the core ATen op set (``ep.run_decompositions()``), keeping
``scaled_dot_product_attention`` whole so that it becomes ``R.nn.attention``. Each ATen op is one entry of
``CONVERTERS`` (:mod:`.torch_converters`); an op missing there is reported with every other missing one
before anything is built.

Buffers: those a batch norm reads as running statistics (and any other buffer the program updates in place) are
states: ``main`` returns ``(output, new states...)``. PyTorch's ``num_batches_tracked`` counter is dropped (it
only matters for ``momentum=None``, which is refused). Other buffers and lifted constants become constants.
A batch norm is imported in its inference form (``training=False``) whatever mode the model was exported in:
``SetupTrainer`` switches it to the training form, as TVM does. One difference remains: PyTorch updates the
running variance with the unbiased batch variance, Relax's batch norm (as TVM's) with the biased one, so running
variances drift apart by a factor ``n / (n - 1)`` of each step's share; the forward pass, the loss and the
parameters are unaffected in training.

Frozen parameters (``requires_grad=False`` when exported: a fine-tuned model's fixed layers) are constants of the
module, not parameters: ``SetupTrainer`` trains what PyTorch's optimizer would, and leaves them as they are.
Stop-gradients are kept: ``x.detach()`` and the results of a ``with torch.no_grad():`` block go through
``R.grad.no_grad`` (the identity, through which no gradient flows), so straight-through estimators
(``h + (torch.round(h) - h).detach()``) and scales computed without gradient train as in PyTorch.

Dynamic sizes (``dynamic_shapes={"x": {0: torch.export.Dim("batch")}}``) are symbolic Relax sizes named by torch's
symbols (``s77``: torch does not keep the ``Dim``'s name), as in TVM; shape arithmetic (``x.shape[0]``, ``view``
and ``expand`` to symbolic sizes, ``2 * batch``, ``arange(seq)``) becomes Relax size expressions, and a size that
none can express (data-dependent, ``Max``) is refused naming the node: see
:class:`~.torch_converters.SymbolicSizes`. Their range constraints (``min``, ``max``) are not checked.
"""

from __future__ import annotations

import operator
import warnings
from typing import Any, Optional, Sequence

import numpy as np

from ..ir import Var
from .. import op
from ..ir.dtype import is_floating, to_numpy
from ..ir.expr import Expr, const
from .common import ImportedModel, Names, Updates, build_main, check_supported, emit_updates, tensor_var
from .torch_converters import (CONVERTERS, FRONTEND, SymbolicSizes, TorchImportError, node_error, result_dtype,
                               shape_of, size_value, torch_dtype, using_sizes)

__all__ = ["from_exported_program", "from_fx", "CONVERTERS", "TorchImportError"]

# Buffers these ops read as running statistics (argument positions): they are states, updated by the op.
_STATE_ARGS = {"aten._native_batch_norm_legit_functional.default": (3, 4),
               "aten._native_batch_norm_legit_no_training.default": (3, 4)}
# Ops kept whole by the decomposition because Relax has them whole (attention, softplus, one_hot: its
# decomposition checks the classes with asserts, Relax's one_hot raises for them), or because their
# decomposition's gradient is NaN where ``exp`` overflows in a ``where`` branch not taken (mish, celu) or wrong at a
# kink the function does not have (log_sigmoid at 0), or has no gradient where PyTorch's has one (cosine_similarity:
# its norms are clamped to eps under NoGradGuard, the decomposition's clamp stops their gradient) or passes one on a
# bound where PyTorch's is 0 (hardswish, hardsigmoid: their decomposition is ``clamp``, whose gradient passes on its
# bounds, as PyTorch's own clamp's does; hardswish'(-3) is 0): see their converters. Recurrent layers are unrolled by :mod:`.rnn`: PyTorch's decomposition drops a training export's
# dropout between layers.
_KEEP_WHOLE = ("scaled_dot_product_attention.default", "softplus.default", "mish.default", "celu.default",
               "log_sigmoid.default", "one_hot.default", "aten.lstm.input", "aten.gru.input", "aten.rnn_tanh.input",
               "aten.rnn_relu.input", "cosine_similarity.default", "hardswish.default",
               "hardsigmoid.default")
# The higher-order op of a ``with torch.no_grad():`` (or ``torch.set_grad_enabled(False)``) block.
_NO_GRAD_BLOCK = "wrap_with_set_grad_enabled"
_DETACH = "aten.detach.default"
# Buffers PyTorch updates that nothing reads once momentum is fixed (see the module docstring).
_DROPPED_BUFFERS = ("num_batches_tracked",)


def from_exported_program(exported_program, keep_params_as_input: bool = True, *, func_name: str = "main",
                          run_decompositions: bool = True) -> ImportedModel:
    """Import a ``torch.export.ExportedProgram``: ``mod, params, states = from_exported_program(ep)``.

    ``mod[func_name]`` takes the user inputs, then the parameters, then the states (buffers the program updates,
    such as batch-norm running statistics), and returns the output, or ``(output, new states...)`` if there are
    states; ``param_num``/``state_num`` are set, so ``SetupTrainer`` takes the module as it is. ``params`` and
    ``states`` map argument names to NumPy values (see :class:`ImportedModel`). A parameter that does not require
    a gradient (frozen) is a constant of the module, not in ``params``: trained, it stays as it is, as in PyTorch.
    With ``keep_params_as_input=False`` parameters and buffers are constants of the module instead (for inference).
    Every op without a converter is listed in one :class:`UnsupportedOpsError` before anything is built.
    """
    import torch

    if not isinstance(exported_program, torch.export.ExportedProgram):
        raise TypeError(f"{FRONTEND}: expected a torch.export.ExportedProgram (torch.export.export(model, args)), "
                        f"got {type(exported_program).__name__}")
    ep = _decompose(exported_program) if run_decompositions else exported_program
    calls = [n for n in ep.graph.nodes if n.op == "call_function" and n.target is not operator.getitem]
    check_supported(FRONTEND, ((str(n.target), n.name) for n in calls if not _is_size(n)), CONVERTERS)
    stops = _stop_gradients(exported_program, ep)
    with using_sizes(SymbolicSizes(_user_inputs(ep))):
        graph = _Signature(ep, calls, keep_params_as_input)
        mod = build_main(graph.inputs, graph.params, graph.states, lambda bb: _convert(bb, ep, graph, stops),
                         func_name)
    return ImportedModel(mod, graph.values(graph.params), graph.values(graph.states))


def _user_inputs(ep) -> list:
    """The placeholders of the program's tensor inputs (whose dimensions define its symbolic sizes)."""
    users = {s.arg.name for s in ep.graph_signature.input_specs if s.kind.name == "USER_INPUT"}
    return [n for n in ep.graph.nodes if n.op == "placeholder" and n.name in users
            and hasattr(n.meta.get("val"), "shape")]


def _is_size(node) -> bool:
    """Whether a node computes a number from sizes (``aten.sym_size.int``, ``operator.mul`` of two sizes, a
    condition on them) rather than a tensor: its value is a Relax dimension (:func:`.torch_converters.size_value`).
    ATen's other ops with a number result (``.item()``) go through the op table (and are refused there)."""
    import torch

    target = str(node.target)
    return isinstance(node.meta.get("val"), (int, float, torch.SymInt, torch.SymFloat, torch.SymBool)) and (
        not target.startswith("aten.") or target.startswith("aten.sym_"))


def from_fx(module, input_info: Sequence[tuple[Sequence[int], str]], keep_params_as_input: bool = True, *,
            func_name: str = "main") -> ImportedModel:
    """TVM's ``from_fx(graph_module, [(shape, dtype), ...])``: the module (a ``torch.fx.GraphModule`` or any
    ``nn.Module``) is exported with ``torch.export`` on zero inputs of those shapes and dtypes, then imported by
    :func:`from_exported_program` (the same result)."""
    import torch

    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"from_fx: expected a torch.fx.GraphModule (or an nn.Module), got {type(module).__name__}")
    examples = []
    for i, info in enumerate(input_info):
        try:
            shape, dtype = info
            examples.append(torch.zeros(tuple(shape), dtype=getattr(torch, dtype)))
        except (TypeError, ValueError, AttributeError):
            raise ValueError(f"from_fx: input_info[{i}] must be (shape, dtype) such as ((8, 3), 'float32'), "
                             f"got {info!r}") from None
    return from_exported_program(torch.export.export(module, tuple(examples)), keep_params_as_input,
                                 func_name=func_name)


def _decompose(ep):
    """Core ATen, except the ops Relax has whole (attention)."""
    import torch

    table = torch.export.default_decompositions()
    for key in list(table.keys()):
        if any(str(key).endswith(name) for name in _KEEP_WHOLE):
            del table[key]
    return ep.run_decompositions(table)


def _stop_gradients(original, ep) -> set[str]:
    """The nodes of ``ep`` (``original`` decomposed, or ``original`` itself) whose values gradients must not flow
    through: what a ``detach`` became and the results of a ``torch.no_grad()`` block that are used after it.

    The decomposition leaves no mark of either: it turns ``aten.detach`` into ``aten.alias`` (which is also a plain
    alias, gradients flowing) and inlines a no-grad block (``wrap_with_set_grad_enabled(False, body, ...)``). Each
    decomposed node records the node of ``original`` it was made from (``meta["from_node"]``), which tells them.
    A stop that cannot be found this way is warned about: training would pass gradients through it. (A program
    decomposed before it is given here keeps its detaches, as aliases made from them, but not its no-grad blocks.)"""
    nodes = {n.name: n for n in original.graph.nodes}

    def origin(node):
        if ep is original:
            return node
        for source in node.meta.get("from_node") or ():
            made_from = nodes.get(source.name)
            if made_from is not None and str(made_from.target) == source.target:
                return made_from
        return None

    def no_grad_block(node) -> bool:
        return str(node.target) == _NO_GRAD_BLOCK and node.args[0] is False

    def detach(node) -> bool:  # (or the alias of a program decomposed before it came here)
        return str(node.target) == _DETACH or (str(node.target) == "aten.alias.default" and any(
            source.target == _DETACH for source in node.meta.get("from_node") or ()))

    stops, found = set(), set()
    for node in ep.graph.nodes:
        source = origin(node) if node.op == "call_function" else None
        if source is None:
            continue
        if detach(source):
            stops.add(node.name)
            found.add(source.name)
        elif no_grad_block(source):
            found.add(source.name)
            if any(user.op == "output" or origin(user) is not source for user in node.users):
                stops.add(node.name)  # a result of the block (not a value only the block uses)
    lost = [n.name for n in original.graph.nodes if n.op == "call_function" and n.users and n.name not in found
            and (detach(n) or no_grad_block(n))]
    if lost:
        warnings.warn(f"{FRONTEND}: cannot tell what the decomposition made of {', '.join(lost)} (detach or "
                      "torch.no_grad()): trained, gradients would flow through them", RuntimeWarning, stacklevel=3)
    return stops


def _stop_gradient(value):
    """``value`` (a converter's result) through ``grad.no_grad`` (identity, no gradient), each float tensor of it."""
    if isinstance(value, list):
        return [_stop_gradient(v) for v in value]
    dtype = getattr(getattr(value, "struct_info", None), "dtype", None)
    if isinstance(value, Expr) and dtype and dtype.startswith(("float", "bfloat")):
        return op.grad.no_grad(value)
    return value


class _Signature:
    """The program's placeholders sorted into user inputs, parameters, states and constants, as Relax values."""

    def __init__(self, ep, calls, keep_params_as_input: bool):
        from torch.export.graph_signature import InputKind

        self.env: dict[str, Any] = {}
        self.arrays: dict[Var, np.ndarray] = {}
        self.inputs, self.params, self.states = [], [], []
        self.buffer_of: dict[str, Var] = {}  # buffer target -> state Var
        stateful = {n.args[i].name for n in calls for i in _STATE_ARGS.get(str(n.target), ())}
        mutated = {s.target for s in ep.graph_signature.output_specs if s.kind.name == "BUFFER_MUTATION"}
        nodes = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
        names = Names()
        tied: dict[tuple, Var] = {}  # a parameter's memory -> its Var
        for spec in ep.graph_signature.input_specs:
            node = nodes[spec.arg.name]
            if spec.kind == InputKind.USER_INPUT:
                val = node.meta["val"]
                if not hasattr(val, "shape"):
                    raise TorchImportError(f"{FRONTEND}: input {node.name} is a {type(val).__name__} ({val!r}), not a "
                                           "tensor; only tensor inputs are supported (pass it as a tensor, or leave it "
                                           "out of the example arguments so that export bakes it in)")
                self._bind(node, tensor_var(names(node.name), shape_of(val.shape, node), torch_dtype(val.dtype)))
                self.inputs.append(self.env[node.name])
                continue
            if spec.kind not in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
                raise TorchImportError(f"{FRONTEND}: input {node.name} of kind {spec.kind.name} is not supported")
            tensor = ep.state_dict[spec.target] if spec.target in ep.state_dict else ep.constants[spec.target]
            array = _numpy(tensor)
            is_state = spec.kind == InputKind.BUFFER and (node.name in stateful or spec.target in mutated) \
                and not spec.target.endswith(_DROPPED_BUFFERS)
            trained = spec.kind == InputKind.PARAMETER and getattr(tensor, "requires_grad", True)
            key = _storage_key(tensor)
            if keep_params_as_input and trained and key in tied:
                self._bind(node, tied[key])  # a weight tied to an earlier one (PyTorch's named_parameters lists one)
                continue
            if keep_params_as_input and (trained or is_state):
                var = tensor_var(names(spec.target), array.shape, str(array.dtype))
                if spec.kind == InputKind.PARAMETER and key is not None:
                    tied[key] = var
                (self.params if spec.kind == InputKind.PARAMETER else self.states).append(var)
                self.arrays[var] = array
                self._bind(node, var)
                if is_state:
                    self.buffer_of[spec.target] = var
            else:
                self._bind(node, const(array, str(array.dtype)))

    def _bind(self, node, value) -> None:
        self.env[node.name] = value

    def values(self, variables: Sequence[Var]) -> dict[str, np.ndarray]:
        return {v.name_hint: self.arrays[v] for v in variables}


def _storage_key(tensor) -> Optional[tuple]:
    """Where a tensor's values live (storage, offset, shape, strides, dtype): two parameters with one key are one
    weight tied to another (an embedding shared with the output layer); None if it cannot tell."""
    try:
        return (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape),
                tuple(tensor.stride()), str(tensor.dtype))
    except (AttributeError, RuntimeError, TypeError):
        return None


def _numpy(tensor) -> np.ndarray:
    return tensor.detach().cpu().contiguous().numpy().copy()


def _convert(bb, ep, graph: _Signature, stops: set[str]) -> tuple[list[Expr], list[Expr]]:
    """Emit every node; return the user outputs and the states' new values. The values of the nodes in ``stops``
    go through ``grad.no_grad``."""
    env = graph.env
    new_state: dict[Var, Expr] = {}
    for node in ep.graph.nodes:
        if node.op != "call_function":
            continue
        if node.target is operator.getitem:
            item = _getitem(node, env)
            env[node.name] = bb.emit(_stop_gradient(item), node.name) if node.name in stops else item
            continue
        if _is_size(node):
            env[node.name] = size_value(node)
            continue
        args, kwargs = _resolve(node.args, env), _resolve(node.kwargs, env)
        result = _promoted_convert(bb, node, args, kwargs)
        if node.name in stops:
            result = _stop_gradient(result)
        if isinstance(result, Updates):
            env[node.name] = emit_updates(bb, result, node.name, graph.states, new_state)
        elif result is None:
            env[node.name] = None
        elif isinstance(result, list):
            env[node.name] = [None if r is None else bb.emit(r, node.name) for r in result]
        else:
            env[node.name] = result if isinstance(result, Var) else bb.emit(result, node.name)
    outputs = []
    for spec in ep.graph_signature.output_specs:
        value = env[spec.arg.name]
        if spec.kind.name == "USER_OUTPUT":
            if not isinstance(value, Expr):
                raise TorchImportError(f"{FRONTEND}: output {spec.arg.name} is the number {value}, not a tensor; "
                                       "only tensor outputs are supported")
            outputs.append(value)
        elif spec.kind.name == "BUFFER_MUTATION":
            if spec.target in graph.buffer_of:
                new_state[graph.buffer_of[spec.target]] = value
        else:
            raise TorchImportError(f"{FRONTEND}: output {spec.arg.name} of kind {spec.kind.name} is not supported")
    missing = [v.name_hint for v in graph.states if v not in new_state]
    if missing:
        raise TorchImportError(f"{FRONTEND}: no new value for the state(s) {', '.join(missing)}")
    return outputs, [new_state[v] for v in graph.states]


def _getitem(node, env):
    source, index = node.args
    value = env[source.name][index]
    if value is None:
        raise node_error(node, f"result {index} of {source.name} ({source.target}) is used, but the importer does not "
                          "produce it (for example max-pool indices or batch-norm saved statistics)")
    return value


#: The order of dtype kinds in PyTorch's type promotion: a bool operand of an int result, an int one of a float.
_KINDS = {"b": 0, "u": 1, "i": 1, "f": 2}


def _kind(dtype: str) -> str:
    """The kind of a Relax dtype for ``_KINDS``: bfloat16 (ml_dtypes, NumPy kind "V") is a float."""
    np_dtype = np.dtype(to_numpy(dtype))
    return "f" if is_floating(np_dtype) else np_dtype.kind


def _promoted_convert(bb, node, args, kwargs):
    """A node's conversion, its tensor operands first brought to the dtype PyTorch recorded for its result where
    they are of a lower kind or narrower and the converter did not (``int32.sum()`` is int64 in PyTorch, an int
    tensor clamped to float bounds float32, ``torch.cat`` of float32 and int64 float32, a bool tensor summed
    int64: Relax's ops take one dtype and keep it); an op's refusal of what remains names the node."""
    convert = CONVERTERS[str(node.target)]
    want = result_dtype(node)
    try:
        result = convert(node, args, kwargs)
    except TorchImportError:
        raise
    except (ValueError, TypeError) as exc:
        promoted = _promote(bb, node, (args, kwargs), want)
        if promoted is not None:
            try:
                return convert(node, *promoted)
            except (ValueError, TypeError):
                pass
        hint = "; a symbolic size where its conversion needs a static one" if "SymDim" in str(exc) else ""
        raise node_error(node, f"{exc}{hint}") from None
    sinfo = getattr(result, "struct_info", None)
    if want and isinstance(result, Expr) and getattr(sinfo, "dtype", want) not in (want, None, ""):
        promoted = _promote(bb, node, (args, kwargs), want)
        if promoted is not None:
            return convert(node, *promoted)
    return result


def _promote(bb, node, value, want):
    """``value`` (a node's args and kwargs) with each tensor of a lower dtype than ``want`` cast to it (a bool
    stays bool under a float result: ``where``'s condition), or None when none is."""
    if not want or _kind(want) not in _KINDS:
        return None
    target, target_kind = np.dtype(to_numpy(want)), _kind(want)
    cast = [False]

    def walk(v):
        if isinstance(v, (list, tuple)):
            return type(v)(walk(x) for x in v)
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        dtype = getattr(getattr(v, "struct_info", None), "dtype", None)
        if not isinstance(v, Expr) or not dtype or dtype == want:
            return v
        kind, size = _kind(dtype), np.dtype(to_numpy(dtype)).itemsize
        lower = _KINDS.get(kind, 9) < _KINDS[target_kind] or (kind == target_kind and size < target.itemsize)
        if not lower or (kind == "b" and target_kind == "f"):
            return v
        cast[0] = True
        return bb.emit(op.astype(v, want), f"{node.name}_{want}")

    out = walk(value)
    return out if cast[0] else None


def _resolve(value, env):
    """Node arguments with graph nodes replaced by their Relax values."""
    import torch.fx

    if isinstance(value, torch.fx.Node):
        return env[value.name]
    if isinstance(value, (list, tuple)):
        return type(value)(_resolve(v, env) for v in value)
    if isinstance(value, dict):
        return {k: _resolve(v, env) for k, v in value.items()}
    return value
