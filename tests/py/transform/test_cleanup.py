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
    # lv may not leave its block: as TVM, the output gv takes lv's binding instead (it used to stay `gv = lv`)
    expected = from_source(text.replace("lv = R.exp(x)\n        gv = lv", "gv = R.exp(x)"))
    assert_structural_equal(after, IRModule({"f": expected}))


def test_dead_functions_are_removed_from_entries_only():
    # As TVM's DeadCodeElimination: every public function is an entry, and entry_functions adds to them (it used
    # to replace them: DeadCodeElimination(["main"]) removed the public `unused`)
    text = '''
@I.ir_module
class M:
    @R.function(private=True)
    def helper(x: R.Tensor((3,), "float32")):
        y = R.exp(x)
        return y

    @R.function
    def unused(x: R.Tensor((3,), "float32")):
        return x

    @R.function(private=True)
    def unused_private(x: R.Tensor((3,), "float32")):
        return x

    @R.function
    def main(x: R.Tensor((3,), "float32")):
        y = cls.helper(x)
        return y
'''
    mod = from_source(text)
    assert list(transform.DeadCodeElimination()(mod)) == ["helper", "unused", "main"]
    assert list(transform.DeadCodeElimination(["main"])(mod)) == ["helper", "unused", "main"]
    assert list(transform.DeadCodeElimination(["unused_private"])(mod)) == ["helper", "unused", "unused_private",
                                                                            "main"]
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


IMPURE = '''
@I.ir_module
class M:
    @R.function(pure=False, private=True)
    def log_twice(x: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        y = R.call_packed("test.dce_log", x, sinfo_args=R.Tensor((3,), "float32"))
        return y

    @R.function(pure=False)
    def main(x: R.Tensor((3,), "float32")):
        t = R.exp(x)
        logged = R.call_packed("test.dce_log", t, sinfo_args=R.Tensor((3,), "float32"))
        dead = R.negative(x)
        again = cls.log_twice(x)
        with R.dataflow():
            u = R.multiply(x, x)
            in_block = R.call_packed("test.dce_log", u, sinfo_args=R.Tensor((3,), "float32"))
            dead_too = R.sqrt(u)
            y = R.add(x, x)
            R.output(y)
        return y
'''


def _host_log():
    """A host function recording what it is called with (registered once; the list is cleared per test)."""
    import relax_mlir
    from relax_mlir.interpreter import get_global_func

    if get_global_func("test.dce_log", allow_missing=True) is None:
        relax_mlir.register_func("test.dce_log", lambda x: (_LOG.append(x.copy()), x)[1])
    _LOG.clear()
    return _LOG


_LOG: list = []


def test_dead_code_elimination_keeps_unused_bindings_with_effects_and_what_they_read():
    # Unused `R.call_packed`s and calls of a `pure=False` function were removed with the pure dead bindings: the
    # host function was no longer called. Oracle: the host's log of calls, before and after the pass.
    import numpy as np

    import relax_mlir

    log = _host_log()
    mod = from_source(IMPURE)
    x = np.array([0.5, 1.0, 2.0], "float32")
    want = relax_mlir.interpret(mod, "main", x)
    before = [a.tolist() for a in log]
    assert len(before) == 3  # exp(x), x (through log_twice), x * x
    log.clear()
    after = transform.DeadCodeElimination()(mod)
    roundtrip(after)
    np.testing.assert_array_equal(relax_mlir.interpret(after, "main", x), want)
    assert [a.tolist() for a in log] == before
    names = [b.var.name_hint for block in after["main"].blocks for b in block.bindings]
    assert names == ["t", "logged", "again", "u", "in_block", "y"]  # the pure dead ones go
    assert "log_twice" in after


def test_dead_code_elimination_keeps_the_callbacks_lazy_set_output_inserts():
    # LazySetOutput's `fset_output(i, value)` bindings are unused by construction: DCE removed them all, and the
    # function never delivered its results. Oracle: what the callback receives, before and after the pass.
    import numpy as np

    import relax_mlir

    mod = from_source('''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor((3,), "float32")):
        R.func_attr({"num_input": 1})
        with R.dataflow():
            y = R.add(x, x)
            z = R.multiply(x, x)
            R.output(y, z)
        return (y, z)
''')
    lazy = transform.LazySetOutput()(mod)
    x = np.array([1.0, 2.0, 3.0], "float32")

    def outputs(m) -> dict:
        got: dict = {}
        relax_mlir.interpret(m, "main", x, lambda i, v: got.__setitem__(int(i), np.array(v)))
        return got

    want = outputs(lazy)
    assert sorted(want) == [0, 1]
    for cleaned in (transform.DeadCodeElimination()(lazy), transform.get_pipeline("default")(lazy)):
        got = outputs(cleaned)
        assert sorted(got) == [0, 1]
        np.testing.assert_array_equal(got[0], x + x)
        np.testing.assert_array_equal(got[1], x * x)


def test_default_pipeline_keeps_each_call_of_an_impure_function():
    import numpy as np

    import relax_mlir

    log = _host_log()
    mod = from_source('''
@I.ir_module
class M:
    @R.function(pure=False, private=True)
    def g(x: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        y = R.call_packed("test.dce_log", x, sinfo_args=R.Tensor((3,), "float32"))
        return y

    @R.function(pure=False)
    def f(x: R.Tensor((3,), "float32")):
        a = cls.g(x)
        b = cls.g(x)
        y = R.add(x, b)
        return y
''')
    x = np.ones(3, "float32")
    relax_mlir.interpret(mod, "f", x)
    assert len(log) == 2
    log.clear()
    relax_mlir.interpret(transform.get_pipeline("default")(mod), "f", x)
    assert len(log) == 2


def test_dead_code_elimination_judges_local_functions_by_their_purity():
    # A call of a pure local function is dead when unused; one of an impure local function, or of a callback
    # parameter (R.Callable does not say its purity), stays.
    mod = from_source('''
@I.ir_module
class M:
    @R.function(pure=False)
    def main(x: R.Tensor((3,), "float32"), cb: R.Callable((R.Object,), R.Tuple())):
        @R.function
        def pure_inner(y: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
            z = R.exp(y)
            return z
        @R.function(pure=False)
        def impure_inner(y: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
            z = R.call_packed("test.dce_log", y, sinfo_args=R.Tensor((3,), "float32"))
            return z
        a = pure_inner(x)
        b = impure_inner(x)
        c = cb(x)
        return x
''')
    after = transform.DeadCodeElimination()(mod)
    names = [b.var.name_hint for block in after["main"].blocks for b in block.bindings]
    assert names == ["impure_inner", "b", "c"]


def test_dead_code_elimination_keeps_a_private_function_only_a_local_function_calls():
    # Reachability looked only at the top-level bindings of each function: `helper`, called from `inner` alone,
    # was removed (WellFormedError: call to undefined function 'helper'); the unreached private `unused` goes.
    import numpy as np

    import relax_mlir

    mod = from_source('''
@I.ir_module
class M:
    @R.function(private=True)
    def helper(a: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        b = R.exp(a)
        return b

    @R.function(private=True)
    def unused(a: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        return a

    @R.function
    def main(x: R.Tensor((3,), "float32")):
        @R.function
        def inner(y: R.Tensor((3,), "float32")):
            z = cls.helper(y)
            return z
        o = inner(x)
        return o
''')
    out = transform.DeadCodeElimination()(mod)
    assert list(out) == ["helper", "main"]
    x = np.array([0.0, 1.0, -2.0], "float32")
    np.testing.assert_allclose(relax_mlir.interpret(out, "main", x), np.exp(x), rtol=1e-6)
