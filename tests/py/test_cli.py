"""The command line's own rules, in-process: an output that names an input (or another output) is refused before any
work; a user's error is one line and status 1, a bug in relax-mlir keeps its traceback. (``relax-mlir train``'s
are in ``training/test_cli_train.py``.)"""

from __future__ import annotations

import os

import pytest

from relax_mlir.cli import main
from relax_mlir.script import from_source

SOURCE = '@R.function\ndef main(x: R.Tensor((2,), "float32")):\n    y = R.add(x, x)\n    return y\n'


@pytest.fixture
def files(tmp_path, monkeypatch):
    """A module in the text format, a file named as an ONNX model (the refusals come before it is read) and links
    to both, in the current directory."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.py").write_text(SOURCE)
    (tmp_path / "m.onnx").write_bytes(b"the bytes of a model")
    os.link("m.py", "hard.py")
    os.symlink("m.onnx", "soft.onnx")
    (tmp_path / "sub").mkdir()
    return tmp_path


@pytest.mark.parametrize("argv, message", [
    (["export", "m.py", "-o", "m.py"], "-o m.py: the same file as the input file m.py"),
    (["export", "m.py", "-o", "hard.py"], "-o hard.py: the same file as the input file m.py"),  # a hard link
    (["export", "m.py", "-o", "sub/../m.py"], "-o sub/../m.py: the same file as the input file m.py"),
    (["export", "hard.py", "-o", "{tmp}/m.py"], "-o {tmp}/m.py: the same file as the input file hard.py"),
    (["import", "m.onnx", "-o", "m.onnx"], "-o m.onnx: the same file as the model m.onnx"),
    (["import", "soft.onnx", "-o", "m.onnx"], "-o m.onnx: the same file as the model soft.onnx"),  # a link
    (["import", "m.onnx", "--params", "./m.onnx"], "--params ./m.onnx: the same file as the model m.onnx"),
    (["import", "m.onnx", "-o", "o.py", "--params", "o.py"], "--params o.py: the same file as -o o.py"),
    (["import", "m.onnx", "-o", "o.py", "--params", "sub/../o.py"], "--params sub/../o.py: the same file as -o o.py"),
])
def test_an_output_naming_an_input_or_another_output_is_refused_before_any_work(files, capsys, argv, message):
    """They exited 0: `export same.py -o same.py` replaced the text with a library, `import m.onnx -o m.onnx` the
    model with its text, `-o o.py --params o.py` the module with the parameters (after printing "wrote o.py")."""
    before = {name: (files / name).read_bytes() for name in ("m.py", "m.onnx")}
    assert main([a.format(tmp=files) for a in argv]) == 1
    err = capsys.readouterr().err
    assert err == (f"relax-mlir {argv[0]}: error: {message.format(tmp=files)}; expected another path (writing it "
                   "would replace that file)\n")
    assert {name: (files / name).read_bytes() for name in before} == before
    assert not (files / "o.py").exists()


def test_other_paths_pass_the_check(files, capsys):
    """Paths that name other files (the model's is read, and refused: it is none) are not refused as the same."""
    assert main(["import", "m.onnx", "-o", "o.py", "--params", "p.npz"]) == 1
    assert "from_onnx: m.onnx: not an ONNX model" in capsys.readouterr().err


def test_a_lone_function_whose_global_symbol_is_not_a_string_is_one_line(files, monkeypatch, capsys):
    """`opt` names a lone @R.function's module function by its global_symbol: one that is not a string (3) was a
    TypeError traceback from IRModule. (The parser refuses it too now; a module read any other way still gets
    the line.)"""
    import relax_mlir.cli as cli

    func = from_source(SOURCE).with_attr("global_symbol", 3)
    monkeypatch.setattr(cli, "_load", lambda path: func)
    assert main(["opt", "m.py", "--passes", "CanonicalizeBindings"]) == 1
    assert capsys.readouterr().err == ("relax-mlir opt: error: m.py: the function's global_symbol is 3; expected a "
                                       "string (the name of the module function it becomes)\n")


def test_opt_checks_the_module_before_the_passes(files, monkeypatch, capsys):
    """An ill-formed module is named as such (as print, check, emit and export do), not blamed on the first pass
    ("module after CanonicalizeBindings is not well formed") or met by a pass that cannot handle it."""
    import relax_mlir.cli as cli
    from relax_mlir.ir import BindingBlock, Function, IRModule, SeqExpr, TensorStructInfo, Var, VarBinding
    from relax_mlir import op

    x, z, a = (Var(n, TensorStructInfo((3,), "float32")) for n in "xza")
    mod = IRModule({"main": Function([x], SeqExpr([BindingBlock([VarBinding(a, op.add(x, z))])], a))})
    monkeypatch.setattr(cli, "_load", lambda path: mod)
    assert main(["opt", "m.py", "--passes", "CanonicalizeBindings"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("relax-mlir opt: error: module is not well formed (1 problem):")
    assert "var 'z' is not defined in this function" in err


def test_a_pass_s_own_type_check_is_one_line_and_any_other_type_error_a_traceback(files, monkeypatch, capsys):
    """A TypeError a pass raises in its own words ("BindSymbolicVars: ...", an option of the wrong kind met while
    running) is the user's; any other TypeError from a pass is a bug in relax-mlir, which keeps its traceback
    (it was reported as "--passes: ...", as if the option were wrong)."""
    from relax_mlir.transform import CanonicalizeBindings

    (files / "sym.py").write_text('@R.function\ndef main(x: R.Tensor(("n",), "float32")):\n    return x\n')
    assert main(["opt", "sym.py", "--passes", "BindSymbolicVars(binding_map={'n': 2.5})"]) == 1
    assert capsys.readouterr().err == ("relax-mlir opt: error: --passes: BindSymbolicVars: 'n' must be bound to an "
                                       "int or a dim, got 2.5\n")

    def broken(self, mod, ctx):
        return None + 1

    monkeypatch.setattr(CanonicalizeBindings, "transform_module", broken)
    with pytest.raises(TypeError, match="unsupported operand"):
        main(["opt", "m.py", "--passes", "CanonicalizeBindings"])


def test_a_missing_c_compiler_is_one_line(files):
    """`export` links with the system's C compiler: without one (none on PATH), a LinkError saying what to
    install, not its traceback. (A child process: no linker is a state of the process.)"""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "CC"}
    env.update(PATH=str(files / "sub"), RELAX_MLIR_CACHE="0")
    done = subprocess.run([sys.executable, "-m", "relax_mlir.cli", "export", "m.py", "-o", "m.so"], env=env,
                          capture_output=True, text=True, cwd=files, timeout=300)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.endswith("relax-mlir export: error: no C compiler driver to link with (set $CC, or install "
                                "cc/gcc/clang)\n")
    assert not (files / "m.so").exists()
