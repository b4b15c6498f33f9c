"""CanonicalizeBindings and DeadCodeElimination: before/expected modules, compared structurally."""

from __future__ import annotations

import pytest

from relax_mlir import transform
from relax_mlir.ir import assert_structural_equal
from relax_mlir.script import from_source
from relax_mlir.testing import roundtrip

BEFORE = '''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor((3,), "float32")):
        with R.dataflow():
            lv1 = R.exp(x)
            lv2 = lv1
            dead = R.negative(lv2)
            t = (lv1, x)
            lv3 = t[0]
            lv4 = R.match_cast(lv3, R.Tensor((3,), "float32"))
            gv = R.add(lv4, lv2)
            R.output(gv)
        alias = gv
        return alias
'''

CANONICAL = '''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor((3,), "float32")):
        with R.dataflow():
            lv1 = R.exp(x)
            dead = R.negative(lv1)
            t = (lv1, x)
            gv = R.add(lv1, lv1)
            R.output(gv)
        return gv
'''

CLEAN = '''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor((3,), "float32")):
        with R.dataflow():
            lv1 = R.exp(x)
            gv = R.add(lv1, lv1)
            R.output(gv)
        return gv
'''


def test_canonicalize_bindings():
    after = transform.CanonicalizeBindings()(from_source(BEFORE))
    assert_structural_equal(after, from_source(CANONICAL))
    roundtrip(after)


def test_dead_code_elimination_after_canonicalization():
    after = transform.Sequential([transform.CanonicalizeBindings(), transform.DeadCodeElimination()])(
        from_source(BEFORE))
    assert_structural_equal(after, from_source(CLEAN))


def test_dataflow_var_does_not_escape_through_an_output_alias():
    text = '''
@R.function
def f(x: R.Tensor((3,), "float32")):
    with R.dataflow():
        lv = R.exp(x)
        gv = lv
        R.output(gv)
    return gv
'''
    mod = {"f": from_source(text)}
    from relax_mlir.ir import IRModule

    before = IRModule(mod)
    after = transform.CanonicalizeBindings()(before)
    assert_structural_equal(after, before)  # gv = lv must stay: lv may not leave its block


def test_dead_functions_are_removed_from_entries_only():
    text = '''
@I.ir_module
class M:
    @R.function
    def helper(x: R.Tensor((3,), "float32")):
        y = R.exp(x)
        return y

    @R.function
    def unused(x: R.Tensor((3,), "float32")):
        return x

    @R.function
    def main(x: R.Tensor((3,), "float32")):
        y = cls.helper(x)
        return y
'''
    mod = from_source(text)
    assert list(transform.DeadCodeElimination()(mod)) == ["helper", "unused", "main"]
    assert list(transform.DeadCodeElimination(["main"])(mod)) == ["helper", "main"]
    with pytest.raises(ValueError, match="entry function 'nope' is not in the module"):
        transform.DeadCodeElimination(["nope"])(mod)


def test_dead_code_elimination_keeps_a_local_function_that_is_called_and_what_it_captures():
    # `a = inner(x)` is a use of `inner` (the call's callee), and `inner`'s body a use of the `c` it captures:
    # both bindings were dropped (WellFormedError: var 'inner' is not defined)
    import numpy as np

    import relax_mlir
    from relax_mlir.script import from_source
    from relax_mlir.transform import DeadCodeElimination

    mod = from_source('''@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        c = R.multiply(x, x)
        unused = R.exp(x)
        @R.function
        def inner(y: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
            z = R.add(y, c)
            return z
        a = inner(x)
        return a
''')
    out = DeadCodeElimination()(mod)
    names = [b.var.name_hint for b in out["main"].body.blocks[0].bindings]
    assert names == ["c", "inner", "a"]
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(relax_mlir.interpret(out, "main", x), x + x * x)
