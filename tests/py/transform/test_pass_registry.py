"""Every pass is reachable from the registry, documented, and reports its TVM name; the infrastructure's
instruments see every pass run."""

from __future__ import annotations

import inspect
import re
import textwrap

import pytest

import relax_mlir
import relax_mlir.backend.legalize  # noqa: F401 - LegalizeOps's example names one of its rules
from relax_mlir import op, transform
from relax_mlir.ir import BlockBuilder, TensorStructInfo, Var
from relax_mlir.ir.structural_equal import assert_structural_equal
from relax_mlir.script import from_source
from relax_mlir.testing import roundtrip

_EXAMPLE = re.compile(r"^Example, applied as ``(?P<call>.+)``::$", re.M)


@pytest.mark.parametrize("cls", transform.list_passes(), ids=lambda c: c.__name__)
def test_pass_is_registered_and_documented(cls):
    assert issubclass(cls, transform.Pass)
    assert inspect.getdoc(cls) and len(inspect.getdoc(cls)) > 20, f"{cls.__name__} needs a docstring"
    module_doc = inspect.getdoc(inspect.getmodule(cls))
    assert module_doc, f"the file of {cls.__name__} needs a docstring with a before/after example"


def _indented_block(text: str) -> str:
    """The literal block at the start of ``text``: blank lines and lines indented by at least 4 spaces."""
    lines = []
    for line in text.lstrip("\n").splitlines():
        if line.strip() and not line.startswith("    "):
            break
        lines.append(line)
    return textwrap.dedent("\n".join(lines))


def doc_example(cls) -> tuple[str, str, str]:
    """``(call, before, after)`` from the pass's docstring: ``Example, applied as ``Pass(...)``::`` then the
    "before" block, then ``becomes::`` and the "after" block."""
    doc = inspect.getdoc(cls)
    found = _EXAMPLE.search(doc)
    assert found, f"{cls.name}: the docstring needs 'Example, applied as ``{cls.name}(...)``::' and a before block"
    before_text, sep, after_text = doc[found.end():].partition("\nbecomes::\n")
    assert sep, f"{cls.name}: the example needs a 'becomes::' line before the after block"
    return found.group("call"), _indented_block(before_text), _indented_block(after_text)


@pytest.mark.parametrize("cls", transform.list_passes(), ids=lambda c: c.name)
def test_docstring_example_parses_and_the_pass_gives_its_after(cls):
    call, before_text, after_text = doc_example(cls)
    before, expected = from_source(before_text), from_source(after_text)
    # The call sees the transform names, the parsed "before" module (for arguments such as a loss function)
    # and the package (for a lowering rule).
    the_pass = eval(call, {**vars(transform), "before": before, "relax_mlir": relax_mlir})  # noqa: S307
    assert type(the_pass) is cls, f"{cls.name}: the example applies {type(the_pass).__name__}"
    assert_structural_equal(the_pass(before), expected)
    roundtrip(expected)


def test_doc_example_reader_reports_a_missing_example():
    class Undocumented(transform.Pass):
        """A pass without an example."""

        name = "TestOnlyUndocumented"

    try:
        with pytest.raises(AssertionError, match="docstring needs 'Example, applied as"):
            doc_example(Undocumented)
    finally:
        del transform.PASSES["TestOnlyUndocumented"]


def _module():
    x = Var("x", TensorStructInfo((3,), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(op.exp(x))
            b = bb.emit(a)  # an alias, for CanonicalizeBindings
            gv = bb.emit_output(op.sum(b))
        bb.emit_func_output(gv)
    return bb.get()


def test_instruments_time_and_print_every_pass():
    timing, printed = transform.PassTimingInstrument(), []
    seq = transform.Sequential([transform.CanonicalizeBindings(), transform.Gradient("main"),
                                transform.DeadCodeElimination()])
    with transform.PassContext(instruments=[timing, transform.PrintAfterAll(printed.append)]):
        out = seq(_module())
    assert "main_adjoint" in out
    assert [name for name, _ in timing.timings] == ["CanonicalizeBindings", "Gradient", "DeadCodeElimination",
                                                    "sequential"]
    assert "Gradient" in timing.render()
    assert printed[1].startswith("# IR after Gradient") and "def main_adjoint" in printed[1]


def test_disabled_pass_is_skipped_and_a_broken_pass_is_caught():
    mod = _module()
    with transform.PassContext(disabled_pass=["Gradient"]):
        assert "main_adjoint" not in transform.Gradient("main")(mod)

    @transform.module_pass(name="Breaker")
    def breaker(m, ctx):
        from relax_mlir.ir import Function, SeqExpr

        f = m["main"]
        bad = Function(f.params, SeqExpr(f.body.blocks[1:], f.body.body), f.ret_struct_info)  # drops a block
        out = m.copy()
        out["main"] = bad
        return out

    with pytest.raises(ValueError, match=r"module after Breaker is not well formed"):
        breaker(mod)


def test_defining_a_pass_registers_it_and_names_are_unique():
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Renamer(transform.Pass):
        """A pass defined in a test: it registers itself by its name."""

        name = "TestOnlyRenamer"

        def transform_module(self, mod, ctx):
            return mod

    try:
        assert transform.PASSES["TestOnlyRenamer"] is Renamer
        assert Renamer().info.name == "TestOnlyRenamer"
        with pytest.raises(ValueError, match=r"pass name 'TestOnlyRenamer' of .* is already taken by"):
            type("Other", (transform.Pass,), {"name": "TestOnlyRenamer"})
    finally:
        del transform.PASSES["TestOnlyRenamer"]
    assert "TestOnlyRenamer" not in [c.name for c in transform.list_passes()]


def test_passes_are_frozen_dataclasses_with_tvm_signatures(capsys):
    import dataclasses

    from relax_mlir.cli import main

    for cls in transform.list_passes():
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen, cls.__name__
        assert cls.name == cls.__name__
    x = Var("x", TensorStructInfo((3,), "float32"))
    assert transform.Gradient("main", [x], 0) == transform.Gradient("main", require_grads=x, target_index=0)
    assert transform.DecomposeOpsForTraining(func_name=None) == transform.DecomposeOpsForTraining()
    with pytest.raises(dataclasses.FrozenInstanceError):
        transform.Gradient("main").target_index = 1
    assert main(["passes"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert listed == sorted(transform.PASSES)


def test_none_means_empty_as_in_tvm():
    """TVM's defaults are None: PassContext(required_pass=None, ...) and Sequential(None) are accepted."""
    ctx = transform.PassContext(opt_level=3, required_pass=None, disabled_pass=None, instruments=None)
    assert (ctx.opt_level, ctx.required_pass, ctx.disabled_pass, ctx.instruments) == (3, set(), set(), [])
    mod = _module()
    with ctx:
        assert transform.Sequential(None)(mod) is mod
    assert transform.Sequential().passes == []
