"""Modules the interpreter runs that ``relax_mlir.compile`` refused: compiled results equal the interpreter's (and
NumPy's), and what the interpreter refuses at run time compiled code refuses too."""

from __future__ import annotations

import numpy as np
import pytest

import relax_mlir as rm
from relax_mlir import transform
from relax_mlir.ir import ShapeStructInfo
from relax_mlir.script import from_source

RNG = np.random.default_rng(7)


def rand(*shape):
    return RNG.uniform(-1, 1, size=shape).astype(np.float32)


# --- LiftTransformParams of weights with symbolic sizes ----------------------------------------------------------
PERMUTED = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", "k"), "float32"), w: R.Tensor(("m", "k"), "float32"), b: R.Tensor(("m",), "float32")):
        R.func_attr({"num_input": 1})
        n = T.int64()
        m = T.int64()
        with R.dataflow():
            wt = R.permute_dims(w, [1, 0])
            g = R.sum(wt, axis=[1], keepdims=True)
            bs = R.sum(b)
            gb = R.add(g, bs)
            y = R.matmul(x, gb)
            z = R.broadcast_to(y, R.shape([n, m]))
            R.output(z)
        return z
"""


def test_lifted_weights_of_symbolic_sizes_compile():
    """``m`` is a size of the weights that main still uses (its result is ``(n, m)``) but that no lifted value main
    reads has (``gb`` is ``(k, 1)``): it was passed as ``vars_from_compile_time_params: R.Shape([m])``, which the
    interpreter ran and ``compile`` refused (ExportError: only tensors cross function boundaries). The tensor of
    fewest dimensions that has ``m`` as a dimension, the bias ``b``, now carries it."""
    lifted = transform.LiftTransformParams()(from_source(PERMUTED))
    main, prep = lifted["main"], lifted["main_transform_params"]
    assert [p.name_hint for p in main.params] == ["x", "gb", "b"]
    assert not any(isinstance(s, ShapeStructInfo) for s in [p.struct_info for p in main.params]
                   + list(prep.ret_struct_info.fields))
    vm = rm.VirtualMachine(rm.compile(lifted))
    for n, k, m in ((2, 3, 4), (5, 2, 1)):
        x, w, b = rand(n, k), rand(m, k), rand(m)
        want = np.broadcast_to(x @ (w.sum(0)[:, None] + b.sum()), (n, m))
        transformed = rm.interpret(lifted, "main_transform_params", w, b)
        interpreted = rm.interpret(lifted, "main", x, *transformed)
        compiled = vm["main"](x, *vm["main_transform_params"](w, b))
        np.testing.assert_allclose(interpreted, want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(compiled, interpreted, rtol=1e-5, atol=1e-6)


# --- a local function in a module with a binding annotated narrower than its value ------------------------------
LOCAL_AND_NARROWED = """
@I.ir_module
class Module:
    @R.function
    def outer(x: R.Tensor(ndim=2, dtype="float32"), w: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        @R.function
        def scale(u: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
            v = R.multiply(u, w)
            return v
        y: R.Tensor((2, 3), "float32") = R.add(x, x)
        s = scale(y)
        r = R.sum(s, axis=[0])
        return r

    @R.function
    def inner(x: R.Tensor(ndim=2, dtype="float32"), w: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        @R.function
        def scale(u: R.Tensor(ndim=2, dtype="float32")) -> R.Tensor((2, 3), "float32"):
            v: R.Tensor((2, 3), "float32") = R.multiply(u, w)
            return v
        s = scale(x)
        r = R.sum(s, axis=[0])
        return r
"""


@pytest.mark.parametrize("name, where", [("outer", "outer: binding 'y'"), ("inner", "inner_scale: binding 'v'")])
def test_a_local_function_beside_a_narrower_annotation_compiles(name, where):
    """``y: R.Tensor((2, 3)) = R.add(x, x)`` with ``x`` of any 2-d shape, in the function with the local one or in
    the local one: ``compile`` lifted the local function with the well-formedness check a pass runs after itself,
    which refuses such an annotation (as TVM's ``well_formed``): WellFormedError. The annotation is still checked at
    run time, as the interpreter checks it."""
    mod = from_source(LOCAL_AND_NARROWED)
    assert not rm.ir.well_formed(mod)
    vm = rm.VirtualMachine(rm.compile(mod))
    for x, w in ((rand(2, 3), rand(3)), (rand(2, 3), rand(3))):
        want = ((2 if name == "outer" else 1) * x * w).sum(0)
        interpreted = rm.interpret(mod, name, x, w)
        np.testing.assert_allclose(interpreted, want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(vm[name](x, w), interpreted, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="binding '[yv]': expected 2, got 4"):
        rm.interpret(mod, name, rand(4, 3), rand(3))
    with pytest.raises(ValueError, match=rf"^{where}: declared Tensor\(\(2, 3\), float32\): dimension 0 is 4, "
                                         r"expected 2$"):
        vm[name](rand(4, 3), rand(3))
    np.testing.assert_allclose(vm[name](x, w), want, rtol=1e-5, atol=1e-6)  # the error slot was cleared


def test_a_module_with_a_local_function_is_served_from_the_in_process_cache():
    """The cached executable's ``mod`` has its local functions lifted; the hit compares the module as given, so the
    second compile of an equal module is a hit (it was a miss every time, served from disk at best)."""
    from relax_mlir.backend import build as build_module

    first = rm.compile(from_source(LOCAL_AND_NARROWED))
    hits = build_module.CACHE_STATS["hits"]
    assert rm.compile(from_source(LOCAL_AND_NARROWED)) is first
    assert build_module.CACHE_STATS["hits"] == hits + 1
