"""MergeCompositeFunctions: connected composite calls of one code generator merged into Codegen functions (their
composites local inside), never into a cycle, several results as a tuple, values unchanged (interpreted and
compiled), on hand-written cases and random blocks."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relax_mlir
from relax_mlir import transform
from relax_mlir.dpl import is_op, wildcard
from relax_mlir.ir import check_well_formed
from relax_mlir.ir.expr import Call, Function, GlobalVar
from relax_mlir.script import from_source
from relax_mlir.testing import roundtrip

PATTERNS = [("a.exp", is_op("relax.exp")(wildcard())), ("b.tanh", is_op("relax.tanh")(wildcard())),
            ("a.add", is_op("relax.add")(wildcard(), wildcard())),
            ("b.multiply", is_op("relax.multiply")(wildcard(), wildcard()))]


def _merged(mod):
    fused = transform.FuseOpsByPattern(PATTERNS)(mod)
    merged = transform.MergeCompositeFunctions()(fused)
    check_well_formed(merged)
    roundtrip(merged)
    return fused, merged


def _codegen_functions(mod) -> dict[str, Function]:
    return {n: f for n, f in mod.items() if "Codegen" in f.attrs}


def _local_composites(func: Function) -> list[str]:
    return [b.value.attrs["Composite"] for block in func.body.blocks for b in block.bindings
            if isinstance(b.value, Function)]


def _module(lines: list[str], result: str) -> str:
    body = "\n".join(f"            {line}" for line in lines)
    return f"""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3,), "float64"), y: R.Tensor((3,), "float64")):
        with R.dataflow():
{body}
            R.output({result})
        return {result}
"""


def _check_values(before, after):
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(3) * 0.5, rng.standard_normal(3) * 0.5]
    want = relax_mlir.interpret(before, "main", *args)
    np.testing.assert_allclose(relax_mlir.interpret(after, "main", *args), want, rtol=0, atol=0)
    return args, want


def test_a_chain_of_one_generator_is_merged_and_another_generator_stays_apart():
    mod = from_source(_module(["a1 = R.exp(x)", "a2 = R.add(a1, y)", "b1 = R.tanh(a2)", "a3 = R.exp(b1)"], "a3"))
    _, merged = _merged(mod)
    groups = _codegen_functions(merged)
    kinds = sorted((f.attrs["Codegen"], tuple(_local_composites(f))) for f in groups.values())
    assert kinds == [("a", ("a.exp",)), ("a", ("a.exp", "a.add")), ("b", ("b.tanh",))]
    assert all(f.attrs["global_symbol"] == n for n, f in groups.items())
    assert not [n for n, f in merged.items() if "Composite" in f.attrs], "composites left in the module"
    args, want = _check_values(mod, merged)
    got = relax_mlir.VirtualMachine(relax_mlir.compile(merged))["main"](*args)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_no_merge_through_a_binding_outside_the_group():
    # a2 reads a1 directly and through n (not a composite): merging a1 and a2 would make a cycle
    mod = from_source(_module(["a1 = R.exp(x)", "n = R.negative(a1)", "a2 = R.add(a1, n)"], "a2"))
    _, merged = _merged(mod)
    assert sorted(tuple(_local_composites(f)) for f in _codegen_functions(merged).values()) == [("a.add",),
                                                                                                ("a.exp",)]
    _check_values(mod, merged)


def test_a_value_read_outside_the_group_is_a_second_result():
    mod = from_source(_module(["a1 = R.exp(x)", "a2 = R.add(a1, y)", "n = R.negative(a1)", "s = R.subtract(a2, n)"],
                              "s"))
    _, merged = _merged(mod)
    (func,) = _codegen_functions(merged).values()
    assert _local_composites(func) == ["a.exp", "a.add"]
    assert len(func.ret_struct_info.fields) == 2  # a1 (read by n) and a2
    _check_values(mod, merged)


def test_a_pattern_name_without_a_generator_is_refused():
    mod = transform.FuseOpsByPattern([("exp", is_op("relax.exp")(wildcard()))])(
        from_source(_module(["a1 = R.exp(x)"], "a1")))
    with pytest.raises(ValueError, match="'exp' does not name a code generator"):
        transform.MergeCompositeFunctions()(mod)


OPS = ["R.exp({0})", "R.tanh({0})", "R.add({0}, {1})", "R.multiply({0}, {1})", "R.negative({0})"]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(OPS) - 1), st.integers(0, 100), st.integers(0, 100)),
                min_size=1, max_size=8))
def test_random_blocks_merge_without_cycles_and_keep_their_values(program):
    lines, names = [], ["x", "y"]
    for k, (o, i, j) in enumerate(program):
        lines.append(f"v{k} = " + OPS[o].format(names[i % len(names)], names[j % len(names)]))
        names.append(f"v{k}")
    result = "(" + ", ".join(names[2:]) + ",)"
    mod = from_source(_module(lines, "r").replace("            R.output(r)", f"            r = {result}\n"
                                                                            "            R.output(r)"))
    fused, merged = _merged(mod)
    _check_values(mod, merged)
    calls_before = sum(isinstance(b.value, Call) and isinstance(b.value.op, GlobalVar)
                       for b in fused["main"].body.blocks[0].bindings)
    merged_funcs = _codegen_functions(merged)
    covered = sum(len(_local_composites(f)) for f in merged_funcs.values())
    # every composite call lands in exactly one merged function, all of one generator
    assert covered == calls_before and all(
        {c.split(".")[0] for c in _local_composites(f)} == {f.attrs["Codegen"]} for f in merged_funcs.values())
