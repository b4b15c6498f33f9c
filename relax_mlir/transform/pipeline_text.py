"""Passes written as text, for ``relax-mlir opt --passes``: ``"ToNonDataflow,Gradient(func_name=main)"``.

A pipeline is a comma-separated list of pass names (TVM's, as ``list_passes()`` lists them), each optionally
followed by its options in parentheses, positional or ``name=value``. Values are Python literals (numbers,
strings, lists, tuples, None, True/False); a bare word is a string (``func_name=main``). Nothing is evaluated:
the text is read with ``ast`` and ``ast.literal_eval``.
"""

from __future__ import annotations

import ast
import dataclasses
from typing import Any

from .pass_infra import PASSES, Pass


class PipelineError(ValueError):
    """A pipeline text that does not name passes and options that exist; one line saying what is allowed."""


def parse_pipeline(text: str) -> list[Pass]:
    """The passes ``text`` names, constructed with its options, in order."""
    items = _split(text)
    if not items:
        raise PipelineError("--passes: expected pass names, e.g. \"CanonicalizeBindings,DeadCodeElimination\"")
    return [_make(item) for item in items]


def _split(text: str) -> list[str]:
    """Top-level comma-separated items (commas inside parentheses or brackets belong to options)."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth < 0:
                raise PipelineError(f"--passes: unbalanced {ch!r} at character {i + 1} of {text!r}")
        elif ch == "," and depth == 0:
            items.append(text[start:i].strip())
            start = i + 1
    if depth:
        raise PipelineError(f"--passes: unclosed parenthesis in {text!r}")
    items.append(text[start:].strip())
    return [item for item in items if item]


def _make(item: str) -> Pass:
    try:
        node = ast.parse(item, mode="eval").body
    except SyntaxError:
        raise PipelineError(f"--passes: cannot read {item!r}; expected Name or Name(option=value, ...)") from None
    if isinstance(node, ast.Name):
        name, args, kwargs = node.id, [], {}
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        name = node.func.id
        args = [_value(a, item) for a in node.args]
        kwargs = {k.arg: _value(k.value, item) for k in node.keywords if k.arg is not None}
    else:
        raise PipelineError(f"--passes: cannot read {item!r}; expected Name or Name(option=value, ...)")
    cls = PASSES.get(name)
    if cls is None:
        raise PipelineError(f"--passes: unknown pass {name!r}; passes: {', '.join(sorted(PASSES))}")
    options = [f.name for f in dataclasses.fields(cls)] if dataclasses.is_dataclass(cls) else []
    unknown = sorted(set(kwargs) - set(options))
    if unknown or len(args) > len(options):
        raise PipelineError(f"--passes: {name} has no option {', '.join(map(repr, unknown)) or 'beyond ' + str(len(options))}"
                            f"; its options: {', '.join(options) or '(none)'}")
    try:
        return cls(*args, **kwargs)
    except (TypeError, ValueError) as exc:
        raise PipelineError(f"--passes: {name}: {exc}; its options: {', '.join(options) or '(none)'}") from None


def _value(node: ast.AST, item: str) -> Any:
    if isinstance(node, ast.Name) and node.id not in ("True", "False", "None"):
        return node.id  # a bare word: func_name=main
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise PipelineError(f"--passes: in {item!r}, {ast.unparse(node)!r} is not a literal "
                            "(a number, string, list, tuple, None, True or False)") from None
