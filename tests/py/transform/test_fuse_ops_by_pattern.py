"""FuseOpsByPattern: matched bindings become private Composite functions that compute, interpreted and compiled,
what the bindings did; what may not be grouped stays."""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir as rm
from relax_mlir import transform
from relax_mlir.dpl import is_op, wildcard
from relax_mlir.ir.struct_info import TensorStructInfo
from relax_mlir.models import mlp
from relax_mlir.script import from_source
from relax_mlir.testing import roundtrip
from relax_mlir.training import SGD, CrossEntropyLoss, SetupTrainer, Trainer

DENSE = is_op("relax.add")(is_op("relax.matmul")(wildcard(), wildcard()), wildcard())
SOURCE = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 4), "float32"), w: R.Tensor((4, 4), "float32"), b: R.Tensor((4,), "float32")):
        with R.dataflow():
            lv = R.matmul(x, w)
            lv1 = R.add(lv, b)
            h = R.nn.relu(lv1)
            lv2 = R.matmul(h, w)
            lv3 = R.add(lv2, R.const(1.0, "float32"))
            y = R.sum(lv3)
            R.output(y)
        return y
"""


def _args(seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype("float32") for s in [(2, 4), (4, 4), (4,)]]


def test_each_match_becomes_a_composite_function():
    mod = from_source(SOURCE)
    fused = roundtrip(transform.FuseOpsByPattern([("dense", DENSE)])(mod))
    assert sorted(fused) == ["fused_dense", "fused_dense_1", "main"]
    assert fused["fused_dense"].attrs["Composite"] == "dense" and fused["fused_dense"].attrs["Primitive"]
    assert "R.matmul" not in fused["main"].script()
    assert 'R.const(1.0, "float32")' in fused["fused_dense"].script() + fused["fused_dense_1"].script()
    args = _args()
    want = rm.interpret(mod, "main", *args)
    np.testing.assert_array_equal(np.asarray(rm.interpret(fused, "main", *args)), np.asarray(want))
    got = rm.VirtualMachine(rm.compile(fused))["main"](*args)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)


def test_a_value_used_outside_the_group_is_not_grouped():
    text = SOURCE.replace("y = R.sum(lv3)", "y = R.add(R.sum(lv3), R.sum(lv))")
    fused = transform.FuseOpsByPattern([("dense", DENSE)])(from_source(text))
    assert sorted(fused) == ["fused_dense", "main"]  # the first matmul's result is read again: only the second
    args = _args(1)
    np.testing.assert_allclose(np.asarray(rm.interpret(fused, "main", *args)),
                               np.asarray(rm.interpret(from_source(text), "main", *args)), rtol=0, atol=0)


def test_check_sees_the_match_and_may_refuse_it():
    seen = []

    def check(ctx: transform.PatternCheckContext) -> bool:
        seen.append((ctx.matched_expr.op.name, sorted(v.name_hint for v in ctx.matched_bindings),
                     sorted(ctx.annotated_expr)))
        return "lv" in {v.name_hint for v in ctx.matched_bindings}

    pattern = transform.FusionPattern("dense", DENSE, {"product": is_op("relax.matmul")(wildcard(), wildcard())},
                                      check)
    fused = transform.FuseOpsByPattern([pattern])(from_source(SOURCE))
    assert sorted(fused) == ["fused_dense", "main"]
    assert ("relax.add", ["lv2", "lv3"], ["product"]) in seen and ("relax.add", ["lv", "lv1"], ["product"]) in seen


def test_bad_options_are_refused():
    with pytest.raises(ValueError, match="annotate_codegen"):
        transform.FuseOpsByPattern([("dense", DENSE)], annotate_codegen=True)
    with pytest.raises(TypeError, match="expected a FusionPattern"):
        transform.FuseOpsByPattern(["dense"])


def test_a_fused_training_step_trains_the_same():
    setup = SetupTrainer(CrossEntropyLoss(reduction="sum"), SGD(0.01),
                         [TensorStructInfo((8, 10), "float32"), TensorStructInfo((8,), "int64")])
    mod = setup(mlp(8, (16, 12, 10)))
    fused = transform.FuseOpsByPattern([("dense", DENSE), ("relu", is_op("relax.nn.relu")(wildcard()))])(mod)
    assert any(n.startswith("fused_dense") for n in fused) and any(n.startswith("fused_relu") for n in fused)
    rng = np.random.default_rng(2)
    batches = [(rng.standard_normal((8, 16)).astype("float32"), rng.integers(0, 10, 8)) for _ in range(3)]
    losses = {}
    for key, m in (("plain", mod), ("fused", fused)):
        trainer = Trainer(m).build()
        trainer.xavier_uniform_init_params(seed=4)
        losses[key] = [float(np.asarray(trainer.update_params(x, y))) for x, y in batches]
    np.testing.assert_allclose(losses["fused"], losses["plain"], rtol=1e-6)


def test_patterns_as_text():
    from relax_mlir.dpl import parse_pattern

    fused = transform.FuseOpsByPattern([("dense", "relax.add(relax.matmul(_, _), _ | const)")])(from_source(SOURCE))
    assert sorted(fused) == ["fused_dense", "fused_dense_1", "main"]
    mod = from_source(SOURCE)
    nothing = transform.FuseOpsByPattern([("dense", "relax.add(relax.matmul(_, _), relax.nn.relu(_))")])
    assert nothing(mod) is mod  # no add of a matmul and a relu here
    for bad, message in [("relax.nope(_)", "no op named 'relax.nope'"), ("1 +", "not an expression"),
                         ("relax.add(x=_)", "cannot read"), ("lambda: 0", "cannot read")]:
        with pytest.raises(ValueError, match=message):
            parse_pattern(bad)
    pick = parse_pattern("(relax.exp(_), const)[1]")
    from relax_mlir.dpl import is_const, is_op, is_tuple, is_tuple_get_item
    assert type(pick) is type(is_tuple_get_item(is_tuple([is_op("relax.exp")(wildcard()), is_const()]), 1))
    assert pick.tuple_pattern.fields[1].__class__ is is_const().__class__ and pick.index == 1


def test_an_annotated_sub_pattern_is_what_it_matched_in_this_match_not_a_var_that_also_matches():
    # matmul(x, permute_dims(permute_dims(w))): the inner transpose's variable matches the transpose pattern too
    # (through its binding); the check was handed that Var and crashed (AttributeError: no attribute 'args')
    mod = from_source('''@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float32"), w: R.Tensor((3, 4), "float32")) -> R.Tensor((2, 4), "float32"):
        with R.dataflow():
            wt = R.permute_dims(w, [1, 0])
            wtt = R.permute_dims(wt, [1, 0])
            a = R.matmul(x, wtt)
            R.output(a)
        return a
''')
    out = transform.FuseTransposeMatmul()(mod)
    fused = out["fused_transpose_matmul_fuse"]
    assert [b.var.name_hint for b in fused.body.blocks[0].bindings] == ["wtt", "a"]
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((3, 4)).astype(np.float32)
    # Against the float64 product, with a floor of 4 float32 ulps of the sums of |products|: rtol alone was 0.56 of
    # the way to failing where a row's 3 products cancel, and NumPy's float32 x @ w is the host's BLAS kernel's.
    floor = 4 * float(np.finfo(np.float32).eps) * float((np.abs(x.astype(np.float64)) @ np.abs(w)).max())
    np.testing.assert_allclose(rm.interpret(out, "main", x, w), x.astype(np.float64) @ w, rtol=1e-6, atol=floor)


ENTRY = (r"a FusionPattern or a tuple \(name, pattern\[, annotations\[, check\]\]\): name a str; pattern a dpl "
         r"Pattern or its text \(dpl.parse_pattern\); annotations a dict of names to Patterns \(or their text\), or "
         r"None; check a function of a PatternCheckContext returning whether to fuse, or None")


@pytest.mark.parametrize("patterns, error, message", [
    ([("a", "relax.add(_, _)", 5)], TypeError, r"patterns\[0\]: the annotations \(element 2\) are 5 \(int\); "
                                                r"expected a dict of names to Patterns \(or their text\), or None\. "
                                                r"Each entry is " + ENTRY + "$"),
    ([("dense", DENSE), (1, "_")], TypeError, r"patterns\[1\]: the name \(element 0\) is 1 \(int\); expected a str"),
    ([("a", 5)], TypeError, r"patterns\[0\]: the pattern \(element 1\) is 5 \(int\); expected a dpl Pattern or its "
                            r"text, such as 'relax.add\(_, _\)'$"),
    ([("a", "_", None, 3)], TypeError, r"patterns\[0\]: the check \(element 3\) is 3 \(int\); expected a function"),
    ([("a", "_", {"x": 3})], TypeError, r"patterns\[0\]: annotation 'x' is 3 \(int\); expected a dpl Pattern"),
    ([("a", "_", {0: "_"})], TypeError, r"patterns\[0\]: the annotations \(element 2\) have the key 0 \(int\)"),
    ([("a", "_", {}, None, 5)], TypeError, r"patterns\[0\] is \('a', '_', \{\}, None, 5\) \(tuple\); expected "
                                           + ENTRY + "$"),
    ([("a", "relax.nope(_)")], ValueError, r"patterns\[0\]: the pattern \(element 1\): pattern 'relax.nope\(_\)': "
                                           r"no op named 'relax.nope'$"),
    (5, TypeError, r"patterns is 5 \(int\); expected a list of patterns, each " + ENTRY + "$"),
])
def test_a_bad_pattern_entry_is_named_with_what_each_element_may_be(patterns, error, message):
    """Annotations 5 said only "'int' object is not iterable" (from dict(5)), naming neither the pass, the entry
    nor what a pattern tuple holds."""
    with pytest.raises(error, match="^FuseOpsByPattern: " + message):
        transform.FuseOpsByPattern(patterns)


def test_a_bad_pattern_entry_through_relax_mlir_opt_is_one_line(tmp_path, capsys):
    from relax_mlir.cli import main

    path = tmp_path / "m.py"
    path.write_text(SOURCE)
    assert main(["opt", str(path), "--passes", "FuseOpsByPattern(patterns=[('a', 'relax.add(_, _)', 5)])"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("relax-mlir opt: error: --passes: FuseOpsByPattern: patterns[0]: "
                                                   "the annotations (element 2) are 5 (int); expected a dict")


def test_pattern_entries_may_be_lists_and_annotations_text():
    """Annotations as text (relax-mlir opt can give only text) match as the Patterns they parse to; a list entry is
    read as the tuple."""
    seen = []
    entry = ["dense", "relax.add(relax.matmul(_, _), _)", {"product": "relax.matmul(_, _)"},
             lambda ctx: seen.append(ctx.annotated_expr["product"].op.name) or True]
    fused = transform.FuseOpsByPattern([entry])(from_source(SOURCE))
    assert sorted(fused) == ["fused_dense", "fused_dense_1", "main"] and seen == ["relax.matmul"] * 2
