"""Static 0-size dims through the lowerings that insert one tensor into another (``tensor.insert_slice``):
MLIR's verifier refuses a static offset into a 0-size dim (``offset 0 is out-of-bounds: 0 >= 0``), so an insert
that writes nothing is the destination itself (``legalize/core.py: writes_nothing``). Values against NumPy and
hand-derived ones (an empty batch contributes nothing: a weight's gradient is zeros). Also: empty results of static
shape, each a buffer of its own (``pipeline.py: _copy_repeated_results``)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import relax_mlir as rm
from relax_mlir import BlockBuilder, TensorStructInfo, Var, op
from relax_mlir.ir.expr import Tuple
from relax_mlir.transform import Gradient

ROOT = Path(__file__).resolve().parents[3]


def _compiled(shapes, call, grad=False):
    """``main(params) = call(*params)`` (or the ``main_adjoint`` of its sum), compiled; with its function name."""
    params = [Var(f"a{i}", TensorStructInfo(s, "float32")) for i, s in enumerate(shapes)]
    bb = BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit(call(*params))
            gv = bb.emit_output(op.sum(out) if grad else out)
        bb.emit_func_output(gv)
    mod = Gradient("main")(bb.get()) if grad else bb.get()
    name = "main_adjoint" if grad else "main"
    return rm.VirtualMachine(rm.compile(mod, num_threads=1))[name]


@pytest.mark.parametrize("shapes,axis", [([(0, 4), (0, 2)], 1), ([(2, 0), (2, 0), (2, 3)], 1), ([(0, 3), (0, 3)], 0)])
def test_concat_of_empty_pieces(shapes, axis):
    run = _compiled(shapes, lambda *xs: op.concat(Tuple(list(xs)), axis=axis))
    arrays = [np.arange(np.prod(s), dtype=np.float32).reshape(s) for s in shapes]
    got = run(*arrays)
    want = np.concatenate(arrays, axis=axis)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_conv2d_transpose_of_an_empty_batch():
    run = _compiled([(0, 2, 5, 5), (2, 3, 3, 3)], lambda x, w: op.nn.conv2d_transpose(x, w, strides=(2, 2)))
    got = run(np.zeros((0, 2, 5, 5), np.float32), np.ones((2, 3, 3, 3), np.float32))
    assert got.shape == (0, 3, 11, 11)  # (5 - 1) * 2 + 3


@pytest.mark.parametrize("x_shape,w_shape,conv", [((0, 2, 5, 5), (3, 2, 3, 3), op.nn.conv2d),
                                                  ((0, 2, 5), (3, 2, 3), op.nn.conv1d)])
def test_convolution_gradient_of_an_empty_batch(x_shape, w_shape, conv):
    """The data gradient is a transposed convolution (its input dilated by an insert) of an empty adjoint."""
    run = _compiled([x_shape, w_shape], conv, grad=True)
    loss, (dx, dw) = run(np.zeros(x_shape, np.float32), np.ones(w_shape, np.float32))
    assert float(loss) == 0.0 and dx.shape == x_shape
    np.testing.assert_array_equal(dw, np.zeros(w_shape, np.float32))



def _in_child(code: str) -> None:
    """Run ``code`` in a Python process of its own (a crash of the compiler kills only it); it prints ``ok``."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=600,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0 and proc.stdout.splitlines()[-1:] == ["ok"], \
        f"exit {proc.returncode}: {proc.stdout[-2000:]}{proc.stderr[-3000:]}"


def test_two_empty_results_compile_and_run():
    """``(x[0:0], exp(x[1:1]))``: both slices fold to one ``tensor.empty`` and the ``exp`` over it writes nothing, so
    both results were one buffer, returned twice, and the lowering to out-parameters crashed the process (SIGSEGV;
    an assertion where a size is symbolic) before each empty result got a buffer of its own
    (``pipeline.py: _copy_repeated_results``). Also with symbolic rows, and softmax beside log_softmax over an empty
    axis (each the empty result). Run in a child."""
    _in_child("""
        import numpy as np, relax_mlir as rm
        from relax_mlir.script import from_source
        mod = from_source('''
        @I.ir_module
        class Module:
            @R.function
            def rows(x: R.Tensor((4, 3), "float32")):
                with R.dataflow():
                    a = R.strided_slice(x, axes=[0], begin=[0], end=[0])
                    b = R.exp(R.strided_slice(x, axes=[0], begin=[1], end=[1]))
                    R.output(a, b)
                return (a, b)

            @R.function
            def columns(x: R.Tensor(("m", 3), "float32")):
                with R.dataflow():
                    a = R.strided_slice(x, axes=[1], begin=[0], end=[0])
                    b = R.exp(R.strided_slice(x, axes=[1], begin=[1], end=[1]))
                    R.output(a, b)
                return (a, b)

            @R.function
            def softmaxes(x: R.Tensor(("m", 0), "float32")):
                with R.dataflow():
                    a = R.nn.softmax(x)
                    b = R.nn.log_softmax(x)
                    R.output(a, b)
                return (a, b)
        ''')
        vm = rm.VirtualMachine(rm.compile(mod, num_threads=1))
        for name, x in [("rows", np.arange(12, dtype=np.float32).reshape(4, 3)),
                        ("columns", np.ones((5, 3), np.float32)), ("softmaxes", np.ones((5, 0), np.float32))]:
            got, want = vm[name](x), rm.interpret(mod, name, x)
            assert [(g.shape, g.dtype) for g in got] == [(w.shape, w.dtype) for w in want], name
            assert all(g.size == 0 and g.dtype == np.float32 for g in got), name
        print("ok")
    """)


def test_float64_attention_gradient_with_an_empty_key_length():
    """The gradient of ``nn.attention`` with no keys: its empty key, value and bias gradients were one buffer
    returned several times, as above (SIGSEGV). Values against the interpreter: the output is zeros whatever the
    query, so the loss and the query's gradient are zeros. Run in a child."""
    _in_child("""
        import numpy as np, relax_mlir as rm
        from relax_mlir import BlockBuilder, TensorStructInfo, Var, op
        from relax_mlir.transform import Gradient
        shapes = [(1, 3, 2, 4), (1, 0, 2, 4), (1, 0, 2, 4), (1, 2, 3, 0)]
        params = [Var(f"a{i}", TensorStructInfo(s, "float64")) for i, s in enumerate(shapes)]
        bb = BlockBuilder()
        with bb.function("main", params):
            with bb.dataflow():
                out = bb.emit(op.nn.attention(*params, scale=0.5))
                gv = bb.emit_output(op.sum(out))
            bb.emit_func_output(gv)
        mod = Gradient("main")(bb.get())
        args = [np.random.default_rng(0).standard_normal(s) for s in shapes]
        loss, grads = rm.VirtualMachine(rm.compile(mod, num_threads=1))["main_adjoint"](*args)
        want_loss, want_grads = rm.interpret(mod, "main_adjoint", *args)
        assert float(loss) == float(want_loss) == 0.0
        for got, want, shape in zip(grads, want_grads, shapes):
            assert got.shape == want.shape == shape and got.dtype == np.float64
            np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(grads[0], np.zeros(shapes[0]))
        print("ok")
    """)
