"""``_files.write_atomically``, which every writer uses (checkpoints, exported libraries, the compile cache,
``relax-mlir import``): a symbolic link is followed, not replaced; a device, FIFO or socket is refused, never
replaced by a regular file (as root, ``relax-mlir export -o /dev/full`` replaced the device node). The tests use a
FIFO of their own for every non-regular file: a test run without the fix must not replace a real device."""

from __future__ import annotations

import errno
import os
import subprocess
import sys

import pytest

from relax_mlir._files import write_atomically


def _write(data: bytes):
    return lambda f: f.write(data)


def test_a_link_is_followed_and_stays_a_link(tmp_path):
    target = tmp_path / "target.bin"
    target.write_bytes(b"old")
    link = tmp_path / "link.bin"
    link.symlink_to(target.name)  # relative, as `ln -s target.bin link.bin`
    write_atomically(str(link), _write(b"new"), "save")
    assert link.is_symlink() and os.readlink(link) == "target.bin"
    assert target.read_bytes() == b"new"


def test_a_dangling_link_creates_the_file_it_names(tmp_path):
    link = tmp_path / "link.bin"
    link.symlink_to(tmp_path / "later.bin")
    write_atomically(str(link), _write(b"x"), "save")
    assert link.is_symlink() and (tmp_path / "later.bin").read_bytes() == b"x"


def test_a_fifo_is_refused_and_left_in_place(tmp_path):
    fifo = tmp_path / "pipe.so"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match=r"export: .*pipe.so is not a regular file \(a device, FIFO or socket\); "
                                      r"expected a library path"):
        write_atomically(str(fifo), _write(b"x"), "export", "a library path")
    assert fifo.is_fifo()
    assert not [n for n in os.listdir(tmp_path) if n != "pipe.so"]  # no temporary file left behind


def test_the_command_line_refuses_a_fifo_in_one_line(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("from relax_mlir.script import I, R\n\n@I.ir_module\nclass Module:\n    @R.function\n"
                      "    def main(x: R.Tensor((2,), \"float32\")):\n        return x\n")
    os.mkfifo(tmp_path / "out.so")
    done = subprocess.run([sys.executable, "-m", "relax_mlir.cli", "export", str(module), "-o",
                           str(tmp_path / "out.so")], capture_output=True, text=True)
    assert done.returncode != 0
    # refused before the module is compiled, as an unwritable directory is
    assert "out.so: is not a regular file" in done.stderr and "Traceback" not in done.stderr
    assert (tmp_path / "out.so").is_fifo()


def test_a_temporary_file_that_cannot_be_made_is_reported_under_the_target_path(tmp_path):
    """The error named the hidden temporary file (``.out.so.tmp-6i_vmvuo``), a name the caller never gave. A file
    limit of 0 makes creating it fail for real, as root too (root ignores a directory's mode)."""
    resource = pytest.importorskip("resource")
    target = tmp_path / "out.so"
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (0, hard))  # no new file descriptor: mkstemp fails (EMFILE)
    try:
        with pytest.raises(OSError) as info:
            write_atomically(str(target), _write(b"x"), "export_library")
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    message = str(info.value)
    assert f"export_library: {target}: cannot create a file in {tmp_path}" in message, message
    assert ".tmp-" not in message and info.value.errno == errno.EMFILE
    assert not os.listdir(tmp_path)


def _deny_writing(monkeypatch, directory) -> None:
    """``os.access`` says ``directory`` is not writable (as root, whom a directory's mode does not stop)."""
    access = os.access

    def fake(path, mode, *args, **kwargs):
        if mode & os.W_OK and os.path.abspath(path) == str(directory):
            return False
        return access(path, mode, *args, **kwargs)

    monkeypatch.setattr(os, "access", fake)


def test_the_command_line_refuses_an_unwritable_directory_before_any_work(tmp_path, monkeypatch, capsys):
    """export compiled the whole module, then failed naming a temporary file; import -o OK --params RO wrote -o,
    then failed. Every output path is checked first, as train's --save is."""
    import relax_mlir
    from relax_mlir.cli import main

    module = tmp_path / "m.py"
    module.write_text('@R.function\ndef main(x: R.Tensor((2,), "float32")):\n    return R.add(x, x)\n')
    readonly = tmp_path / "ro"
    readonly.mkdir()
    _deny_writing(monkeypatch, readonly)

    def compile_not_expected(*args, **kwargs):
        raise AssertionError("compiled before the output path was checked")

    monkeypatch.setattr(relax_mlir, "compile", compile_not_expected)
    assert main(["export", str(module), "-o", str(readonly / "x.so")]) == 1
    err = capsys.readouterr().err
    assert f"-o {readonly / 'x.so'}: the directory {readonly} is not writable" in err, err

    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    x, y = (helper.make_tensor_value_info(name, TensorProto.FLOAT, [2, 3]) for name in "xy")
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "relu.onnx"))
    out = tmp_path / "out.py"
    for args, option, path in [(["-o", str(readonly / "x.py")], "-o", readonly / "x.py"),
                               (["-o", str(out), "--params", str(readonly / "p.npz")], "--params", readonly / "p.npz")]:
        assert main(["import", str(tmp_path / "relu.onnx"), *args]) == 1
        err = capsys.readouterr().err
        assert f"{option} {path}: the directory {readonly} is not writable" in err, err
        assert not out.exists() and not os.listdir(readonly)
