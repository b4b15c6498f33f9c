"""``ConvertLayout``: convolutions (and poolings) moved to the layouts asked for, and the layout carried through
the ops around them, as TVM's pass of that name:

    c = R.nn.conv2d(x, w)                      ->    x1 = R.permute_dims(x, [0, 2, 3, 1])
    r = R.nn.relu(c)                                 w1 = R.permute_dims(w, [0, 2, 3, 1])
    p = R.nn.max_pool2d(r, pool_size=2)              c1 = R.nn.conv2d(x1, w1, data_layout="NHWC", kernel_layout="OHWI")
    y = R.reshape(p, (n, -1))                        r1 = R.nn.relu(c1)
                                                     p1 = R.nn.max_pool2d(r1, pool_size=2, layout="NHWC")
    (desired_layouts =                               p = R.permute_dims(p1, [0, 3, 1, 2])
     {"relax.nn.conv2d": ["NHWC", "OHWI"]})          y = R.reshape(p, (n, -1))

``desired_layouts`` maps ``relax.nn.conv2d`` to ``[data layout, kernel layout]`` (NCHW or NHWC; OIHW, OHWI or HWIO)
and ``relax.nn.max_pool2d``/``relax.nn.avg_pool2d`` to ``[layout]``. Within each dataflow block, in order:

* a conv2d (pooling) named there reads its data and weight permuted to those layouts (each permutation of a
  variable written once) and produces its result in the data layout;
* an op whose input already is permuted follows it when it can: elementwise ops (their other operands
  permuted alike when they have rank 4; scalars as they are), the poolings (their ``layout`` changes) and
  ``batch_norm`` (its ``axis`` follows the channels; the statistics it returns are unchanged);
* any other op, a binding leaving the block (an ``R.output``) and an elementwise op with an operand of rank 1 to 3
  (whose broadcasting is by the original axes) read the value permuted back, computed once where first needed.

Values are unchanged (permutations only move data). Plain (non-dataflow) blocks are left as they are. The
backend compiles NHWC convolutions and poolings as NCHW ones between permutations (its schedules are NCHW's), so
on this target the pass changes the IR, not the speed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from .. import op
from ..ir.expr import Call, DataflowBlock, DataflowVar, Function, SeqExpr, Tuple, TupleGetItem, Var, VarBinding
from ..ir.struct_info import TensorStructInfo
from ..op.nn.conv import DATA_LAYOUTS, KERNEL_LAYOUTS, inverse_permutation
from ..op.registry import Elementwise, Op
from .pass_infra import Pass
from .utils import free_vars

_CONV = "relax.nn.conv2d"
_POOLS = ("relax.nn.max_pool2d", "relax.nn.avg_pool2d")
_BATCH_NORM = "relax.nn.batch_norm"
Perm = tuple[int, ...]


def _compose(first: Perm, then: Perm) -> Perm:
    """The permutation ``transpose(transpose(x, first), then)`` is of ``x``."""
    return tuple(first[i] for i in then)


def _between(src: str, dst: str) -> Perm:
    """The permutation taking an array in data layout ``src`` to ``dst``."""
    return _compose(inverse_permutation(DATA_LAYOUTS[src]), DATA_LAYOUTS[dst])


def _identity(p: Perm) -> bool:
    return p == tuple(range(len(p)))


def _rank(e) -> int:
    sinfo = getattr(e, "struct_info", None)
    return sinfo.ndim if isinstance(sinfo, TensorStructInfo) else -1


@dataclass(frozen=True)
class ConvertLayout(Pass):
    """Move conv2d (and poolings) to the desired layouts and carry the layout through the ops around them
    (TVM's ``ConvertLayout``).

    Example, applied as ``ConvertLayout({"relax.nn.conv2d": ["NHWC", "OHWI"]})``::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((1, 3, 8, 8), "float32"), w: R.Tensor((4, 3, 3, 3), "float32")):
                with R.dataflow():
                    c = R.nn.conv2d(x, w, padding=1)
                    r = R.nn.relu(c)
                    R.output(r)
                return r

    becomes::

        @I.ir_module
        class Module:
            @R.function
            def main(
                x: R.Tensor((1, 3, 8, 8), dtype="float32"),
                w: R.Tensor((4, 3, 3, 3), dtype="float32"),
            ) -> R.Tensor((1, 4, 8, 8), dtype="float32"):
                with R.dataflow():
                    x_nhwc: R.Tensor((1, 8, 8, 3), dtype="float32") = R.permute_dims(x, axes=(0, 2, 3, 1))
                    w_ohwi: R.Tensor((4, 3, 3, 3), dtype="float32") = R.permute_dims(w, axes=(0, 2, 3, 1))
                    c_nhwc: R.Tensor((1, 8, 8, 4), dtype="float32") = R.nn.conv2d(x_nhwc, w_ohwi, padding=(1, 1, 1, 1), data_layout="NHWC", kernel_layout="OHWI", out_layout="NHWC")
                    r_nhwc: R.Tensor((1, 8, 8, 4), dtype="float32") = R.nn.relu(c_nhwc)
                    r: R.Tensor((1, 4, 8, 8), dtype="float32") = R.permute_dims(r_nhwc, axes=(0, 3, 1, 2))
                    R.output(r)
                return r
    """

    name = "ConvertLayout"
    desired_layouts: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        if not isinstance(self.desired_layouts, Mapping) or not self.desired_layouts:
            raise ValueError('ConvertLayout: desired_layouts must map op names to layouts, e.g. '
                             '{"relax.nn.conv2d": ["NHWC", "OHWI"]}')
        checked = {}
        for name, layouts in self.desired_layouts.items():
            layouts = [layouts] if isinstance(layouts, str) else list(layouts)
            if name == _CONV:
                if len(layouts) != 2 or layouts[0] not in DATA_LAYOUTS or layouts[1] not in KERNEL_LAYOUTS:
                    raise ValueError(f"ConvertLayout: {name} takes [data layout, kernel layout] with the data layout "
                                     f"one of {', '.join(DATA_LAYOUTS)} and the kernel layout one of "
                                     f"{', '.join(KERNEL_LAYOUTS)}; got {layouts!r}")
            elif name in _POOLS:
                if len(layouts) != 1 or layouts[0] not in DATA_LAYOUTS:
                    raise ValueError(f"ConvertLayout: {name} takes [layout], one of {', '.join(DATA_LAYOUTS)}; "
                                     f"got {layouts!r}")
            else:
                raise ValueError(f"ConvertLayout: no layout conversion for {name!r}; the ops it converts are "
                                 f"{', '.join((_CONV,) + _POOLS)}")
            checked[name] = tuple(layouts)
        object.__setattr__(self, "desired_layouts", checked)
        super().__post_init__()

    def transform_module(self, mod, ctx):
        out, changed = mod.copy(), False
        for name, func in mod.items():
            if not isinstance(func, Function) or not isinstance(func.body, SeqExpr):
                continue
            blocks = [_Block(self.desired_layouts, b).run() if isinstance(b, DataflowBlock) else b
                      for b in func.body.blocks]
            if any(a is not b for a, b in zip(blocks, func.body.blocks)):
                out[name] = Function(func.params, SeqExpr(blocks, func.body.body), func.ret_struct_info, func.attrs,
                                     func.is_pure, span=func.span)
                changed = True
        return out if changed else mod


class _Block:
    """One dataflow block rewritten: ``alt[v] = (w, p)`` says variable ``w`` holds ``transpose(v, p)``;
    ``pending`` holds the original variables whose own binding was replaced and is not written yet."""

    def __init__(self, desired: Mapping[str, tuple[str, ...]], block: DataflowBlock):
        self.desired, self.block = desired, block
        self.alt: dict[Var, tuple[Var, Perm]] = {}
        self.tuple_alt: dict[Var, tuple[Var, int, Perm]] = {}  # batch_norm results: field 0 permuted
        self.permuted: dict[tuple[Var, Perm], Var] = {}
        self.pending: set[Var] = set()
        self.out: list = []
        self.changed = False

    def run(self) -> DataflowBlock:
        for b in self.block.bindings:
            if not (isinstance(b, VarBinding) and self.rewrite(b)):
                for v in free_vars(b.value):
                    self.materialize(v)
                self.out.append(b)
        for b in self.block.bindings:  # what leaves the block, as it was
            if not isinstance(b.var, DataflowVar):
                self.materialize(b.var)
        return DataflowBlock(self.out) if self.changed else self.block

    # -- values in the right layout -------------------------------------------------------------------------
    def emit(self, name: str, value) -> Var:
        var = DataflowVar(name, value.struct_info)
        self.out.append(VarBinding(var, value))
        self.changed = True
        return var

    def in_perm(self, v, perm: Perm, suffix: str):
        """``v`` (an original value) transposed by ``perm``."""
        if _identity(perm):
            self.materialize(v)
            return v
        if isinstance(v, Var) and v in self.alt and self.alt[v][1] == perm:
            return self.alt[v][0]
        key = (v, perm)
        if isinstance(v, Var) and key in self.permuted:
            return self.permuted[key]
        self.materialize(v)
        var = self.emit(f"{getattr(v, 'name_hint', 'lv')}_{suffix}", op.permute_dims(v, perm))
        if isinstance(v, Var):
            self.permuted[key] = var
        return var

    def materialize(self, v) -> None:
        """Bind the original variable ``v`` if its own binding was replaced by a permuted one."""
        if v not in self.pending:
            return
        self.pending.discard(v)
        if v in self.alt:
            w, perm = self.alt[v]
            self.out.append(VarBinding(v, op.permute_dims(w, inverse_permutation(perm))))
        else:  # a batch_norm tuple: its first field permuted back, the others as they are
            w, index, perm = self.tuple_alt[v]
            fields = []
            for i in range(len(v.struct_info.fields)):
                field_var = self.emit(f"{v.name_hint}_{i}", TupleGetItem(w, i))
                if i == index:
                    field_var = self.emit(f"{v.name_hint}_{i}", op.permute_dims(field_var, inverse_permutation(perm)))
                fields.append(field_var)
            self.out.append(VarBinding(v, Tuple(fields)))

    def replaced(self, b: VarBinding, name: str, value, perm: Perm) -> bool:
        self.alt[b.var] = (self.emit(name, value), perm)
        self.pending.add(b.var)
        return True

    # -- the ops --------------------------------------------------------------------------------------------
    def rewrite(self, b: VarBinding) -> bool:
        """Emit ``b`` in a converted form and return True, or return False to keep it."""
        value = b.value
        if isinstance(value, TupleGetItem) and isinstance(value.tuple_value, Var) and \
                value.tuple_value in self.tuple_alt:
            w, index, perm = self.tuple_alt[value.tuple_value]
            if value.index == index:
                return self.replaced(b, f"{b.var.name_hint}_{_suffix(perm)}", TupleGetItem(w, index), perm)
            self.out.append(VarBinding(b.var, TupleGetItem(w, value.index)))
            self.changed = True
            return True
        if not isinstance(value, Call) or not isinstance(value.op, Op):
            return False
        name = value.op.name
        if name == _CONV and _CONV in self.desired:
            return self.conv(b, *self.desired[_CONV])
        if name in _POOLS:
            return self.pool(b)
        if name == _BATCH_NORM:
            return self.batch_norm(b)
        if isinstance(value.op.lowering, Elementwise):
            return self.elementwise(b)
        return False

    def conv(self, b: VarBinding, data_layout: str, kernel_layout: str) -> bool:
        call = b.value
        a = call.attrs
        d0, k0, o0 = a["data_layout"], a["kernel_layout"], a["out_layout"] or a["data_layout"]
        if (d0, k0, o0) == (data_layout, kernel_layout, data_layout):
            return False
        x = self.in_perm(call.args[0], _between(d0, data_layout), data_layout.lower())
        kperm = _compose(inverse_permutation(KERNEL_LAYOUTS[k0]), KERNEL_LAYOUTS[kernel_layout])
        w = self.in_perm(call.args[1], kperm, kernel_layout.lower())
        new = op.nn.conv2d(x, w, **dict(a, data_layout=data_layout, kernel_layout=kernel_layout,
                                        out_layout=data_layout))
        return self.replaced(b, f"{b.var.name_hint}_{data_layout.lower()}", new, _between(o0, data_layout))

    def pool(self, b: VarBinding) -> bool:
        call = b.value
        x, a = call.args[0], call.attrs
        l0, o0 = a["layout"], a["out_layout"] or a["layout"]
        if call.op.name in self.desired:
            target = self.desired[call.op.name][0]
        elif isinstance(x, Var) and x in self.alt:
            target = next((lay for lay in DATA_LAYOUTS if _between(l0, lay) == self.alt[x][1]), None)
            if target is None:
                return False
        else:
            return False
        if (l0, o0) == (target, target):
            return False
        new = call.op(self.in_perm(x, _between(l0, target), target.lower()),
                      **dict(a, layout=target, out_layout=target))
        return self.replaced(b, f"{b.var.name_hint}_{target.lower()}", new, _between(o0, target))

    def batch_norm(self, b: VarBinding) -> bool:
        call = b.value
        x = call.args[0]
        if not (isinstance(x, Var) and x in self.alt and _rank(x) == 4):
            return False
        w, perm = self.alt[x]
        axis = call.attrs["axis"] % 4
        new = call.op(w, *call.args[1:], **dict(call.attrs, axis=perm.index(axis)))
        var = self.emit(f"{b.var.name_hint}_{_suffix(perm)}", new)
        self.tuple_alt[b.var] = (var, 0, perm)
        self.pending.add(b.var)
        return True

    def elementwise(self, b: VarBinding) -> bool:
        call = b.value
        perms = {self.alt[a][1] for a in call.args if isinstance(a, Var) and a in self.alt}
        if len(perms) != 1 or _rank(b.var) != 4:
            return False
        (perm,) = perms
        if any(_rank(a) not in (0, 4) for a in call.args):
            return False  # broadcasting by the original axes
        args = [a if _rank(a) == 0 else self.in_perm(a, perm, _suffix(perm)) for a in call.args]
        new = Call(call.op, args, call.attrs, call.op.infer_struct_info(args, call.attrs))
        return self.replaced(b, f"{b.var.name_hint}_{_suffix(perm)}", new, perm)


def _suffix(perm: Perm) -> str:
    """A name suffix for a value permuted by ``perm``: the data layout it takes NCHW to, if it is one."""
    return next((name.lower() for name, p in DATA_LAYOUTS.items() if p == perm and name != "NCHW"), "alt")

