"""Local functions (an @R.function inside another): parsed, printed and parsed back, interpreted as closures,
lifted by LambdaLift (captures as leading parameters, through several levels), compiled (compile lifts them
itself), and the uses LambdaLift refuses. Private functions (@R.function(private=True)): kept by the text format
and treated as internal by the passes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relax_mlir
from relax_mlir import transform
from relax_mlir.ir import IRModule, check_well_formed
from relax_mlir.ir.expr import Call, Function, Var, VarBinding
from relax_mlir.script import from_source
from relax_mlir.testing import roundtrip

NESTED = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 4), "float32"), w: R.Tensor((4,), "float32"), b: R.Tensor((4,), "float32")):
        @R.function
        def affine(y: R.Tensor(("n", 4), "float32")):
            @R.function
            def shift(u: R.Tensor(("n", 4), "float32")):
                v = R.add(u, b)
                return v
            z = R.multiply(y, w)
            s = shift(z)
            return s
        @R.function
        def twice(y: R.Tensor(("n", 4), "float32")):
            a = affine(y)
            c = affine(a)
            return c
        with R.dataflow():
            @R.function
            def act(y: R.Tensor(("n", 4), "float32")):
                r = R.tanh(y)
                return r
            h = twice(x)
            o = act(h)
            R.output(o)
        return o
"""


def _args(rng, n=3):
    return [rng.standard_normal((n, 4)).astype(np.float32), rng.standard_normal(4).astype(np.float32),
            rng.standard_normal(4).astype(np.float32)]


def _numpy(x, w, b):
    def affine(y):
        return y * w + b
    return np.tanh(affine(affine(x)))


def test_local_functions_parse_print_and_run_as_closures():
    mod = from_source(NESTED)
    check_well_formed(mod)
    roundtrip(mod)
    text = mod.script()
    assert "        @R.function\n        def affine(" in text and "            def shift(" in text
    args = _args(np.random.default_rng(0))
    np.testing.assert_allclose(relax_mlir.interpret(mod, "main", *args), _numpy(*args), rtol=1e-6)


def test_lambda_lift_moves_every_level_and_passes_the_captures():
    mod = from_source(NESTED)
    lifted = transform.LambdaLift()(mod)
    roundtrip(lifted)
    assert sorted(name for name, _ in lifted.items()) == ["main", "main_act", "main_affine", "main_affine_shift",
                                                           "main_twice"]
    params = {name: [p.name_hint for p in f.params] for name, f in lifted.items()}
    assert params["main_affine_shift"] == ["b", "u"]
    # affine reads w itself and b through shift; twice reads both through affine
    assert params["main_affine"] == ["w", "b", "y"] and params["main_twice"] == ["w", "b", "y"]
    assert params["main_act"] == ["y"]
    assert not transform.lambda_lift.has_local_functions(lifted)
    args = _args(np.random.default_rng(1))
    with np.errstate(over="ignore", invalid="ignore"):  # exp of exp of ... may overflow: the same in both
        lifted_value, value = relax_mlir.interpret(lifted, "main", *args), relax_mlir.interpret(mod, "main", *args)
    np.testing.assert_allclose(lifted_value, value, rtol=0, atol=0)


def test_compile_lifts_local_functions_itself():
    mod = from_source(NESTED)
    args = _args(np.random.default_rng(2), n=5)
    got = relax_mlir.VirtualMachine(relax_mlir.compile(mod))["main"](*args)
    np.testing.assert_allclose(got, _numpy(*args), rtol=1e-5, atol=1e-6)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 4), st.lists(st.sampled_from(["x", "w", "prev"]), min_size=1, max_size=4),
       st.integers(0, 2**31))
def test_chains_of_local_functions(depth, reads, seed):
    """Random chains: local function k reads x, w or calls local function k-1; lifted and interpreted, the same
    values; every captured variable is a parameter of the enclosing function."""
    lines, prev = [], None
    for k, what in enumerate(reads):
        body = {"x": "R.add(y, x)", "w": "R.multiply(y, w)", "prev": f"f{k - 1}(y)" if prev else "R.exp(y)"}[what]
        lines += ["        @R.function",
                  f"        def f{k}(y: R.Tensor((3,), \"float64\")) -> R.Tensor((3,), \"float64\"):",
                  f"            r = {body}",
                  "            return r"]
        prev = f"f{k}"
    calls = [f"        a0 = {prev}(x)"] + [f"        a{i} = {prev}(a{i - 1})" for i in range(1, depth)]
    text = "\n".join(["@I.ir_module", "class Module:", "    @R.function",
                      "    def main(x: R.Tensor((3,), \"float64\"), w: R.Tensor((3,), \"float64\")):",
                      *lines, *calls, f"        return a{depth - 1}", ""])
    mod = from_source(text)
    lifted = transform.LambdaLift()(mod)
    roundtrip(lifted)
    for name, func in lifted.items():
        if name != "main":
            assert {p.name_hint for p in func.params} <= {"x", "w", "y"}, name
    rng = np.random.default_rng(seed)
    args = [rng.standard_normal(3) * 0.3, rng.standard_normal(3)]
    with np.errstate(over="ignore", invalid="ignore"):  # exp of exp of ... may overflow: the same in both
        lifted_value, value = relax_mlir.interpret(lifted, "main", *args), relax_mlir.interpret(mod, "main", *args)
    np.testing.assert_allclose(lifted_value, value, rtol=0, atol=0)


def test_a_local_function_used_as_a_value_is_refused():
    text = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3,), "float32")):
        @R.function
        def f(y: R.Tensor((3,), "float32")):
            return y
        t = (x, f)
        return t
"""
    with pytest.raises(transform.LambdaLiftError, match="'f' is used as a value"):
        transform.LambdaLift()(from_source(text))


def test_a_recursive_local_function_is_refused():
    # the text format cannot name a local function inside itself; build one directly
    x = Var("x", relax_mlir.ir.TensorStructInfo((3,), "float32"))
    y = Var("y", x.struct_info)
    from relax_mlir.ir.struct_info import FuncStructInfo
    from relax_mlir.ir.expr import SeqExpr, BindingBlock

    f = Var("f", FuncStructInfo([x.struct_info], x.struct_info))
    r = Var("r", x.struct_info)
    local = Function([y], SeqExpr([BindingBlock([VarBinding(r, Call(f, [y], {}, x.struct_info))])], r),
                     x.struct_info, {}, True)
    a = Var("a", x.struct_info)
    main = Function([x], SeqExpr([BindingBlock([VarBinding(f, local),
                                                VarBinding(a, Call(f, [x], {}, x.struct_info))])], a),
                    x.struct_info, {}, True)
    with pytest.raises(transform.LambdaLiftError, match="'f' calls itself"):
        transform.LambdaLift()(IRModule({"main": main}))


def test_calling_something_that_is_not_a_function_is_a_parse_error():
    text = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3,), "float32")):
        y = x(x)
        return y
"""
    with pytest.raises(relax_mlir.script.parser.ParseError, match="x is R.Tensor.*not a function"):
        from_source(text)


PRIVATE = """
@I.ir_module
class Module:
    @R.function(private=True)
    def helper(a: R.Tensor((3,), "float32"), unused: R.Tensor((3,), "float32")):
        return a

    @R.function(private=True, pure=False)
    def lonely(a: R.Tensor((3,), "float32")):
        return a

    @R.function
    def main(x: R.Tensor((3,), "float32")):
        y = cls.helper(x, x)
        return y
"""


def test_private_functions_are_kept_by_the_text_format_and_honoured_by_the_passes():
    mod = from_source(PRIVATE)
    roundtrip(mod)
    assert "@R.function(private=True)\n    def helper(" in mod.script()
    assert "@R.function(pure=False, private=True)\n    def lonely(" in mod.script()
    assert mod["helper"].is_private and not mod["main"].is_private
    assert transform.utils.private_functions(mod) == {"helper", "lonely"}
    # TVM: an unused private function is dead; a private one keeps no global_symbol
    assert sorted(n for n, _ in transform.DeadCodeElimination()(mod).items()) == ["helper", "main"]
    attached = transform.AttachGlobalSymbol()(mod)
    assert "global_symbol" not in attached["helper"].attrs and attached["main"].attrs["global_symbol"] == "main"
    # a private function's signature may change: its unused parameter goes
    assert len(transform.RemoveUnusedParameters()(mod)["helper"].params) == 1
    with pytest.raises(relax_mlir.script.parser.ParseError, match="a private function has no global_symbol"):
        from_source(PRIVATE.replace('        return a\n\n    @R.function(private=True, pure=False)',
                                    '        R.func_attr({"global_symbol": "helper"})\n        return a\n\n'
                                    '    @R.function(private=True, pure=False)'))


def test_gradient_names_what_it_cannot_differentiate_and_the_way_round():
    text = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3,), "float32"), w: R.Tensor((3,), "float32")):
        @R.function
        def f(y: R.Tensor((3,), "float32")):
            z = R.multiply(y, w)
            return z
        with R.dataflow():
            a = f(x)
            s = R.sum(a)
            R.output(s)
        return s
"""
    mod = from_source(text)
    with pytest.raises(transform.GradientError, match=r"calls of local functions \(f\) .*LambdaLift"):
        transform.Gradient("main")(mod)
    grads = transform.Gradient("main")(transform.InlineFunctions()(transform.LambdaLift()(mod)))
    x, w = np.ones(3, np.float32), np.arange(3, dtype=np.float32)
    loss, (gx, gw) = relax_mlir.interpret(grads, "main_adjoint", x, w)
    np.testing.assert_array_equal(gx, w)  # d sum(x * w) / dx = w, hand-derived
    np.testing.assert_array_equal(gw, x)
    packed = from_source("""
@I.ir_module
class Module:
    @R.function(pure=False)
    def main(x: R.Tensor((3,), "float32")):
        y = R.call_packed("scale", x, sinfo_args=R.Tensor((3,), "float32"))
        s = R.sum(y)
        return s
""")
    with pytest.raises(transform.GradientError, match=r"call_packed\('scale'\) calls a host function"):
        transform.Gradient("main")(packed)
