"""An op that reads its input backwards (a transposed convolution's kernel flip, ``-d3 + 2``) is never tiled by the
schedules: MLIR's linalg tiling asserts on a negative coefficient and the assertion aborted the process (SIGABRT) as
soon as the flip was large enough to be split across threads (128x128x3x3: a U-Net's upsampling, the input gradient
of a 96-channel convolution). The compile runs in a child process, so that an abort fails this test alone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

CHILD = '''
import numpy as np, relax_mlir
from relax_mlir.script import from_source
from relax_mlir.backend.schedule.common import reads_backwards

mod = from_source("""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 128, 4, 4), "float32"), w: R.Tensor((128, 128, 3, 3), "float32")):
        y = R.nn.conv2d_transpose(x, w, strides=[2, 2], padding=[1, 1, 1, 1], output_padding=[1, 1])
        return y
""")
ex = relax_mlir.compile(mod, num_threads=2)
assert "-d3 + 2" in ex.linalg_text or "-d2 + 2" in ex.linalg_text, "no kernel flip: the test no longer tests it"
rng = np.random.default_rng(0)
x, w = rng.standard_normal((2, 128, 4, 4)).astype("float32"), rng.standard_normal((128, 128, 3, 3)).astype("float32")
got = relax_mlir.VirtualMachine(ex)["main"](x, w)
np.testing.assert_allclose(got, relax_mlir.interpret(mod, "main", x, w), rtol=1e-4, atol=1e-4)
print("ok")
'''


def test_a_large_kernel_flip_compiles_on_two_threads_without_aborting():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", \
        f"exit {proc.returncode}:\n{proc.stderr[-3000:]}"


def test_maps_with_a_negative_coefficient_are_recognized():
    from mlir import ir

    from relax_mlir.backend.schedule.common import _NEGATIVE_COEFFICIENT

    with ir.Context():
        for text, backwards in [("(d0, d1, d2, d3) -> (d1, d0, -d2 + 2, -d3 + 2)", True),
                                ("(d0, d1) -> (d0 - d1)", True), ("(d0, d1) -> (d0, d1 * -2 + 3)", True),
                                ("(d0, d1) -> (d0 * 2, d1 - 1)", False), ("(d0, d1) -> (d1, d0)", False)]:
            printed = str(ir.AffineMap.parse(text) if hasattr(ir.AffineMap, "parse") else
                          ir.AffineMapAttr(ir.Attribute.parse(f"affine_map<{text}>")).value)
            assert bool(_NEGATIVE_COEFFICIENT.search(printed.split("->", 1)[1])) == backwards, printed
