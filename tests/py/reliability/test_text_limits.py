"""Text that is too big, too deep or of the wrong kind gets a worded error with its place, never a hang, a
RecursionError or an internal exception; and what the printer writes reads back. Each case was found by fuzzing
the front ends (a 284-byte shape annotation took 40 s and 3 GB to read; symbolic R.Prim values did not round-trip;
deep nests leaked RecursionError; pass options of the wrong type failed inside the pass)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import relax_mlir
from relax_mlir import transform
from relax_mlir.dpl import parse_pattern
from relax_mlir.ir import IRModule, structural_equal
from relax_mlir.script import from_source
from relax_mlir.script.parser import ParseError
from relax_mlir.transform.pipeline_text import PipelineError, parse_pipeline

T = 'R.Tensor((2, 3), "float32")'


def _function(params: str, body: str) -> str:
    return f"@R.function\ndef f({params}):\n    {body}\n"


@pytest.mark.parametrize("dim", ["*".join(f"(a{i}+b{i})" for i in range(24)),
                                 '"' + "*".join(f"(a{i}+b{i})" for i in range(24)) + '"'])
def test_a_product_of_sums_too_large_to_expand_is_refused(dim):
    # expanded term by term this has 2**24 terms; refused as soon as a product passes 1024 terms
    with pytest.raises(ParseError, match=r"<string>:2:\d+: symbolic size too large"):
        from_source(_function(f'x: R.Tensor(({dim}, 3), "float32")', "return x"))


def test_a_product_of_sums_that_fits_is_kept():
    mod = from_source(_function('x: R.Tensor(("(a + b) * (c + d)", 3), "float32"), '
                                'y: R.Tensor(("a", "b", "c", "d"), "float32")', "return x"))
    dim = mod.params[0].struct_info.shape[0]
    assert sorted(m for m, _ in dim.terms) == [("a", "c"), ("a", "d"), ("b", "c"), ("b", "d")]
    assert structural_equal(from_source(mod.script()), mod)


@pytest.mark.parametrize("text", [
    _function(f"x: {T}", "t = (x,)\n    return t" + "[0]" * 500),
    _function(f'x: R.Tensor(({"+".join(["n"] * 1000)}, 3), "float32")', "return x"),
    _function(f'x: R.Tensor(("{"+".join(["n"] * 1000)}", 3), "float32")', "return x"),
    _function(f'x: R.Tensor(("{"-" * 5000}n", 3), "float32")', "return x"),
])
def test_nests_deeper_than_the_recursion_limit_are_parse_errors(text):
    with pytest.raises(ParseError, match=r"<string>:\d+:\d+: .*nests too deeply"):
        from_source(text)


def test_patterns_too_deep_or_not_text_are_refused():
    with pytest.raises(ValueError, match="nests too deeply"):
        parse_pattern("|".join(["_"] * 3000))
    with pytest.raises(TypeError, match="expected the pattern as a str, got NoneType"):
        parse_pattern(None)
    with pytest.raises(ValueError, match=r"cannot read '_\[True\]'"):
        parse_pattern("_[True]")
    assert parse_pattern("(_, _)[1]") is not None


@pytest.mark.parametrize("text", [
    _function('x: R.Tensor(("n", 3), "float32"), p: R.Prim(value="n", dtype="int64")', "return p"),
    _function('x: R.Tensor(("n", 3), "float32")', 'return R.prim_value("n")'),
    _function('x: R.Tensor(("n", 3), "float32"), p: R.Prim("int64", "n")', "return x"),
    _function('x: R.Tensor(("n", 3), "float32"), p: R.Prim("n + 1", "int64")', "return x"),
    _function(f"x: {T}", 'return R.prim_value(2.5, "float32")'),
    _function('x: R.Tensor("float32", ndim=2)', "return x"),
    _function('x: R.Tensor(None, "float32")', "return x"),
])
def test_scalars_and_tvm_spellings_read_back_equal(text):
    mod = from_source(text)
    again = from_source(mod.script())
    assert structural_equal(again, mod) and again.script() == mod.script()


def test_a_symbolic_prim_annotation_is_the_size_itself():
    mod = from_source(_function('x: R.Tensor(("n", 3), "float32"), p: R.Prim(value="n", dtype="int64")', "return p"))
    value = mod.params[1].struct_info.value
    assert not isinstance(value, str) and str(value) == "n"


@pytest.mark.parametrize("annotation, message", [
    ('R.Tensor(dtype="float32", ndim="a")', "ndim must be an int from 0 to 64, or -1"),
    ('R.Tensor(dtype="float32", ndim=2.5)', "ndim must be an int"),
    ('R.Tensor(dtype="float32", ndim=-2)', "ndim must be an int"),
    ('R.Tensor(dtype="float32", ndim=True)', "ndim must be an int"),
    ('R.Shape(ndim="q")', "ndim must be an int"),
    ("R.Shape([1, 2], ndim=3)", "ndim 3 disagrees with values"),
    ('R.Prim("int64", value=2.5)', r"2.5 \(float\) is not a value of dtype int64"),
    ('R.Prim("int8", value=1000)', r"1000 does not fit in int8 \(-128 to 127\)"),
    ('R.Prim("bool", value=5)', "is not a value of dtype bool"),
    ('R.Tensor((99999999999999999999, 3), "float32")', "does not fit in int64"),
    ("R.Shape([-1])", "must be non-negative"),
])
def test_impossible_struct_info_is_refused_where_it_is_written(annotation, message):
    with pytest.raises(ParseError, match=r"<string>:2:\d+: .*" + message):
        from_source(_function(f"x: {annotation}", "return x"))


@pytest.mark.parametrize("body, message", [
    ('return R.prim_value(1.5, "int64")', "is not a value of dtype int64"),
    ('return R.prim_value(300, "int8")', "does not fit in int8"),
    ("return R.prim_value(None)", "a value is needed"),
    ("return R.prim_value()", "takes a value"),
    ("return R.shape([-2])", "must be non-negative"),  # (-1 is reshape's placeholder, as TVM's)
    ('return R.zeros((99999999999999999999,), "float32")', "does not fit in int64"),
])
def test_impossible_values_are_refused_where_they_are_written(body, message):
    with pytest.raises(ParseError, match=r"<string>:3:\d+: .*" + message):
        from_source(_function(f"x: {T}", body))


def test_a_tensor_larger_than_memory_is_refused_at_export():
    import relax_mlir

    mod = from_source(_function('x: R.Tensor((9223372036854775807, 3), "float32")', "return R.add(x, x)"))
    with pytest.raises(ValueError, match="larger than any address space"):
        relax_mlir.to_mlir(IRModule({"main": mod}), "linalg")


@pytest.mark.parametrize("text, message", [
    ("Gradient(func_name=3)", r"option func_name=3 is not a str or a GlobalVar"),
    ("Gradient(func_name=main, require_grads=5)", "option require_grads=5 is not a Var or a str or a list of Var or a str or None"),
    ("Gradient(func_name=main, target_index=1.0)", "option target_index=1.0 is not an int"),
    ("BindParams(func_name=main, params=5)", "option params=5 is not a dict"),
    ("LegalizeOps(5)", "option customize_legalize_map=5 is not a dict or None"),
    ("CombineParallelMatmul(5)", "not a Python function .not available from the command line. or None"),
])
def test_pass_options_of_the_wrong_type_are_pipeline_errors(text, message):
    with pytest.raises(PipelineError, match=message):
        parse_pipeline(text)


def test_passes_used_wrongly_say_what_is_wrong():
    mod = from_source(_function(f"x: {T}", "return R.sum(x)"))
    mod = IRModule({"main": mod})
    with pytest.raises(ValueError, match="require_grads is empty"):
        transform.Gradient("main", require_grads=[])(mod)
    with pytest.raises(ValueError, match="InlineFunctions: the module has no function 'nope' .it has: main."):
        transform.InlineFunctions(["nope"])(mod)


def _cli(tmp_path, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "relax_mlir.cli", *args], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300)


def test_the_command_line_answers_bad_names_and_files_in_one_line(tmp_path):
    (tmp_path / "good.py").write_text("@I.ir_module\nclass M:\n" + "".join(
        "    " + line + "\n" for line in _function(f"x: {T}", "return R.sum(x)").replace("def f", "def main").splitlines()))
    (tmp_path / "bad.pt2").write_bytes(b"not a zip archive")
    (tmp_path / "latin1.py").write_bytes(b"@R.function\ndef f(x: R.Tensor((2,), 'float32')):\n    return x  # caf\xe9\n")
    (tmp_path / "sym.py").write_text('@R.function\ndef f(x: R.Tensor(("n",), "float32")):\n    return x\n')
    for args, message in [(("print", "latin1.py"), "latin1.py:3: not UTF-8 text (byte 0xe9 at offset"),
                          (("opt", "sym.py", "--passes", "BindSymbolicVars(binding_map={'n': 2.5})"),
                           "--passes: BindSymbolicVars: 'n' must be bound to an int or a dim, got 2.5"),
                          (("print", "good.py", "-f", "nosuch"), "the module has no function 'nosuch'"),
                          (("opt", "good.py", "--passes", "Gradient(func_name=main, require_grads=[])"),
                           "require_grads is empty"),
                          (("import", "bad.pt2"), "bad.pt2: not an exported program torch.export.load can read"),
                          (("import", "bad.pt2", "--params", "."), "--params .: is a directory; expected a file name")]:
        done = _cli(tmp_path, *args)
        assert done.returncode == 1, done
        assert message in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_the_demo_and_standard_input_answer_bad_input_in_one_line(tmp_path):
    for args, message in [(("demo", "--hidden", "0"), "argument --hidden: expected a positive integer, got '0'"),
                          (("demo", "--batch-size", "0"), "argument --batch-size: expected a positive integer"),
                          (("demo", "--batch-size", "5000"), "the digits have 1797 examples")]:
        done = _cli(tmp_path, *args)
        assert done.returncode in (1, 2), done  # (argparse's own errors exit with 2)
        assert message in done.stderr and "Traceback" not in done.stderr, done.stderr
    done = subprocess.run([sys.executable, "-m", "relax_mlir.cli", "print", "-"], input=b"\xff\xfe",
                          capture_output=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 1
    assert b"<stdin>:1: not UTF-8 text (byte 0xff at offset 0)" in done.stderr, done.stderr


def test_a_byte_order_mark_is_read_as_python_reads_it(tmp_path, monkeypatch, capsys):
    """UTF-8 with a byte-order mark (as some editors save it; Python reads such source) was refused by every
    command: "invalid non-printable character U+FEFF". An offset in an error still counts the mark's bytes."""
    import io

    from relax_mlir.cli import main

    bom = b"\xef\xbb\xbf"
    text = b'@R.function\ndef main(x: R.Tensor((2,), "float32")):\n    return x\n'
    (tmp_path / "bom.py").write_bytes(bom + text)
    assert main(["print", str(tmp_path / "bom.py")]) == 0
    assert capsys.readouterr().out == from_source(text.decode()).script() + "\n"
    assert main(["check", str(tmp_path / "bom.py")]) == 0 and "well formed" in capsys.readouterr().out
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(bom + text)))
    assert main(["opt", "-", "--passes", "CanonicalizeBindings"]) == 0 and "def main" in capsys.readouterr().out
    (tmp_path / "latin1.py").write_bytes(bom + text + b"# caf\xe9\n")
    assert main(["print", str(tmp_path / "latin1.py")]) == 1
    assert f"latin1.py:4: not UTF-8 text (byte 0xe9 at offset {len(bom + text) + 5})" in capsys.readouterr().err


def test_nesting_beyond_the_recursion_limit_is_one_clear_error(tmp_path):
    # a chain of 1200 tuples `t{i} = (t{i-1},)` parses; printing and checking it recurse once per level (a bare
    # RecursionError traceback from the command line); a chain of 300 calls compiles but is too deep to interpret
    lines = ["t0 = (x,)"] + [f"t{i} = (t{i - 1},)" for i in range(1, 1200)]
    (tmp_path / "deep.py").write_text("@I.ir_module\nclass Module:\n    @R.function\n    def main(x: " + T + "):\n"
                                      + "".join(f"        {line}\n" for line in lines) + "        return x\n")
    done = _cli(tmp_path, "check", "deep.py")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "error: the module nests too deeply for this tool (Python's recursion limit" in done.stderr

    calls = "".join(f"    @R.function\n    def f{i}(x: {T}) -> {T}:\n        y = cls.f{i + 1}(x)\n        return y\n"
                    for i in range(299))
    mod = from_source(f"@I.ir_module\nclass Module:\n{calls}    @R.function\n    def f299(x: {T}) -> {T}:\n"
                      "        y = R.add(x, x)\n        return y\n")
    with pytest.raises(RecursionError, match=r"interpret: f0: the program nests too deeply for the interpreter .* "
                                             r"compile it instead"):
        relax_mlir.interpret(mod, "f0", np.ones((2, 3), np.float32))
