"""Symbolic sizes: floor quotients (``(n + 1) // 2``) beside the polynomials, checked against Python's ``//`` on
every value of a grid, and their normal forms."""

from __future__ import annotations

import itertools
import pickle
import random
import re

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
    with pytest.raises(ValueError, match="divides by"):
        sym.parse_dim("n // m")
    for bad in (lambda: n // m, lambda: (n + 1) // 0, lambda: 6 // n):
        with pytest.raises(ValueError, match="divides by"):
            bad()
    with pytest.raises(TypeError, match=r"divided with // .*write \(n \+ 1\) // 2"):
        (n + 1) / 2  # TVM refuses / on integer expressions too: which division is meant must be written


@pytest.mark.parametrize("name", list(EXPRESSIONS))
def test_floordiv_operator_on_sizes_is_floor_division(name):
    """``//`` on a SymDim (``n // 2`` for ``n = T.int64()``) is the floor division the text ``"n // 2"`` means."""
    built = EXPRESSIONS[name](lambda a, d: a // d, n, m)
    assert built == EXPRESSIONS[name](sym.floor_div, n, m)
    for env in GRID:
        assert sym.evaluate(built, env) == EXPRESSIONS[name](lambda a, d: a // d, env["n"], env["m"]), (name, env)
    assert (n * m) // n == m and (6 * n + 4) // 2 == 3 * n + 2 and (-4 * n) // -2 == 2 * n  # exact stays exact


def test_an_unbound_size_variable_is_named():
    with pytest.raises(sym.UnboundSizeError, match=r"size variable 'm' \(in the size 2 \* m \+ n\) has no value"):
        sym.evaluate(n + 2 * m, {"n": 1})
    with pytest.raises(ValueError, match=r"'m' \(in the size \(\(m \+ n\) // 3\)\) has no value"):
        sym.evaluate(sym.floor_div(n + m, 3), {"n": 1})
    with pytest.raises(KeyError):  # what callers looking a size up catch
        sym.evaluate(m, {})


# -- normal forms, checked by brute force ------------------------------------------------------------------------

VALUES = range(-50, 200)


def _random_tree(rng: random.Random, depth: int, leaves, muls, divs, sums: bool):
    """A random size expression: ``("var", name)``, ``("+", t, c)``, ``("*", t, k)``, ``("//", t, d)`` and, with
    ``sums``, ``("++", t, u)`` and ``("**", t, u)`` (the sum and product of two subtrees)."""
    if depth == 0 or rng.random() < 0.15:
        return ("var", rng.choice(leaves))
    kinds = ["+", "*", "//"] + (["++", "**"] if sums else [])
    kind = rng.choice(kinds)
    sub = _random_tree(rng, depth - 1, leaves, muls, divs, sums)
    if kind == "+":
        return ("+", sub, rng.randint(-6, 6))
    if kind == "*":
        return ("*", sub, rng.choice(muls))
    if kind == "//":
        return ("//", sub, rng.choice(divs))
    other = _random_tree(rng, min(depth - 1, 1 if kind == "**" else depth - 1), leaves, muls, divs, sums)
    return (kind, sub, other)


def _build(tree, env, div):
    """The tree's value with ``env`` for its variables (ints or SymDims) and ``div`` for ``//``."""
    kind = tree[0]
    if kind == "var":
        return env[tree[1]]
    a = _build(tree[1], env, div)
    if kind == "+":
        return a + tree[2]
    if kind == "*":
        return a * tree[2]
    if kind == "//":
        return div(a, tree[2])
    b = _build(tree[2], env, div)
    return a + b if kind == "++" else a * b


def _divisor_product(tree) -> int:
    if tree[0] == "var":
        return 1
    own = tree[2] if tree[0] == "//" else 1
    return own * _divisor_product(tree[1]) * (_divisor_product(tree[2]) if tree[0] in ("++", "**") else 1)


def _quotients(d):
    """Every quotient factor in ``d``, nested ones too."""
    for mono, _ in (d.terms if isinstance(d, sym.SymDim) else ()):
        for f in mono:
            if isinstance(f, sym.Quotient):
                yield f
                yield from _quotients(f.numerator)


@pytest.mark.parametrize("leaves", [("n",), ("n", "m")])
def test_every_rewrite_keeps_the_value_and_the_form_is_a_fixed_point(leaves):
    """Random trees of ``+``, ``*`` and ``//`` by positive ints, built with ``floor_div``: the size equals Python's
    integer evaluation of the tree for every n in [-50, 200) (and m in a few values, of both signs), prints and
    parses back to itself, and rebuilding any of its quotients from its numerator and divisor gives it back."""
    rng = random.Random(1234 + len(leaves))
    ms = (-7, 0, 1, 5, 12) if len(leaves) == 2 else (0,)
    sizes = {"n": n, "m": m}
    for _ in range(300):
        tree = _random_tree(rng, 5, leaves, muls=(-3, -1, 2, 3, 4, 6), divs=(2, 3, 4, 5, 6, 8), sums=True)
        built = _build(tree, sizes, sym.floor_div)
        for a in VALUES:
            for b in ms:
                env = {"n": a, "m": b}
                assert sym.evaluate(built, env) == _build(tree, env, lambda x, d: x // d), (tree, str(built), env)
        assert sym.parse_dim(str(built)) == built, (tree, str(built))
        assert _build(tree, sizes, lambda x, d: x // d) == built  # SymDim's // is the same floor division
        for q in _quotients(built):
            assert sym.floor_div(q.numerator, q.divisor) == sym.SymDim((((q,), 1),)), (tree, q)


@pytest.mark.parametrize("prime", [2, 3])
def test_equal_chains_of_one_prime_have_one_form(prime):
    """Pooling and concatenation chains (``+ c``, ``* p**i``, ``// p**j`` in any order): trees with equal value
    tables over n in [-50, 200) are one form. (Divisor products stay small, so the table tells them apart.)"""
    rng = random.Random(77 + prime)
    forms: dict[tuple, set] = {}
    powers = (prime, prime * prime)
    for _ in range(1500):
        tree = _random_tree(rng, 6, ("n",), muls=powers, divs=powers, sums=False)
        if _divisor_product(tree) > 64:
            continue
        table = tuple(_build(tree, {"n": a}, lambda x, d: x // d) for a in VALUES)
        forms.setdefault(table, set()).add(str(_build(tree, {"n": n}, sym.floor_div)))
    several = [sorted(f) for f in forms.values() if len(f) > 1]
    assert not several, several[:5]
    assert len(forms) > 200  # the trees are varied enough to mean something


KNOWN_EQUAL = [  # pairs of one size, built differently; the first of each is what a shape inference builds
    ("((n // 2) * 2 + 2) // 4", "(n + 2) // 4"),  # max_pool2d stride 2, concat, max_pool2d stride 4
    ("(((n // 2) + 1) // 2)", "((n + 2) // 4)"),  # the printed text of the former, parsed
    ("((n // 2) * 2) // 4", "n // 4"),
    ("((n // 2) // 3)", "n // 6"),
    ("(2 * n + 1) // 4", "n // 2"),  # 2 * n + 1 is never a multiple of 4: its 1 adds nothing
    ("(4 * n + 6) // 8", "(2 * n + 3) // 4"),
    ("(6 * n + 7) // 4", "n + (n + 1) // 2 + 1"),  # 6n + 7 = 4(n + 1) + 2n + 3, and (2n + 3) // 4 = (n + 1) // 2
    ("(n // 2 + m) // 3", "(n + 2 * m) // 6"),
    ("(n - 1) // 2 + 1", "(n + 1) // 2"),
]


@pytest.mark.parametrize("left, right", KNOWN_EQUAL)
def test_known_equal_sizes_have_one_form(left, right):
    a, b = sym.parse_dim(left), sym.parse_dim(right)
    for env in GRID + [{"n": v, "m": -v} for v in range(-30, 0)]:  # the oracle: Python's own // on the texts
        assert eval(left, {}, env) == eval(right, {}, env) == sym.evaluate(a, env), (left, right, env)
    assert a == b and str(a) == str(b) and hash(a) == hash(b), (str(a), str(b))


def test_a_pooled_concat_prints_and_parses_back():
    """max_pool2d (stride 2), concat, max_pool2d (stride 4): the inferred height and the height parsed from the
    printed module are one form, so the module reads back and compares equal to itself."""
    from relax_mlir.ir.structural_equal import structural_equal
    from relax_mlir.script import from_source
    mod = from_source('''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor((1, 1, "n", 1), "float32")):
        y = R.nn.max_pool2d(x, pool_size=[2, 1], strides=[2, 1])
        z = R.concat([y, y], axis=2)
        w = R.nn.max_pool2d(z, pool_size=[2, 1], strides=[4, 1])
        return w
''')
    height = mod["main"].ret_struct_info.shape[2]
    for a in range(0, 40):  # the oracle: each op's height formula with Python's //
        assert sym.evaluate(height, {"n": a}) == (2 * ((a - 2) // 2 + 1) - 2) // 4 + 1
    assert height == sym.parse_dim("(n + 2) // 4")
    assert structural_equal(from_source(mod.script()), mod)


def test_a_size_declared_in_python_floor_divides_in_annotations_and_attributes():
    """``n // 2`` for ``n = T.int64()`` (TVM's floordiv of a PrimExpr) is what the text ``"n // 2"`` means, in a
    parameter's annotation (evaluated by Python) and in an op's attribute (evaluated by the parser)."""
    import numpy as np

    import relax_mlir
    from relax_mlir.interpreter import InterpreterError
    from relax_mlir.script import relax as R
    from relax_mlir.script import tir as T

    n = T.int64()

    @R.function
    def halves(x: R.Tensor((n, 3), "float32"), y: R.Tensor((n // 2, 3), "float32")):
        z = R.strided_slice(x, axes=[0], begin=[0], end=[n // 2])
        return R.add(z, y)

    assert halves.params[1].struct_info.shape == (sym.parse_dim("n // 2"), 3)
    assert halves.ret_struct_info.shape[0] == sym.floor_div(n, 2)
    mod = relax_mlir.IRModule({"halves": halves})
    for rows in (0, 1, 6, 7):  # the oracle: Python's // on the argument's length
        x = np.arange(rows * 3, dtype=np.float32).reshape(rows, 3)
        y = np.ones((rows // 2, 3), np.float32)
        np.testing.assert_array_equal(relax_mlir.interpret(mod, "halves", x, y), x[:rows // 2] + 1)
    with pytest.raises(InterpreterError, match="expected"):
        relax_mlir.interpret(mod, "halves", np.zeros((7, 3), np.float32), np.zeros((4, 3), np.float32))


@pytest.mark.parametrize("name, message", [
    ("if", "is a Python keyword"), ("None", "is a Python keyword"), ("True", "is a Python keyword"),
    ("\U0001d45b", "is not in NFKC form: Python reads identifiers normalised, so the text format would read it back "
                   "as the size 'n'"),
    ("x\ufb01", "is not in NFKC form: Python reads identifiers normalised, so the text format would read it back "
                "as the size 'xfi'"),
    ("2n", "is not an identifier"), ("", "is not an identifier"), (3, "is not an identifier"),
])
def test_a_size_name_the_text_would_not_read_back_is_refused(name, message):
    """Sizes are identified by name and written in a dimension's text, which Python's parser reads: ``𝑛`` beside
    ``n`` printed as two sizes and read back as one, ``if``/``None`` printed text that did not parse. Such names are
    refused as function names are (a variable's the printer renames)."""
    with pytest.raises(ValueError, match=re.escape(f"size variable name {name!r} {message}")):
        sym.SizeVar(name)


def test_sizes_named_as_python_reads_them_print_and_read_back_as_themselves():
    from relax_mlir import BlockBuilder, TensorStructInfo, Var, op
    from relax_mlir.ir import structural_equal
    from relax_mlir.script import from_source

    x = Var("x", TensorStructInfo((sym.SizeVar("n"), sym.SizeVar("n_1"), sym.SizeVar("match")), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        bb.emit_func_output(bb.emit(op.add(x, x)))
    mod = bb.get()
    back = from_source(mod.script())
    assert back["main"].params[0].struct_info.shape == x.struct_info.shape and structural_equal(back, mod)
