"""Pipelines written as text (``relax-mlir opt --passes``): names, options, literal values only."""

from __future__ import annotations

import pytest

from relax_mlir.transform import DeadCodeElimination, Gradient, PipelineError, parse_pipeline


def test_names_and_options_build_the_passes():
    passes = parse_pipeline('CanonicalizeBindings , Gradient(main, require_grads=None, target_index=0),'
                            'DeadCodeElimination(entry_functions=["main", "f"])')
    assert [p.name for p in passes] == ["CanonicalizeBindings", "Gradient", "DeadCodeElimination"]
    assert passes[1] == Gradient("main", None, 0)  # positional options in field order; frozen passes compare
    assert passes[2] == DeadCodeElimination(entry_functions=["main", "f"])


@pytest.mark.parametrize("text, message", [
    ("", "expected pass names"),
    ("Gradient(func_name=main", "unclosed parenthesis"),
    ("Gradient)", r"unbalanced '\)'"),
    ("Nope", "unknown pass 'Nope'; passes: AdjustMatmulOrder, AppendLoss, "),
    ("Gradient(oops=1)", "Gradient has no option 'oops'; its options: func_name, require_grads, target_index"),
    ("Gradient(1, 2, 3, 4)", "Gradient has no option beyond 3"),
    ("Gradient(func_name=__import__('os').getcwd())", "is not a literal"),
    ("gradient.Gradient", "cannot read 'gradient.Gradient'"),
    ("DeadCodeElimination(entry_functions='main')", r"DeadCodeElimination: .*string 'main' \(write \['main'\]\)"),
    # an option given twice, or a missing pass, is a mistake to name rather than a last value or an entry to skip
    ("Gradient(func_name=nope, func_name=main)", r"in 'Gradient\(func_name=nope, func_name=main\)', option "
                                                 r"'func_name' is given twice"),
    ("Gradient(**{'func_name': 'main'})", r"'\*\*' is not an option"),
    ("FoldConstant,,FoldConstant", r"entry 2 of 'FoldConstant,,FoldConstant' is empty"),
    ("FoldConstant, ", r"entry 2 of 'FoldConstant, ' is empty"),
    (" , ", "expected pass names"),
    ('Gradient(func_name="main)', r"unclosed string \(from character 20\) in 'Gradient\(func_name=\"main\)'"),
    ("Gradient(func_name='a(b'", "unclosed parenthesis"),
    # a pass's own check that names it is not named twice ("TopologicalSort: TopologicalSort: ...")
    ("TopologicalSort('nope')", r"^--passes: TopologicalSort: order must be one of depth-first, breadth-first"),
])
def test_bad_pipelines_say_what_is_allowed(text, message):
    with pytest.raises(PipelineError, match=message):
        parse_pipeline(text)


@pytest.mark.parametrize("text, names", [
    ('Gradient(func_name="a(b")', ["a(b"]),
    ("Gradient(func_name='a,b)]'), Gradient(func_name=main)", ["a,b)]", "main"]),
    (r"""Gradient(func_name="a\"(,"), Gradient(func_name='\'[')""", ['a"(,', "'["]),
    ("Gradient(func_name='''it's ('''),Gradient(func_name=\"\"\"x\"y)\"\"\")", ["it's (", 'x"y)']),
    (r'Gradient(func_name=r"\"("), Gradient(func_name="")', [r'\"(', ""]),  # (raw: \" is both characters)
])
def test_brackets_and_commas_in_strings_belong_to_the_string(text, names):
    """The splitter counted the brackets inside quoted strings: `Gradient(func_name="a(b")` was refused as an
    unclosed parenthesis. Strings in either quote, triple-quoted, with escapes, raw, are skipped as Python reads
    them."""
    passes = parse_pipeline(text)
    assert [p.func_name for p in passes] == names
