"""Fuzzing the text parser: valid printed modules to mutate, the mutations, and the one rule a parse must obey.

The rule (:func:`parse_or_refuse`): ``from_source`` on any text either returns a module or function, or raises
``ParseError``, a subclass of ``ValueError`` whose message starts with ``file:line:column``. Any other exception
type is a parser bug; so would be a hang or a crash of the interpreter (the tests and
``scripts/fuzz_parser.py`` run the parser in-process, so a crash or hang fails them too).

Used by ``tests/py/reliability/test_fuzz_parser.py`` (bounded, in CI, with hypothesis) and
``scripts/fuzz_parser.py`` (as many examples as asked, for longer runs).
"""

from __future__ import annotations

import random
import re
import warnings
from functools import lru_cache
from typing import Optional

_TOKEN = re.compile(r"\w+|\s+|.", re.S)


@lru_cache(maxsize=1)
def seed_texts() -> tuple[str, ...]:
    """Printed modules covering the text format: one call of every registered op's samples (symbolic sizes,
    tuples, attributes of every kind), the tutorial's training module (dataflow blocks, tuples, module
    attributes, calls between functions) and a CNN with batch norm and dropout set up for training."""
    from ..ir import BindingBlock, Function, IRModule, SeqExpr, Var, VarBinding
    from ..ir.struct_info import ShapeStructInfo, TensorStructInfo, TupleStructInfo, free_vars
    from ..models import cnn, mlp
    from ..op import list_ops
    from ..training import SGD, Adam, CrossEntropyLoss, SetupTrainer

    texts = []
    for op in list_ops():
        for sample in op.samples[:2]:
            sinfos = [TupleStructInfo(a) if isinstance(a, (list, tuple)) else a for a in sample.args]
            params = [Var(f"a{i}", s) for i, s in enumerate(sinfos)]
            call = op(*params, **sample.attrs)
            unbound = sorted(free_vars(call.struct_info) - set().union(*(free_vars(s) for s in sinfos)))
            if unbound:
                params.append(Var("sizes", ShapeStructInfo(unbound)))
            out = Var("out", call.struct_info)
            texts.append(IRModule({"main": Function(params, SeqExpr([BindingBlock([VarBinding(out, call)])],
                                                                    out))}).script())
    loss_args = lambda b, c: [TensorStructInfo((b, c), "float32"), TensorStructInfo((b,), "int64")]  # noqa: E731
    texts.append(SetupTrainer(CrossEntropyLoss(), SGD(0.1), loss_args(4, 3))(mlp(4, (6, 5, 3))).script())
    texts.append(SetupTrainer(CrossEntropyLoss(), Adam(0.01), loss_args(2, 3))(cnn(2, (1, 4, 4), (2,), 3)).script())
    return tuple(texts)


_INTERESTING = ("0", "1", "-1", "2", "65536", "99999999999999999999", "1e309", "-0.5", "nan", "None", "True",
                "\"float32\"", "\"int64\"", "\"bool\"", "\"n\"", "\"\"", "R.Tensor", "R.Tuple", "R.Shape", "()", "[]")


def mutate(text: str, rng: random.Random, edits: Optional[int] = None) -> str:
    """``text`` with 1-4 random edits of tokens (names, numbers, strings' pieces, punctuation, runs of white
    space) or single characters: delete, duplicate, swap, insert one from elsewhere in the text or a few
    interesting values, or replace a word by another word (which keeps the syntax valid more often, so the
    edits reach struct-info checks, op inference and attribute checks rather than only Python's parser)."""
    for _ in range(edits or rng.randint(1, 4)):
        units = _TOKEN.findall(text) if rng.random() < 0.8 else list(text)
        if not units:
            return text
        i, j = rng.randrange(len(units)), rng.randrange(len(units))
        kind = rng.choice(("delete", "duplicate", "swap", "insert", "replace", "replace"))
        if kind == "delete":
            del units[i]
        elif kind == "duplicate":
            units.insert(i, units[i])
        elif kind == "swap":
            units[i], units[j] = units[j], units[i]
        elif kind == "insert":
            units.insert(i, rng.choice((units[j], "(", ")", ":", ",", "[", "]", "\n", "    ", "\"", "'")))
        else:
            words = [k for k, u in enumerate(units) if u[:1].isalnum() or u[:1] == "_"]
            if words:
                k = rng.choice(words)
                units[k] = units[rng.choice(words)] if rng.random() < 0.5 else rng.choice(_INTERESTING)
        text = "".join(units)
    return text


def decode(data: bytes) -> str:
    """Random bytes as the text a user might pass: UTF-8 if they decode as such, else Latin-1 (every byte a
    character)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def parse_or_refuse(text: str) -> Optional[BaseException]:
    """Parse ``text``; return None on success or a clean refusal (``ParseError``), else the unexpected
    exception (a parser bug), which callers report with the text that caused it."""
    from ..script.parser import ParseError, from_source

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)  # Python's own, about odd literals in the text
            from_source(text)
    except ParseError as exc:
        if not re.match(r"^[^\n]*:\d+:\d+: ", str(exc)):
            return AssertionError(f"ParseError without file:line:column: {exc}")
        return None
    except RecursionError as exc:  # deeply nested text: Python's own limit, reported as a bug to fix
        return exc
    except Exception as exc:  # noqa: BLE001 - the point: any other type is a bug
        return exc
    return None
