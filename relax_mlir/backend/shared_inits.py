"""A bound on how many ops write into one ``tensor.empty``, before One-Shot Bufferize.

CSE merges equal ``tensor.empty`` ops and equal reshapes of them, so in a function of many ops of one shape every
op's init is one value: 100 ``permute_dims`` + ``softmax`` pairs give two ``tensor.empty`` ops read by 400 ops.
One-Shot Bufferize (and ``eliminate-empty-tensors``, which runs its analysis too) then checks each in-place write
against the uses of every value aliasing it: time between quadratic and cubic in the number of writers (4.9 s
for those 100 pairs, 16 s for 200; 2-core Intel Xeon). Sharing the init is what lets writes that do not
interfere reuse one buffer (a dead value's memory), so it is kept, in groups: the writers of one init are taken in
program order, and each ``MAX_SHARED`` of them after the first get a fresh copy of the init (and of the reshapes
between it and them), so the analysis is linear. The training modules here share an init among at most 7 ops
(the tutorial MLP's and the CNNs' training steps, 2026-11-29): their code is unchanged.
"""

from __future__ import annotations

from mlir import ir

from .schedule.common import as_operation, defining_op

#: The most ops reading one ``tensor.empty`` (through reshapes or not) that One-Shot Bufferize is given.
MAX_SHARED = 16
#: The ops an init is made of: the empty tensor and reshapes of it.
_INIT_OPS = frozenset({"tensor.empty", "tensor.collapse_shape", "tensor.expand_shape"})


def bound_shared_inits(module: ir.Module, most: int = MAX_SHARED) -> int:
    """Give every ``most`` readers of one ``tensor.empty`` after the first (in program order) a copy of their own
    (module docstring); returns how many ops were cloned."""
    order: dict[ir.Operation, int] = {}
    inits: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        op = as_operation(op)
        order[op] = len(order)
        if op.name in _INIT_OPS and _root(op) is not None:
            inits.append(op)
        # (a linalg op's body holds scalars, no tensor: a fused softmax's exp polynomials are most of the module)
        return ir.WalkResult.SKIP if op.name.startswith("linalg.") else ir.WalkResult.ADVANCE

    module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    readers: dict[ir.Operation, list[tuple[ir.Operation, ir.Operation, int]]] = {}  # root: (init op, user, index)
    for init in inits:
        for use in init.results[0].uses:
            user = as_operation(use.owner)
            if user.name not in _INIT_OPS:
                readers.setdefault(_root(init), []).append((init, user, use.operand_number))
    cloned = 0
    for uses in readers.values():
        if len(uses) <= most:
            continue
        uses.sort(key=lambda use: order[use[1]])
        copies: dict[tuple[int, ir.Operation], ir.Operation] = {}
        for position, (init, user, index) in enumerate(uses):
            group = position // most
            if group:
                user.operands[index] = _copy(init, group, copies).results[0]
        cloned += len(copies)
    return cloned


def _root(op: ir.Operation) -> ir.Operation | None:
    """The ``tensor.empty`` that ``op`` (an empty tensor or a chain of reshapes) starts from, or None."""
    while op is not None and op.name != "tensor.empty":
        op = defining_op(op.operands[0]) if op.name in _INIT_OPS else None
        if op is not None and op.name not in _INIT_OPS:
            return None
    return op


def _copy(init: ir.Operation, group: int, copies: dict) -> ir.Operation:
    """Group ``group``'s copy of ``init`` (and of the inits it reshapes), made once, each next to its original."""
    key = (group, init)
    if key not in copies:
        with ir.InsertionPoint(init):
            copy = init.clone()
        if init.name != "tensor.empty":
            copy.operands[0] = _copy(defining_op(init.operands[0]), group, copies).results[0]
        copies[key] = copy
    return copies[key]
