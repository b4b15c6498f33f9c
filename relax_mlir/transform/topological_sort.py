"""``TopologicalSort(order="depth-first", direction="from-inputs")``: reorder the bindings of each dataflow block.

Only dataflow blocks are sorted, as TVM's pass does: the bindings of a plain block (the statements of an impure
function, host calls, callbacks) run in the order written, which the pass keeps. Within a dataflow block, a binding
may move anywhere after the bindings it depends on: those whose variables it reads, and the ``match_cast`` that
defines a size variable it mentions (in its value, its attributes or its struct info: ``R.zeros(R.shape([n]))``
after the cast that binds ``n``). Bindings with an effect (a host call, a callback; TVM refuses them in dataflow
blocks, relax-mlir's parser does not) also keep their order among themselves. The pass picks one such order:

* ``from-inputs``: start from what the block receives, the parameters in their order, then the values of earlier
  blocks in theirs, then the bindings that read nothing (constants); ``depth-first`` follows a new value's users as
  far as they can go before the next input's (the chain of parameter ``b1`` before that of a later ``b2``, whatever
  order they were written in, as TVM's), ``breadth-first`` emits level by level.
* ``from-outputs``: start from what leaves the block (the function's result, later blocks' uses, a dataflow
  block's outputs); ``depth-first`` emits the bindings nothing uses, then each output in the order the code after
  the block first reads them, each with its operands (recursively, first operand first) just before it, as TVM's;
  ``breadth-first`` emits the bindings in order of their distance to the outputs, farthest first.

Other ties keep the original order. The values are unchanged; only the order moves (TVM uses it to put bindings next
to their uses before a pattern rewrite).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from ..ir.expr import Call, DataflowBlock, Expr, Function, MatchCast, PrimValue, SeqExpr, ShapeExpr, Tuple, TupleGetItem
from ..ir.sym import SymDim
from .dead_code_elimination import has_effect, sinfo_size_names
from .pass_infra import Pass
from .utils import free_vars

ORDERS = ("depth-first", "breadth-first")
DIRECTIONS = ("from-inputs", "from-outputs")


@dataclass(frozen=True)
class TopologicalSort(Pass):
    """Reorder each dataflow block's bindings in a topological order (see the module docstring).

    Example, applied as ``TopologicalSort(order="depth-first", direction="from-outputs")``::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((3,), "float32")):
                with R.dataflow():
                    a = R.exp(x)
                    b = R.negative(x)
                    c = R.log(a)
                    d = R.add(c, b)
                    R.output(d)
                return d

    becomes::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((3,), dtype="float32")) -> R.Tensor((3,), dtype="float32"):
                with R.dataflow():
                    a: R.Tensor((3,), dtype="float32") = R.exp(x)
                    c: R.Tensor((3,), dtype="float32") = R.log(a)
                    b: R.Tensor((3,), dtype="float32") = R.negative(x)
                    d: R.Tensor((3,), dtype="float32") = R.add(c, b)
                    R.output(d)
                return d
    """

    order: str = "depth-first"
    direction: str = "from-inputs"
    name = "TopologicalSort"

    def __post_init__(self) -> None:
        if self.order not in ORDERS:
            raise ValueError(f"TopologicalSort: order must be one of {', '.join(ORDERS)}, got {self.order!r}")
        if self.direction not in DIRECTIONS:
            raise ValueError(f"TopologicalSort: direction must be one of {', '.join(DIRECTIONS)}, "
                             f"got {self.direction!r}")

    def transform_module(self, mod, ctx):
        out = mod.copy()
        for name, func in mod.items():
            if isinstance(func, Function):
                out[name] = self.transform_function(func, mod)
        return out

    def transform_function(self, func: Function, mod=None) -> Function:
        """``func`` with its dataflow blocks sorted; ``mod`` tells which called module functions are pure (without
        it their calls keep their relative order, as impure ones)."""
        if not isinstance(func.body, SeqExpr):
            return func
        local = {b.var: b.value for block in func.blocks for b in block.bindings if isinstance(b.value, Function)}
        known = set().union(*(sinfo_size_names(p.struct_info) for p in func.params))  # sizes defined before a block
        blocks, changed = [], False
        inputs = list(func.params)  # what a block receives, in the order a from-inputs sort starts from
        for block, after in zip(func.body.blocks, _later_uses(func.body)):
            bindings = list(block.bindings)
            if isinstance(block, DataflowBlock):
                effects = [has_effect(b.value, mod, local) for b in bindings]
                order = self._order(bindings, after, effects, known, inputs)
                changed |= any(a is not b for a, b in zip(order, bindings))
                block = type(block)(order)
            for b in bindings:  # the sizes this block's casts define are known to the next blocks
                if isinstance(b, MatchCast):
                    known |= sinfo_size_names(b.struct_info)
            inputs += [b.var for b in bindings]
            blocks.append(block)
        if not changed:
            return func
        return Function(func.params, SeqExpr(blocks, func.body.body), func.ret_struct_info, func.attrs,
                        func.is_pure, span=func.span)

    def _order(self, bindings: list, used_after: dict, effects: list[bool], known: set, inputs: list) -> list:
        """``bindings`` sorted; ``used_after`` ranks the variables the code after the block reads by first use,
        ``inputs`` are the variables defined before the block, in the order a from-inputs sort takes them."""
        index = {b.var: i for i, b in enumerate(bindings)}
        deps = [[index[v] for v in dict.fromkeys(free_vars(b.value)) if v in index] for b in bindings]
        definer: dict[str, int] = {}  # size variable -> the cast of this block that defines it
        last_effect = None
        for i, b in enumerate(bindings):
            deps[i] += [definer[n] for n in sorted(size_names(b)) if n in definer]
            if isinstance(b, MatchCast):
                for n in sinfo_size_names(b.struct_info) - known:
                    definer.setdefault(n, i)
            if effects[i]:  # effects run in the order written
                if last_effect is not None:
                    deps[i].append(last_effect)
                last_effect = i
        deps = [list(dict.fromkeys(ds)) for ds in deps]
        users: list[list[int]] = [[] for _ in bindings]
        for i, ds in enumerate(deps):
            for d in ds:
                users[d].append(i)
        if self.direction == "from-inputs":
            return [bindings[i] for i in self._from_inputs(deps, users, _reads(bindings, inputs))]
        unused = [i for i, b in enumerate(bindings) if b.var not in used_after and not users[i]]
        used = sorted((i for i, b in enumerate(bindings) if b.var in used_after),
                      key=lambda i: used_after[bindings[i].var])
        return [bindings[i] for i in self._from_outputs(deps, users, unused + used)]

    def _from_inputs(self, deps: list[list[int]], users: list[list[int]], reads: list[list[int]]) -> list[int]:
        """The sort from the inputs. Each input the block reads is a node of its own (index ``n + rank``), ahead of
        the bindings that read nothing, so that the parameters' order decides between chains; it is not emitted."""
        n, sources = len(deps), sorted(set().union(*map(set, reads)))
        node = {r: n + k for k, r in enumerate(sources)}
        deps = [ds + [node[r] for r in rs] for ds, rs in zip(deps, reads)] + [[] for _ in sources]
        users = [list(us) for us in users] + [[] for _ in sources]
        for i, rs in enumerate(reads):
            for r in rs:
                users[node[r]].append(i)
        waiting = [len(set(ds)) for ds in deps]
        ready = list(range(n, n + len(sources))) + [i for i in range(n) if waiting[i] == 0]
        out: list[int] = []
        if self.order == "breadth-first":
            queue = deque(ready)
            while queue:
                i = queue.popleft()
                out.append(i)
                for u in dict.fromkeys(users[i]):
                    waiting[u] -= 1
                    if waiting[u] == 0:
                        queue.append(u)
            return [i for i in out if i < n]
        stack = list(reversed(ready))
        while stack:
            i = stack.pop()
            out.append(i)
            for u in reversed(list(dict.fromkeys(users[i]))):
                waiting[u] -= 1
                if waiting[u] == 0:
                    stack.append(u)
        return [i for i in out if i < n]

    def _from_outputs(self, deps: list[list[int]], users: list[list[int]], outputs: list[int]) -> list[int]:
        if self.order == "breadth-first":
            depth = [0] * len(deps)
            for i in reversed(range(len(deps))):  # users come after: their depths are known
                depth[i] = max((depth[u] + 1 for u in users[i]), default=0)
            return sorted(range(len(deps)), key=lambda i: (-depth[i], i))
        out: list[int] = []
        done: set[int] = set()

        def emit(i: int) -> None:
            stack = [(i, iter(deps[i]))]
            while stack:
                node, pending = stack[-1]
                nxt = next((d for d in pending if d not in done), None)
                if nxt is None:
                    stack.pop()
                    if node not in done:
                        done.add(node)
                        out.append(node)
                else:
                    stack.append((nxt, iter(deps[nxt])))

        for i in outputs:
            emit(i)
        for i in range(len(deps)):  # anything no output reaches keeps its place at the end
            emit(i)
        return out


def _later_uses(body: SeqExpr) -> list[dict]:
    """For each block, its variables that the code after it reads, each with the place of its first such read
    (binding, operand); one backward sweep, in which the earliest read after a block is the last one recorded."""
    values = [b.value for block in body.blocks for b in block.bindings] + [body.body]
    first: dict = {}

    def read(pos: int) -> None:  # the operands of values[pos], the first one last, so that it wins
        for k, v in reversed(list(enumerate(free_vars(values[pos])))):
            first[v] = (pos, k)

    pos = len(values) - 1
    read(pos)
    out = []
    for block in reversed(body.blocks):
        out.append({b.var: first[b.var] for b in block.bindings if b.var in first})
        for _ in block.bindings:
            pos -= 1
            read(pos)
    return out[::-1]


def _reads(bindings: list, inputs: list) -> list[list[int]]:
    """For each binding, the ranks in ``inputs`` of the variables it reads that come from before the block."""
    rank = {v: k for k, v in enumerate(inputs)}
    return [sorted({rank[v] for v in free_vars(b.value) if v in rank}) for b in bindings]


def size_names(b) -> set[str]:
    """The size variables binding ``b`` mentions: in its variable's (and its cast's) struct info and anywhere in
    its value (shapes, prim values, op attributes such as ``strided_slice``'s bounds, calls' struct info)."""
    names = sinfo_size_names(b.var.struct_info)
    if isinstance(b, MatchCast):
        names |= sinfo_size_names(b.struct_info)
    return names | _expr_size_names(b.value)


def _expr_size_names(e: Expr) -> set[str]:
    if isinstance(e, Tuple):
        return set().union(*(_expr_size_names(f) for f in e.fields))
    if isinstance(e, TupleGetItem):
        return _expr_size_names(e.tuple_value)
    if isinstance(e, (ShapeExpr, PrimValue)):
        return sinfo_size_names(e.struct_info)
    if isinstance(e, Call):
        names = set().union(*(_expr_size_names(a) for a in e.args), _attr_size_names(list(e.attrs.values())))
        return names | sinfo_size_names(e.struct_info)
    if isinstance(e, Function):  # a local function may read a size of the enclosing one
        inner = [p.struct_info for p in e.params] + [e.ret_struct_info]
        names = set().union(*(sinfo_size_names(s) for s in inner))
        return names.union(*(size_names(b) for block in e.blocks for b in block.bindings))
    return set()


def _attr_size_names(value) -> set[str]:
    if isinstance(value, SymDim):
        return value.free_vars()
    if isinstance(value, (list, tuple)):
        return set().union(*(_attr_size_names(v) for v in value))
    return set()
