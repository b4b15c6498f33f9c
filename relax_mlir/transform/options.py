"""Pass options checked against their annotations: one wording for the Python constructors and for
``relax-mlir opt --passes`` (``pipeline_text``), so that ``FuseOps(fuse_opt_level="x")`` says
``FuseOps: option fuse_opt_level='x' is not an int`` when it is made, not ``'<' not supported between instances
of 'str' and 'int'`` from inside the pass when it runs.

A pass's fields are its options (``Pass``); ``check_options(self)`` in its ``__post_init__`` checks those its
annotations describe: ``int`` (not a bool), ``float``, ``str``, a list of ..., a dict, a Python function, unions
of these and None. Python values that behave as the annotation says pass too (a NumPy integer for an ``int``, a
tuple or any sequence but a string for a list, any mapping for a dict).
"""

from __future__ import annotations

import collections.abc
import dataclasses
import numbers
import typing
from typing import Any, Iterable, Optional


def check_options(p: Any, names: Optional[Iterable[str]] = None) -> None:
    """Raise ``TypeError("Pass: option name=value is not <what the annotation says>")`` for the first option of
    ``p`` (those in ``names``, default all its fields) whose value does not fit its annotation."""
    hints = typing.get_type_hints(type(p))
    for name in names if names is not None else [f.name for f in dataclasses.fields(p)]:
        hint = hints.get(name, Any)
        value = getattr(p, name)
        if not fits(value, hint):
            raise TypeError(f"{p.name}: option {name}={value!r} is not {describe(hint)}")


def fits(value: Any, hint: Any) -> bool:
    """Whether an option's value is of the type the pass's field is annotated with."""
    if hint is Any:
        return True
    if hint is type(None):
        return value is None
    origin, params = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union:
        return any(fits(value, p) for p in params)
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    if hint in (tuple, list) or origin in (tuple, list, collections.abc.Sequence):
        if not isinstance(value, collections.abc.Sequence) or isinstance(value, (str, bytes)):
            return False
        if origin is tuple and params and params[-1] is not Ellipsis:  # tuple[int, str]: one type per field
            return len(value) == len(params) and all(fits(v, p) for v, p in zip(value, params))
        item = params[0] if params else Any
        return all(fits(v, item) for v in value)
    if origin in (dict, collections.abc.Mapping) or hint in (dict, collections.abc.Mapping):
        key, val = params if len(params) == 2 else (Any, Any)
        return isinstance(value, collections.abc.Mapping) and all(fits(k, key) and fits(v, val)
                                                                  for k, v in value.items())
    if origin is collections.abc.Callable or hint is collections.abc.Callable:
        return callable(value)
    return isinstance(value, hint) if isinstance(hint, type) else True


def describe(hint: Any) -> str:
    """A type annotation in words, for the error: "a str", "a list of str", "None or an int"."""
    if hint is type(None):
        return "None"
    origin, params = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union:
        return " or ".join(describe(p) for p in params)
    if hint in (tuple, list) or origin in (tuple, list, collections.abc.Sequence):
        item = params[0] if params else None
        return f"a list of {describe(item).split(' ', 1)[1] if item is not None and item is not Any else 'values'}"
    if origin in (dict, collections.abc.Mapping) or hint in (dict, collections.abc.Mapping):
        return "a dict"
    if origin is collections.abc.Callable or hint is collections.abc.Callable:
        return "a Python function (not available from the command line)"
    name = getattr(hint, "__name__", str(hint))
    return f"{'an' if name[:1] in 'aeiouAEIOU' else 'a'} {name}"
