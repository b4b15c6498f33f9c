"""Passes written as text, for ``relax-mlir opt --passes``: ``"ToNonDataflow,Gradient(func_name=main)"``.

A pipeline is a comma-separated list of pass names (TVM's, as ``list_passes()`` lists them), each optionally
followed by its options in parentheses, positional or ``name=value``. Values are Python literals (numbers,
strings, lists, tuples, None, True/False); a bare word is a string (``func_name=main``). Nothing is evaluated:
the text is read with ``ast`` and ``ast.literal_eval``.
"""

from __future__ import annotations

import ast
import dataclasses
import typing
from typing import Any

from .options import describe as _describe
from .options import fits as _fits
from .pass_infra import PASSES, Pass


class PipelineError(ValueError):
    """A pipeline text that does not name passes and options that exist; one line saying what is allowed."""


def parse_pipeline(text: str) -> list[Pass]:
    """The passes ``text`` names, constructed with its options, in order."""
    items = _split(text)
    if not any(items):
        raise PipelineError("--passes: expected pass names, e.g. \"CanonicalizeBindings,DeadCodeElimination\"")
    if "" in items:  # "A,,B" or "A,": a pass left out by mistake, not one to skip
        raise PipelineError(f"--passes: entry {items.index('') + 1} of {text!r} is empty; expected a pass name "
                            "between each pair of commas")
    return [_make(item) for item in items]


def _split(text: str) -> list[str]:
    """Top-level comma-separated items (commas inside parentheses, brackets or string literals belong to options:
    ``Gradient(func_name="a(b")`` is one item, as Python reads it)."""
    items, depth, start, i = [], 0, 0, 0
    while i < len(text):
        ch = text[i]
        if ch in "'\"":
            i = _string_end(text, i)
            continue
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth < 0:
                raise PipelineError(f"--passes: unbalanced {ch!r} at character {i + 1} of {text!r}")
        elif ch == "," and depth == 0:
            items.append(text[start:i].strip())
            start = i + 1
        i += 1
    if depth:
        raise PipelineError(f"--passes: unclosed parenthesis in {text!r}")
    items.append(text[start:].strip())
    return items


def _string_end(text: str, i: int) -> int:
    """The index just past the string literal opening at ``text[i]`` (single or triple quotes; a backslash escapes
    the next character, in a raw string too, as Python's tokenizer reads it)."""
    quote = text[i:i + 3] if text[i:i + 3] in ('"""', "'''") else text[i]
    j = i + len(quote)
    while j < len(text):
        if text[j] == "\\":
            j += 2
        elif text.startswith(quote, j):
            return j + len(quote)
        else:
            j += 1
    raise PipelineError(f"--passes: unclosed string (from character {i + 1}) in {text!r}")


def _make(item: str) -> Pass:
    try:
        node = ast.parse(item, mode="eval").body
    except SyntaxError:
        raise PipelineError(f"--passes: cannot read {item!r}; expected Name or Name(option=value, ...)") from None
    except (RecursionError, MemoryError):  # Python's parser gives up on deep nesting (100 000 "-" or "(")
        raise PipelineError(f"--passes: {_excerpt(item)} nests too deeply") from None
    if isinstance(node, ast.Name):
        name, args, kwargs = node.id, [], {}
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        name = node.func.id
        args = [_value(a, item) for a in node.args]
        kwargs = {}
        for k in node.keywords:  # (Python's parser leaves a repeated keyword to the compiler: checked here)
            if k.arg is None:
                raise PipelineError(f"--passes: in {item!r}, '**' is not an option; expected option=value")
            if k.arg in kwargs:
                raise PipelineError(f"--passes: in {item!r}, option {k.arg!r} is given twice")
            kwargs[k.arg] = _value(k.value, item)
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
    failure = None
    try:
        made = cls(*args, **kwargs)  # (a pass that checks its options says what is wrong in its own words)
    except (TypeError, ValueError) as exc:
        said = str(exc) if str(exc).startswith(f"{name}:") else f"{name}: {exc}"  # (named once, not "A: A: ...")
        raise PipelineError(f"--passes: {said}; its options: {', '.join(options) or '(none)'}") from None
    except Exception as exc:  # noqa: BLE001 (an option of the wrong type met unchecked: said below instead)
        failure = exc
    hints = typing.get_type_hints(cls)  # ... the others are checked against their annotations here
    for option, value in [*zip(options, args), *kwargs.items()]:
        hint = hints.get(option, Any)
        if not _fits(value, hint):
            raise PipelineError(f"--passes: {name}: option {option}={value!r} is not {_describe(hint)}")
    if failure is not None:
        raise failure
    return made


def _value(node: ast.AST, item: str) -> Any:
    if isinstance(node, ast.Name) and node.id not in ("True", "False", "None"):
        return node.id  # a bare word: func_name=main
    try:
        try:
            return ast.literal_eval(node)
        except ValueError:
            why = "(a number, string, list, tuple, None, True or False)"
        except TypeError as exc:  # a dict key literal_eval cannot hash: {[1]: 2}
            why = f"({exc}; a dict's keys are numbers, strings or tuples of them)"
        shown = ast.unparse(node)
    except RecursionError:  # (literal_eval and unparse recurse: 1000 nested "-" are too many)
        raise PipelineError(f"--passes: in {_excerpt(item)}, an option's value nests too deeply") from None
    raise PipelineError(f"--passes: in {item!r}, {shown!r} is not a literal {why}")


def _excerpt(text: str, limit: int = 40) -> str:
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}... ({len(text)} characters)"
