"""``FuseOpsByPattern``: the bindings a ``dpl`` pattern matches are grouped into a private function of their own,
called where the group's last binding stood, as TVM's pass of that name (with ``FusionPattern`` and
``PatternCheckContext``):

    lv = R.matmul(x, w)                  ->    y = cls.fused_dense(x, w, b)
    lv1 = R.add(lv, b)
    y = R.nn.relu(lv1)                         def fused_dense(x, w, b):      # {"Composite": "dense",
                                                   lv = R.matmul(x, w)         #  "Primitive": True}
                                                   lv1 = R.add(lv, b)
                                                   y = R.nn.relu(lv1)
                                                   return y

Patterns are tried in the order given, at every binding in order; a match takes the binding (the root) and every
binding of the same block whose value the pattern matched, provided none of them is already in a group and none
but the root is used outside the group (each group computes one value). The group's inputs, in order of first use,
become the function's parameters; constants stay inside (``bind_constants``). ``check(context)`` may refuse a
match. The function is named ``fused_<pattern name>`` (its dots as ``_``; ``_1``, ``_2``, ... when taken) with
the attributes ``Composite`` (the pattern's name) and ``Primitive``. The backend compiles each call by inlining it again (MLIR's
``inline`` before bufferization) and MLIR's elementwise fusion then fuses the group's loops where it can: the
grouping documents intent and gives the values the same names; it costs nothing at run time.
``annotate_codegen`` (TVM's wrapping for an external code generator) does not apply: there is none on this target,
so it is refused. A pattern (and an annotation pattern) may also be given as text (``dpl.parse_pattern``), which
``relax-mlir opt`` needs: ``FuseOpsByPattern(patterns=[("dense", "relax.add(relax.matmul(_, _), _)")])``. Each
entry is checked when the pass is made: a wrong element is a TypeError naming the entry and what it may be.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

from ..dpl import Pattern, parse_pattern
from ..ir.expr import BindingBlock, Call, Expr, Function, GlobalVar, MatchCast, SeqExpr, Var, VarBinding
from ..ir.struct_info import FuncStructInfo
from .pass_infra import Pass
from .utils import free_vars, group_inputs, substitute, unique_function_name


@dataclass(frozen=True)
class PatternCheckContext:
    """What a ``FusionPattern``'s ``check`` sees (TVM's class of that name): the root expression matched, the
    expressions the annotation patterns matched (by name), the bindings the group would take, every variable's
    users in the function, and each bound value's variable."""

    matched_expr: Expr
    annotated_expr: Mapping[str, Expr]
    matched_bindings: Mapping[Var, Expr]
    var_usages: Mapping[Var, Sequence[Var]]
    value_to_bound_var: Mapping[Expr, Var]


@dataclass(frozen=True)
class FusionPattern:
    """A named pattern to fuse (TVM's ``FusionPattern``): ``annotation_patterns`` name sub-patterns whose matches
    ``check`` can inspect (``context.annotated_expr``); ``check`` returns whether to fuse."""

    name: str
    pattern: Pattern
    annotation_patterns: Mapping[str, Pattern] = field(default_factory=dict)
    check: Optional[Callable[[PatternCheckContext], bool]] = None


_ENTRY = ("a FusionPattern or a tuple (name, pattern[, annotations[, check]]): name a str; pattern a dpl Pattern "
          "or its text (dpl.parse_pattern); annotations a dict of names to Patterns (or their text), or None; check "
          "a function of a PatternCheckContext returning whether to fuse, or None")


def _as_fusion_pattern(p: Any, index: int) -> FusionPattern:
    """``patterns[index]`` as a FusionPattern, every element checked where it is given: a wrong one met later
    said only what Python made of it (annotations 5: "'int' object is not iterable")."""
    where = f"FuseOpsByPattern: patterns[{index}]"
    if isinstance(p, FusionPattern):
        name, pattern, annotations, check = p.name, p.pattern, p.annotation_patterns, p.check
    elif isinstance(p, (tuple, list)) and 2 <= len(p) <= 4:
        name, pattern, annotations, check = (*p, None, None)[:4]
    else:
        raise TypeError(f"{where} is {_shown(p)}; expected {_ENTRY}")
    if not isinstance(name, str):
        raise TypeError(f"{where}: the name (element 0) is {_shown(name)}; expected a str. Each entry is {_ENTRY}")
    if annotations is not None and not isinstance(annotations, Mapping):
        raise TypeError(f"{where}: the annotations (element 2) are {_shown(annotations)}; expected a dict of names "
                        f"to Patterns (or their text), or None. Each entry is {_ENTRY}")
    if check is not None and not callable(check):
        raise TypeError(f"{where}: the check (element 3) is {_shown(check)}; expected a function of a "
                        f"PatternCheckContext returning whether to fuse, or None. Each entry is {_ENTRY}")
    annotated = {}
    for key, sub in (annotations or {}).items():
        if not isinstance(key, str):
            raise TypeError(f"{where}: the annotations (element 2) have the key {_shown(key)}; expected names (str)")
        annotated[key] = _pattern(sub, f"{where}: annotation {key!r}")
    return FusionPattern(name, _pattern(pattern, f"{where}: the pattern (element 1)"), annotated, check)


def _pattern(p: Any, where: str) -> Pattern:
    """A dpl Pattern, or its text parsed (``relax-mlir opt`` can give only text)."""
    if isinstance(p, Pattern):
        return p
    if isinstance(p, str):
        try:
            return parse_pattern(p)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
    raise TypeError(f"{where} is {_shown(p)}; expected a dpl Pattern or its text, such as 'relax.add(_, _)'")


def _shown(value: Any) -> str:
    text = repr(value)
    return f"{text[:60]}... ({type(value).__name__})" if len(text) > 60 else f"{text} ({type(value).__name__})"


@dataclass(frozen=True)
class FuseOpsByPattern(Pass):
    """Group the bindings each pattern matches into a private ``Composite`` function (TVM's ``FuseOpsByPattern``).

    Example, applied as ``FuseOpsByPattern([("dense", relax_mlir.dpl.is_op("relax.nn.relu")(relax_mlir.dpl.is_op("relax.add")(relax_mlir.dpl.is_op("relax.matmul")(relax_mlir.dpl.wildcard(), relax_mlir.dpl.wildcard()), relax_mlir.dpl.wildcard())))])``::

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((2, 4), "float32"), w: R.Tensor((4, 3), "float32"), b: R.Tensor((3,), "float32")):
                lv = R.matmul(x, w)
                lv1 = R.add(lv, b)
                y = R.nn.relu(lv1)
                return y

    becomes::

        @I.ir_module
        class Module:
            @R.function
            def main(
                x: R.Tensor((2, 4), dtype="float32"),
                w: R.Tensor((4, 3), dtype="float32"),
                b: R.Tensor((3,), dtype="float32"),
            ) -> R.Tensor((2, 3), dtype="float32"):
                y: R.Tensor((2, 3), dtype="float32") = cls.fused_dense(x, w, b)
                return y

            @R.function
            def fused_dense(
                x: R.Tensor((2, 4), dtype="float32"),
                w: R.Tensor((4, 3), dtype="float32"),
                b: R.Tensor((3,), dtype="float32"),
            ) -> R.Tensor((2, 3), dtype="float32"):
                R.func_attr({"Composite": "dense", "Primitive": True})
                lv: R.Tensor((2, 3), dtype="float32") = R.matmul(x, w)
                lv1: R.Tensor((2, 3), dtype="float32") = R.add(lv, b)
                y: R.Tensor((2, 3), dtype="float32") = R.nn.relu(lv1)
                return y
    """

    name = "FuseOpsByPattern"
    patterns: tuple = ()
    bind_constants: bool = True
    annotate_codegen: bool = False
    entry_functions: Optional[tuple[str, ...]] = None

    def __post_init__(self):
        if isinstance(self.patterns, (str, bytes, Mapping)) or not isinstance(self.patterns, Iterable):
            raise TypeError(f"FuseOpsByPattern: patterns is {_shown(self.patterns)}; expected a list of patterns, "
                            f"each {_ENTRY}")
        object.__setattr__(self, "patterns", tuple(_as_fusion_pattern(p, i) for i, p in enumerate(self.patterns)))
        super().__post_init__()
        if self.annotate_codegen:
            raise ValueError("FuseOpsByPattern: annotate_codegen wraps groups for an external code generator; this "
                             "target has none (leave it False)")
        if not self.bind_constants:
            raise ValueError("FuseOpsByPattern: bind_constants=False (constants as parameters) is not supported")
        if self.entry_functions is not None:
            object.__setattr__(self, "entry_functions", tuple(self.entry_functions))

    def transform_module(self, mod, ctx):
        out = mod.copy()
        changed = False
        for name, func in mod.items():
            if not isinstance(func, Function) or not isinstance(func.body, SeqExpr) or "Composite" in func.attrs:
                continue
            if self.entry_functions is not None and name not in self.entry_functions:
                continue
            new = self._function(func, out)
            if new is not func:
                out[name], changed = new, True
        return out if changed else mod

    def _function(self, func: Function, out) -> Function:
        var2val = {b.var: b.value for block in func.body.blocks for b in block.bindings if not isinstance(b, MatchCast)}
        usages: dict[Var, list[Var]] = {}
        for block in func.body.blocks:
            for b in block.bindings:
                for v in free_vars(b.value):
                    usages.setdefault(v, []).append(b.var)
        returned = set(free_vars(func.body.body))
        value_to_var = {id(v): k for k, v in var2val.items()}
        taken: set[Var] = set()
        blocks, changed = [], False
        for block in func.body.blocks:
            groups: dict[int, tuple[FusionPattern, list[int]]] = {}
            bindings = list(block.bindings)
            index = {b.var: i for i, b in enumerate(bindings)}
            for i in reversed(range(len(bindings))):  # roots last in a chain first: the largest group wins
                b = bindings[i]
                if b.var in taken or isinstance(b, MatchCast) or not isinstance(b.value, Call):
                    continue
                for fp in self.patterns:
                    members = self._match(fp, b, var2val, index, bindings, taken, usages, returned, value_to_var)
                    if members is not None:
                        groups[i] = (fp, members)
                        taken.update(bindings[j].var for j in members)
                        break
            if not groups:
                blocks.append(block)
                continue
            drop = {j for _, members in groups.values() for j in members}
            new = []
            for i, b in enumerate(bindings):
                if i in groups:
                    fp, members = groups[i]
                    new.append(self._outline(fp, [bindings[j] for j in sorted(members)], b, out))
                elif i not in drop:
                    new.append(b)
            blocks.append(type(block)(new))
            changed = True
        if not changed:
            return func
        return Function(func.params, SeqExpr(blocks, func.body.body), func.ret_struct_info, func.attrs, func.is_pure,
                        span=func.span)

    @staticmethod
    def _match(fp, root, var2val, index, bindings, taken, usages, returned, value_to_var) -> Optional[list[int]]:
        matches = fp.pattern.extract_matched_expr(root.value, var2val)
        if matches is None:
            return None
        members = {index[root.var]}
        for expr in matches.values():
            var = value_to_var.get(id(expr))
            if var is not None and var in index and var is not root.var and isinstance(expr, Call):
                members.add(index[var])
        group_vars = {bindings[j].var for j in members}
        if any(v in taken for v in group_vars):
            return None
        for j in members:  # one value leaves the group: its root's
            v = bindings[j].var
            if v is not root.var and (v in returned or any(u not in group_vars for u in usages.get(v, []))):
                return None
        if fp.check is not None:
            annotated = {}
            for label, sub in fp.annotation_patterns.items():
                if sub in matches:  # a node of the pattern: what it matched in this match
                    annotated[label] = matches[sub]
                    continue
                for expr in [root.value, *matches.values()]:  # a pattern of its own: the first thing it matches
                    found = sub.extract_matched_expr(expr, var2val)
                    if found is not None:
                        annotated[label] = found.get(sub, expr)
                        break
            context = PatternCheckContext(root.value, annotated, {bindings[j].var: bindings[j].value for j in members},
                                          usages, {expr: value_to_var[id(expr)] for expr in matches.values()
                                                   if id(expr) in value_to_var})
            if not fp.check(context):
                return None
        return sorted(members)

    @staticmethod
    def _outline(fp: FusionPattern, group: list, root, out) -> VarBinding:
        # a pattern name names a code generator before a dot ("dnnl.conv2d"): the function's name takes "_"
        name = "fused_" + re.sub(r"\W", "_", fp.name)
        return outline_group(name, group, root, out, {"Composite": fp.name, "Primitive": True})


def outline_group(name: str, group: list, root, out, attrs: Mapping[str, Any]) -> VarBinding:
    """Move the bindings ``group`` (in order; ``root`` the one whose value leaves it) into a new private function
    of ``out`` named ``name`` (``_1``, ``_2``, ... when taken) with ``attrs``; the binding that calls it."""
    inputs = group_inputs(group)
    params = {v: Var(v.name_hint, v.struct_info, span=v.span) for v in inputs}
    remap: dict[Var, Expr] = dict(params)
    body = []
    for b in group:
        var = Var(b.var.name_hint, b.var.struct_info, span=b.var.span)
        body.append(VarBinding(var, substitute(b.value, remap), span=b.span))
        remap[b.var] = var
    ret = root.var.struct_info
    fn = Function([params[v] for v in inputs], SeqExpr([BindingBlock(body)], remap[root.var]), ret, dict(attrs), True)
    unique = unique_function_name(name, out)
    out[unique] = fn
    gvar = GlobalVar(unique, FuncStructInfo([p.struct_info for p in fn.params], ret))
    return VarBinding(root.var, Call(gvar, tuple(inputs), {}, ret), span=root.span)
