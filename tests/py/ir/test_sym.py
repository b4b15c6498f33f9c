"""Symbolic sizes: floor quotients (``(n + 1) // 2``) beside the polynomials, checked against Python's ``//`` on
every value of a grid, and their normal forms."""

from __future__ import annotations

import itertools
import pickle

import pytest

from relax_mlir.ir import sym

n, m = sym.SizeVar("n"), sym.SizeVar("m")
GRID = [{"n": a, "m": b} for a, b in itertools.product(range(0, 23), range(1, 9))]

EXPRESSIONS = {
    "n // 2": lambda f, n, m: f(n, 2),
    "(n - 1) // 2 + 1": lambda f, n, m: f(n - 1, 2) + 1,
    "(2n + 3) // 2": lambda f, n, m: f(2 * n + 3, 2),
    "(3n + 5m - 7) // 4": lambda f, n, m: f(3 * n + 5 * m - 7, 4),
    "((n + 1) // 2 + 1) // 2": lambda f, n, m: f(f(n + 1, 2) + 1, 2),
    "(((n + 2) // 3) * m + n) // 5": lambda f, n, m: f(f(n + 2, 3) * m + n, 5),
    "2 * ((n + 1) // 2) - n": lambda f, n, m: 2 * f(n + 1, 2) - n,
    "(n * m + 6) // 6": lambda f, n, m: f(n * m + 6, 6),
    "(-n - 1) // 3": lambda f, n, m: f(-n - 1, 3),
}


@pytest.mark.parametrize("name", list(EXPRESSIONS))
def test_floor_quotients_evaluate_as_python_floor_division(name):
    built = EXPRESSIONS[name](sym.floor_div, n, m)
    for env in GRID:
        expected = EXPRESSIONS[name](lambda a, d: a // d, env["n"], env["m"])
        assert sym.evaluate(built, env) == expected, (name, env, str(built))


@pytest.mark.parametrize("name", list(EXPRESSIONS))
def test_a_quotient_prints_and_parses_back_equal(name):
    built = EXPRESSIONS[name](sym.floor_div, n, m)
    assert sym.parse_dim(str(built)) == built
    assert pickle.loads(pickle.dumps(built)) == built
    assert sym.substitute(built, {"n": 11, "m": 3}.__getitem__) == sym.evaluate(built, {"n": 11, "m": 3})


def test_normal_forms_make_equal_sizes_compare_equal():
    assert sym.floor_div(2 * n + 3, 2) == n + 1  # the whole part comes out, 1 // 2 is 0
    assert sym.floor_div(2 * n + 2, 4) == sym.floor_div(n + 1, 2)  # a common factor cancels
    assert sym.floor_div(n - 1, 2) + 1 == sym.floor_div(n + 1, 2)
    assert sym.floor_div(sym.floor_div(n + 1, 2) + 1, 2) == sym.floor_div(n + 3, 4)  # nested quotients merge
    assert sym.floor_div(14, 4) == 3 and sym.floor_div(-1, 2) == -1
    assert str(sym.floor_div(n + 1, 2)) == "((n + 1) // 2)" and str(sym.floor_div(n, 2)) == "(n // 2)"
    assert sym.floor_div(n + 1, 2).free_vars() == {"n"} and not sym.floor_div(n, 2).is_var()
    # A size of the quotient alone is not a size variable: nothing binds it from a parameter's dimension.
    assert sym.substitute(sym.floor_div(n + 1, 2), lambda v: 2 * m) == m


def test_only_positive_int_divisors_and_exact_division_keep_their_errors():
    for bad in (0, -2, 1.5, n, True):
        with pytest.raises(ValueError, match="floor-divided only by a positive int"):
            sym.floor_div(n, bad)
    with pytest.raises(ValueError, match="cannot divide"):
        (n + 1) // 2  # SymDim's own // stays exact division (reshape's -1)
    with pytest.raises(ValueError, match="divides by"):
        sym.parse_dim("n // m")
