"""Fuzzing the text parser (hypothesis, bounded and derandomized so CI is reproducible): mutated printed modules
(every op's samples, training modules), random bytes and random text into ``from_source`` must parse or raise
``ParseError`` with ``file:line:column``, never another exception type. ``scripts/fuzz_parser.py`` runs the same
for as many examples as asked. The rule and the mutations are in ``relax_mlir/testing/fuzz.py``."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relax_mlir.script import from_source
from relax_mlir.script.parser import ParseError
from relax_mlir.testing.fuzz import decode, mutate, parse_or_refuse, seed_texts

def _fuzz(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow])


def _check(text: str) -> None:
    error = parse_or_refuse(text)
    assert error is None, f"{type(error).__name__}: {error}\n--- text ---\n{text}"


def test_every_seed_text_parses():
    texts = seed_texts()
    assert len(texts) > 100, "the op registry's samples should give over a hundred seed modules"
    for text in texts:
        from_source(text)


@_fuzz(3000)
@given(st.integers(0, 10**6), st.randoms(use_true_random=False))
def test_mutated_modules_parse_or_raise_parse_error(index, rng):
    texts = seed_texts()
    _check(mutate(texts[index % len(texts)], rng))


@_fuzz(1500)
@given(st.binary(max_size=400))
def test_random_bytes_parse_or_raise_parse_error(data):
    _check(decode(data))


@_fuzz(800)
@given(st.text(max_size=200))
def test_random_text_parse_or_raise_parse_error(text):
    _check(text)


@pytest.mark.parametrize("text, message", [
    ("", r"<string>:1:1: expected an @I.ir_module class or an @R.function definition"),
    ("\x00", r"<string>:1:1: a NUL character; the text format is text"),
    ("@R.function\ndef f(x: R.Tensor((2,), \"float32\")):\n    return R.nn.relu(x, 3)\n",
     r"<string>:3:\d+: "),
])
def test_hand_picked_bad_texts(text, message):
    with pytest.raises(ParseError, match=message):
        from_source(text)


def test_mutations_reach_past_python_syntax():
    """A fuzzer whose mutants all fail in ast.parse tests nothing of ours: over a fixed sample, a good share must
    parse or be refused by the parser's own checks (not 'invalid syntax')."""
    rng, texts, deep = random.Random(0), seed_texts(), 0
    for _ in range(300):
        try:
            from_source(mutate(rng.choice(texts), rng))
            deep += 1
        except ParseError as exc:
            deep += "invalid syntax" not in str(exc)
    assert deep > 60, deep
