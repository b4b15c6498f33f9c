"""``_files.write_atomically``, which every writer uses (checkpoints, exported libraries, the compile cache,
``relax-mlir import``): a symbolic link is followed, not replaced; a device, FIFO or socket is refused, never
replaced by a regular file (as root, ``relax-mlir export -o /dev/full`` replaced the device node). The tests use a
FIFO of their own for every non-regular file: a test run without the fix must not replace a real device."""

from __future__ import annotations

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
    assert "out.so is not a regular file" in done.stderr and "Traceback" not in done.stderr
    assert (tmp_path / "out.so").is_fifo()
