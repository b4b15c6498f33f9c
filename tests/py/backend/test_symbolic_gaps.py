"""Symbolic-shape programs that interpreted but did not compile (or inferred a wrong size), each compiled now and
run at two sizes against the interpreter and NumPy, its gradient against finite differences:

- ``layer_norm`` and ``batch_norm`` of a symbolic normalized size against static weights (the decomposition's
  elementwise ops refused ``n`` against 4);
- ``attention`` with a symbolic head size (its default scale ``1 / sqrt(h)`` was a Python float of ``h``);
- ``broadcast_to`` of a symbolic size to a static one that is 1 at run time (compiled code assumed ``n`` was 5).

``squeeze()`` with no axis of a symbolic size keeps its refusal, as TVM's: the rank of the result depends on whether
the size is 1 at run time; with ``axis`` it compiles and checks that the axis is 1. A static ``strided_slice`` bound on
a symbolic axis is assumed in bounds, as TVM's ``assume_inbound`` default, and checked at run time."""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir as rm
from relax_mlir import TensorStructInfo as T
from relax_mlir.backend.signature import ExportError
from relax_mlir.script import from_source
from relax_mlir.testing import finite_difference_gradients
from relax_mlir.transform import Gradient

RNG = np.random.default_rng(0)


def _compiled(mod, name):
    return rm.VirtualMachine(rm.compile(mod, num_threads=1))[name]


def _check_gradient(mod, args, indices, sizes_note):
    """The compiled ``f_adjoint`` (of ``Gradient("f")``): its value the interpreter's ``f``, its gradients the
    central differences of the interpreted ``f`` at ``indices``."""
    adjoint = Gradient("f")(mod)
    value, grads = _compiled(adjoint, "f_adjoint")(*args)
    np.testing.assert_allclose(value, rm.interpret(mod, "f", *args), rtol=1e-12, err_msg=sizes_note)
    for i, fd in zip(indices, finite_difference_gradients(mod, "f", args, indices)):
        np.testing.assert_allclose(grads[i], fd, rtol=1e-6, atol=1e-7, err_msg=f"{sizes_note}, argument {i}")


# -- strided_slice with a static bound on a symbolic axis -----------------------------------------------------------

SLICE_PAST_THE_END = '''
@I.ir_module
class Module:
    @R.function
    def f(x: R.Tensor(("n", 3), "float64")):
        with R.dataflow():
            a = R.strided_slice(x, axes=[0], begin=[0], end=[7], strides=[2])
            last = R.strided_slice(x, axes=[0], begin=[-1], end=[9223372036854775807])
            c = R.add(R.sum(a, axis=[0]), R.sum(last, axis=[0]))
            R.output(c)
        return c
'''


def test_a_static_bound_on_a_symbolic_axis_is_assumed_in_bounds_and_checked():
    """As TVM's ``assume_inbound`` default: ``x[:7:2]`` on ``n`` rows is 4 rows and ``x[-1:]`` one (the last-token
    slice keeps its static size, so what follows it compiles); a call with fewer rows than the bounds need is refused
    naming the binding, where NumPy would clamp (sizes have no ``min`` to write ``(min(n, 7) + 1) // 2``)."""
    mod = from_source(SLICE_PAST_THE_END)
    a, last = (b.var.struct_info for b in mod["f"].body.blocks[0].bindings[:2])
    assert [str(d) for d in a.shape] == ["4", "3"] and [str(d) for d in last.shape] == ["1", "3"]
    f = _compiled(mod, "f")
    for n in (7, 8, 12):
        x = RNG.standard_normal((n, 3))
        np.testing.assert_allclose(f(x), x[:7:2].sum(0) + x[-1:].sum(0), rtol=1e-12)
    with pytest.raises(ValueError, match=r"f: binding 'a': dimension 0 is 3, expected 4"):
        f(RNG.standard_normal((5, 3)))


# -- layer_norm and batch_norm of a symbolic size against static weights ------------------------------------------

NORMS = '''
@I.ir_module
class Module:
    @R.function
    def layer(x: R.Tensor(("b", "n"), "float64"), g: R.Tensor((4,), "float64"), be: R.Tensor((4,), "float64"),
              w: R.Tensor(("b", "n"), "float64")) -> R.Tensor((), "float64"):
        with R.dataflow():
            a = R.nn.layer_norm(x, g, be, axes=[-1])
            c = R.sum(R.multiply(a, w))
            R.output(c)
        return c

    @R.function
    def rms(x: R.Tensor(("b", "n"), "float64"), g: R.Tensor((4,), "float64"), w: R.Tensor(("b", "n"), "float64")):
        with R.dataflow():
            a = R.nn.rms_norm(x, g, axes=[-1])
            c = R.sum(R.multiply(a, w))
            R.output(c)
        return c

    @R.function
    def batch(x: R.Tensor((2, "c", "h"), "float64"), g: R.Tensor((4,), "float64"), be: R.Tensor((4,), "float64"),
              m: R.Tensor((4,), "float64"), v: R.Tensor((4,), "float64"), w: R.Tensor((2, "c", "h"), "float64")):
        with R.dataflow():
            t = R.nn.batch_norm(x, g, be, m, v, axis=1, training=True, momentum=0.25)
            c = R.add(R.sum(R.multiply(t[0], w)), R.sum(R.multiply(t[1], t[2])))
            R.output(c)
        return c
'''


def _renamed(source: str, name: str) -> str:
    return source.replace(f"def {name}(", "def f(")


@pytest.mark.parametrize("batch", [2, 5])
def test_layer_norm_of_a_symbolic_size_against_static_weights(batch):
    mod = from_source(_renamed(NORMS, "layer"))
    args = [RNG.standard_normal((batch, 4)), RNG.standard_normal(4), RNG.standard_normal(4),
            RNG.standard_normal((batch, 4))]
    _check_gradient(mod, args, [0, 1, 2], f"batch {batch}")


def test_rms_norm_of_a_symbolic_size_against_a_static_weight():
    mod = from_source(_renamed(NORMS, "rms"))
    _check_gradient(mod, [RNG.standard_normal((3, 4)), RNG.standard_normal(4), RNG.standard_normal((3, 4))], [0, 1],
                    "batch 3")


def test_norms_of_another_size_than_their_weights_are_reported():
    """The inference assumed the symbolic size equal to the weights' (as TVM): compiled code checks it."""
    layer = _compiled(from_source(_renamed(NORMS, "layer")), "f")
    # the weight's reshape to (n,) compares the counts first (backend/legalize/core.py: reshape)
    with pytest.raises(ValueError, match=r"^f: binding 'a': reshape: dimension 0 of the input has 4 elements, where "
                                         r"the new shape has 5 \(sizes the op's inference assumed equal\)$"):
        layer(RNG.standard_normal((2, 5)), RNG.standard_normal(4), RNG.standard_normal(4), RNG.standard_normal((2, 5)))
    batch = _compiled(from_source(_renamed(NORMS, "batch")), "f")
    with pytest.raises(ValueError, match=r"^f: binding 't': reshape: dimension 0 of the input has 4 elements, where "
                                         r"the new shape has 3 "):
        batch(*(RNG.standard_normal(s) for s in ((2, 3, 2), (4,), (4,), (4,), (4,), (2, 3, 2))))


@pytest.mark.parametrize("h", [3, 6])
def test_batch_norm_of_a_symbolic_channel_count_against_static_statistics(h):
    mod = from_source(_renamed(NORMS, "batch"))
    args = [RNG.standard_normal((2, 4, h)), RNG.standard_normal(4), RNG.standard_normal(4), RNG.standard_normal(4),
            RNG.uniform(0.5, 2, 4), RNG.standard_normal((2, 4, h))]
    _check_gradient(mod, args, [0, 1, 2], f"h = {h}")
    # the forward's three results, the new statistics among them, are the interpreter's
    stats = from_source(NORMS.replace("c = R.add(R.sum(R.multiply(t[0], w)), R.sum(R.multiply(t[1], t[2])))",
                                      "c = t"))
    for got, want in zip(_compiled(stats, "batch")(*args), rm.interpret(stats, "batch", *args)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


# -- attention with a symbolic head size --------------------------------------------------------------------------

ATTENTION = '''
@I.ir_module
class Module:
    @R.function
    def f(q: R.Tensor((1, 3, 2, "h"), "float64"), k: R.Tensor((1, "s", 2, "h"), "float64"),
          v: R.Tensor((1, "s", 2, "h"), "float64"), w: R.Tensor((1, 3, 2, "h"), "float64")):
        with R.dataflow():
            a = R.nn.attention(q, k, v, causal_mask="TopLeft")
            c = R.sum(R.multiply(a, w))
            R.output(c)
        return c
'''


def _numpy_attention(q, k, v):
    q, k, v = (a.transpose(0, 2, 1, 3) for a in (q, k, v))
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1])
    scores = np.where(np.tril(np.ones(scores.shape[-2:], bool)), scores, -np.inf)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    return ((p / p.sum(-1, keepdims=True)) @ v).transpose(0, 2, 1, 3)


@pytest.mark.parametrize("h,s", [(4, 3), (7, 5)])
def test_attention_with_a_symbolic_head_size_scales_by_its_run_time_value(h, s):
    mod = from_source(ATTENTION)
    q, k, v, w = (RNG.standard_normal(shape) for shape in ((1, 3, 2, h), (1, s, 2, h), (1, s, 2, h), (1, 3, 2, h)))
    np.testing.assert_allclose(_compiled(mod, "f")(q, k, v, w), (_numpy_attention(q, k, v) * w).sum(), rtol=1e-12)
    _check_gradient(mod, [q, k, v, w], [0, 1, 2], f"h = {h}")


# -- broadcast_to of a symbolic size that is 1 at run time --------------------------------------------------------

BROADCAST = '''
@I.ir_module
class Module:
    @R.function
    def f(x: R.Tensor(("m", "n", 1), "float64"), w: R.Tensor((3, "m", 5, 2), "float64")):
        with R.dataflow():
            a = R.broadcast_to(x, R.shape([3, "m", 5, 2]))
            c = R.sum(R.multiply(R.multiply(a, a), w))
            R.output(c)
        return c

    @R.function
    def g(x: R.Tensor(("m", "n", 1), "float64")):
        with R.dataflow():
            a = R.broadcast_to(x, R.shape([3, "m", 5, 2]))
            R.output(a)
        return a
'''


@pytest.mark.parametrize("m,n", [(2, 1), (4, 5)])
def test_broadcast_to_of_a_symbolic_size_that_is_1_or_the_target_s(m, n):
    mod = from_source(BROADCAST)
    x = RNG.standard_normal((m, n, 1))
    np.testing.assert_array_equal(_compiled(mod, "g")(x), np.broadcast_to(x, (3, m, 5, 2)))
    _check_gradient(mod, [x, RNG.standard_normal((3, m, 5, 2))], [0, 1], f"m = {m}, n = {n}")


def test_broadcast_to_of_a_symbolic_size_neither_1_nor_the_target_s_is_reported():
    g = _compiled(from_source(BROADCAST), "g")
    with pytest.raises(ValueError, match=r"^g: binding 'a': relax\.broadcast_to: dimension 1 of x is 3, expected 1 "
                                         r"or 5 \(the target shape's dimension 2\)$"):
        g(RNG.standard_normal((2, 3, 1)))


# -- squeeze of a symbolic size --------------------------------------------------------------------------------

SQUEEZE = '''
@I.ir_module
class Module:
    @R.function
    def everything(x: R.Tensor((2, "n"), "float32")):
        with R.dataflow():
            a = R.squeeze(x)
            b = R.sum(a)
            R.output(b)
        return b

    @R.function
    def one_axis(x: R.Tensor((2, "n"), "float32")):
        with R.dataflow():
            a = R.squeeze(x, axis=[1])
            R.output(a)
        return a
'''


def test_squeeze_of_every_size_1_axis_of_a_symbolic_shape_is_refused_as_tvm_refuses_it():
    """TVM infers an unknown rank (whether ``n`` is 1 is known at run time only) and compiles only static 1s
    away; here the rank-less tensor is refused at export, naming the binding. The interpreter squeezes by value."""
    mod = from_source(SQUEEZE)
    assert mod["everything"].body.blocks[0].bindings[0].var.struct_info == T(None, "float32", -1)
    assert rm.interpret(mod, "everything", np.ones((2, 1), np.float32)) == 2
    with pytest.raises(ExportError, match=r"everything: binding 'a': a tensor of unknown rank"):
        rm.compile(mod)


def test_squeeze_of_a_symbolic_axis_checks_that_it_is_1():
    mod = from_source(SQUEEZE.replace(SQUEEZE[SQUEEZE.index("    @R.function\n    def everything"):
                                              SQUEEZE.index("    @R.function\n    def one_axis")], ""))
    f = _compiled(mod, "one_axis")
    x = RNG.standard_normal((2, 1)).astype(np.float32)
    np.testing.assert_array_equal(f(x), x[:, 0])
    with pytest.raises(ValueError, match=r"^one_axis: binding 'a': relax\.squeeze: axis 1 of x has 3 elements, "
                                         r"expected 1 \(a squeezed axis\)$"):
        f(np.ones((2, 3), np.float32))
