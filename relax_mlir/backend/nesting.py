"""Tuples across the native boundary: compiled functions take and return flat lists of arrays; a Relax
function's parameters and results may be nested tuples. A *tree* says how: ``None`` is one tensor, a list is a
tuple of trees. ``(x, (w, b))`` has the tree ``[None, [None, None]]``.

Trees are plain JSON, so a library loaded without the compiler (``relax_mlir.runtime.load_module``) nests and
flattens exactly as the ``VirtualMachine`` does.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Union

from .runtime import ArgumentError

Tree = Optional[list]  # None: a tensor; a list of trees: a tuple


def check_tree(tree: Any, where: str) -> Tree:
    """``tree`` if it is one (read from a file), else ValueError naming ``where``."""
    if tree is None:
        return None
    if not isinstance(tree, list):
        raise ValueError(f"{where}: a tuple structure is null or a list, got {type(tree).__name__}")
    for i, t in enumerate(tree):
        check_tree(t, f"{where}[{i}]")
    return tree


def nest_by_tree(values: Sequence[Any], tree: Tree) -> tuple[Any, int]:
    """Rebuild the nesting of a flattened tuple (depth-first) from its leading values: (nested, count used)."""
    if tree is None:
        return values[0], 1
    out, used = [], 0
    for t in tree:
        v, n = nest_by_tree(values[used:], t)
        out.append(v)
        used += n
    return tuple(out), used


def is_flat(param_trees: Sequence[Tree], result_tree: Tree) -> bool:
    """Whether the compiled function needs no wrapper: tensor parameters; a tensor or a tuple of 2+ tensors out."""
    flat_result = result_tree is None or (len(result_tree) > 1 and all(t is None for t in result_tree))
    return flat_result and all(t is None for t in param_trees)


class TupleFunction:
    """Calls a compiled function whose parameters or results are tuples: flattens the arguments (checking the
    structure, naming the parameter) and re-nests the results."""

    def __init__(self, name: str, param_names: Sequence[str], param_trees: Sequence[Tree], result_tree: Tree,
                 compiled: Any):
        self.name, self.compiled = name, compiled
        self._names, self._params, self._result = list(param_names), list(param_trees), result_tree

    def _flatten(self, value: Any, tree: Tree, label: str, out: list) -> None:
        if tree is None:
            out.append(value)
            return
        if not isinstance(value, (tuple, list)) or len(value) != len(tree):
            got = f"a {type(value).__name__} of {len(value)}" if isinstance(value, (tuple, list)) \
                else type(value).__name__
            raise ArgumentError(f"{self.name}: parameter {label!r}: expected a tuple of {len(tree)}, got {got}")
        for i, (v, t) in enumerate(zip(value, tree)):
            self._flatten(v, t, f"{label}[{i}]", out)

    def __call__(self, *args: Any, out: Any = None) -> Any:
        if len(args) != len(self._params):
            raise ArgumentError(f"{self.name}: expected {len(self._params)} argument"
                                f"{'' if len(self._params) == 1 else 's'} ({', '.join(self._names)}), got {len(args)}")
        flat: list = []
        for a, t, n in zip(args, self._params, self._names):
            self._flatten(a, t, n, flat)
        results = self.compiled(*flat) if out is None else self.compiled(*flat, out=out)
        results = results if isinstance(results, tuple) else (results,)
        value, _ = nest_by_tree(list(results), self._result)
        return value

    def __repr__(self) -> str:
        return f"<VM function {self.name} (tuples flattened) of {self.compiled!r}>"


def callable_for(name: str, param_names: Sequence[str], param_trees: Sequence[Tree], result_tree: Tree,
                 compiled: Any) -> Union[Any, TupleFunction]:
    """The compiled function itself when it needs no nesting (no wrapper cost), else a :class:`TupleFunction`."""
    if is_flat(param_trees, result_tree):
        return compiled
    return TupleFunction(name, param_names, param_trees, result_tree, compiled)
