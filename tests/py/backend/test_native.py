"""Native compilation (``native.py``) and kernel outlining (``outline.py``): the code is split over parts compiled
in threads and linked into one library, and must compute exactly what the interpreter says, checks included."""

from __future__ import annotations

import os

import numpy as np
import pytest

import relax_mlir as rm
from relax_mlir.backend import build as build_module
from relax_mlir.backend import native
from relax_mlir.backend.error_slot import ERROR_ADDRESS_FN
from relax_mlir.interpreter import interpret
from relax_mlir.script import from_source

MODULE = """
@I.ir_module
class Module:
    @R.function
    def gather(table: R.Tensor((6, 4), "float32"), idx: R.Tensor((3,), "int64")):
        y = R.take(table, idx, axis=0)
        return y

    @R.function
    def dense(x: R.Tensor((8, 16), "float32"), w: R.Tensor((16, 32), "float32")):
        with R.dataflow():
            y = R.matmul(x, w)
            z = R.nn.relu(y)
            s = R.sum(z, axis=[1])
            R.output(s)
        return s

    @R.function
    def pick(v: R.Tensor((5,), "float32"), idx: R.Tensor((2,), "int64")):
        with R.dataflow():
            e = R.exp(v)
            t = R.take(e, idx, axis=0)
            R.output(t)
        return t
"""

RNG = np.random.default_rng(0)
TABLE = RNG.standard_normal((6, 4)).astype("float32")
X, W = RNG.standard_normal((8, 16)).astype("float32"), RNG.standard_normal((16, 32)).astype("float32")
V = RNG.standard_normal(5).astype("float32")


@pytest.fixture
def fresh(monkeypatch):
    """No in-process or on-disk cache: every compile below compiles."""
    monkeypatch.setenv("RELAX_MLIR_CACHE", "0")
    build_module.clear_cache()
    yield monkeypatch
    build_module.clear_cache()


def _compile(monkeypatch, native_on: bool, threads: int = 2):
    monkeypatch.setenv("RELAX_MLIR_NATIVE", "1" if native_on else "0")
    monkeypatch.setenv("RELAX_MLIR_COMPILE_THREADS", str(threads))
    build_module.clear_cache()
    return rm.compile(from_source(MODULE))


def _run_all(ex):
    vm = rm.VirtualMachine(ex)
    idx = np.array([5, 0, 2], "int64")
    return [np.asarray(vm["gather"](TABLE, idx)), np.asarray(vm["dense"](X, W)),
            np.asarray(vm["pick"](V, np.array([4, 1], "int64")))]


def test_native_parts_compute_what_the_interpreter_and_the_engine_do(fresh):
    mod = from_source(MODULE)
    want = [interpret(mod, "gather", TABLE, np.array([5, 0, 2], "int64")),
            interpret(mod, "dense", X, W), interpret(mod, "pick", V, np.array([4, 1], "int64"))]
    by_native = _compile(fresh, True, threads=3)
    engine = by_native.compiled.engine
    assert isinstance(engine, native.NativeEngine) and len(engine.objects) == 3  # three functions, three parts
    by_engine = _compile(fresh, False)
    assert not isinstance(by_engine.compiled.engine, native.NativeEngine)
    for got_native, got_engine, expected in zip(_run_all(by_native), _run_all(by_engine), want):
        # float32 sums of 16 products, reassociated by the vectorized reduction: a few ulp
        np.testing.assert_allclose(got_native, np.asarray(expected), rtol=2e-6, atol=1e-6)
        np.testing.assert_allclose(got_native, got_engine, rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_a_runtime_check_in_any_part_raises_and_clears(fresh, threads):
    vm = rm.VirtualMachine(_compile(fresh, True, threads))
    for name, good, bad in [("gather", (TABLE, np.array([1, 2, 3], "int64")), (TABLE, np.array([1, 6, 0], "int64"))),
                            ("pick", (V, np.array([0, 4], "int64")), (V, np.array([-9, 0], "int64")))]:
        with pytest.raises(IndexError, match="index"):
            vm[name](*bad)
        vm[name](*good)  # the slot was cleared: the next call succeeds
    np.testing.assert_allclose(np.asarray(vm["gather"](TABLE, np.array([1, 2, 3], "int64"))), TABLE[[1, 2, 3]])


def test_partition_balances_and_keeps_the_error_accessor_in_part_zero(fresh):
    llvm = rm.backend.build.lower_to(from_source(MODULE), "llvm")
    groups = native.partition(llvm, 2)
    names = [n for g in groups for n in g]
    assert ERROR_ADDRESS_FN in groups[0] and len(names) == len(set(names))
    assert {"gather", "dense", "pick"} <= set(names)
    assert any(n.startswith("relax_mlir_kernel_dense_") for n in names)  # kernels are parts' units too
    assert len(groups) == 2
    sizes = {native._name(op.operation): native._size(op.operation) + native.FUNCTION_COST_OPS
             for op in llvm.body.operations if native._is_definition(op.operation)}
    loads = [sum(sizes[n] for n in g) for g in groups]
    assert abs(loads[0] - loads[1]) <= max(sizes[n] for n in names)  # greedy: within one function of even
    (single,) = native.partition(llvm, 1)
    assert set(single) == set(names)


def test_a_function_is_sized_by_every_op_it_holds_unless_its_own_blocks_hold_enough():
    """``_size`` counts a function's own blocks without a walk; nested regions (an OpenMP kernel's few ops around
    an ``omp.parallel`` holding its loops) are walked only when the own blocks hold few ops."""
    from mlir import ir

    def func(name: str, top: int, nested: int) -> str:
        inner = "\n".join(f"%n{i} = llvm.add %c, %c : i64" for i in range(nested))
        outer = "\n".join(f"%t{i} = llvm.add %c, %c : i64" for i in range(top))
        return (f"llvm.func @{name}() {{\n%c = llvm.mlir.constant(1 : i64) : i64\n{outer}\n"
                f'"test.region"() ({{\n{inner}\n"test.end"() : () -> ()\n}}) : () -> ()\nllvm.return\n}}')

    few = native.SIZE_BY_TOP_LEVEL_FROM // 2
    with ir.Context() as ctx, ir.Location.unknown():
        ctx.allow_unregistered_dialects = True
        mod = ir.Module.parse(func("omp_like", 3, 500) + "\n" + func("flat", few * 3, 500))
        sizes = {native._name(op.operation): native._size(op.operation) for op in mod.body.operations}
    # the func, the constant, 3 adds, the region op, 500 adds and its terminator, the return
    assert sizes["omp_like"] == 1 + 1 + 3 + 1 + 500 + 1 + 1
    assert sizes["flat"] == 1 + few * 3 + 1 + 1  # its own blocks' ops only (the nested 501 not walked)


def test_library_of_a_native_compile_loads_and_runs(fresh, tmp_path):
    ex = _compile(fresh, True)
    path = tmp_path / "m.so"
    ex.export_library(str(path))
    from relax_mlir.runtime import load_module

    lib = load_module(str(path))
    np.testing.assert_allclose(np.asarray(lib["dense"](X, W)), _run_all(ex)[1], rtol=0, atol=0)


def test_compile_threads_must_be_a_positive_integer(monkeypatch):
    monkeypatch.setenv("RELAX_MLIR_COMPILE_THREADS", "0")
    with pytest.raises(ValueError, match="RELAX_MLIR_COMPILE_THREADS must be a positive integer"):
        native.compile_threads()
    monkeypatch.setenv("RELAX_MLIR_COMPILE_THREADS", "4")
    assert native.compile_threads() == 4


def test_kernels_take_buffers_not_constants():
    """A kernel's parameters are the memref descriptors it reads and writes (5 fields each at rank 1): the loop
    bounds are constants inside it, so LLVM still sees its trip counts."""
    text = rm.to_mlir(from_source("""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 8), "float32")) -> R.Tensor((4, 8), "float32"):
        y = R.exp(x)
        return y
"""), "llvm")
    header = next(line for line in text.splitlines() if "llvm.func @relax_mlir_kernel_main_0(" in line)
    params = header.split("(", 1)[1].split(")")[0].split(", ")
    assert len(params) == 10 and sum("!llvm.ptr" in p for p in params) == 4, header
    assert "no_inline" in header


def test_compile_objects_needs_no_ambient_context():
    """Called on a module outside any ``with Context()``: ELF objects, one per part."""
    llvm = rm.backend.build.lower_to(from_source(MODULE), "llvm")
    objects = native.compile_objects(llvm, ["gather", "dense", "pick"], threads=2)
    assert len(objects) == 2 and all(o[:4] == b"\x7fELF" for o in objects)


def test_a_native_failure_falls_back_to_the_engine_with_one_warning(fresh):
    fresh.setenv("RELAX_MLIR_NATIVE", "1")

    def broken(*args, **kwargs):
        raise native.NativeError("simulated: LLVM's C API is missing")

    fresh.setattr(native, "compile_objects", broken)
    fresh.setattr(native, "_WARNED", False)
    with pytest.warns(RuntimeWarning, match="native compilation unavailable .simulated"):
        ex = rm.compile(from_source(MODULE))
    assert not isinstance(ex.compiled.engine, native.NativeEngine)
    np.testing.assert_allclose(np.asarray(rm.VirtualMachine(ex)["dense"](X, W)),
                               np.asarray(interpret(from_source(MODULE), "dense", X, W)), rtol=2e-6, atol=1e-6)


def test_the_outline_option_is_part_of_the_disk_cache_key(monkeypatch, tmp_path):
    from relax_mlir.backend.pipeline import PipelineOptions

    monkeypatch.setenv("RELAX_MLIR_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("RELAX_MLIR_CACHE", raising=False)
    mod = from_source(MODULE)
    keys = {build_module._disk_key(mod, PipelineOptions(outline=flag)) for flag in (True, False)}
    assert len(keys) == 2 and None not in keys


def test_a_public_function_is_compiled_inside_its_wrapper(fresh, tmp_path):
    """A public function of hundreds of arguments (five a memref: 60 results and a parameter, 305) is internal and
    inlined into its packed wrapper ``_mlir_<name>``, so LLVM never compiles a call passing them all (a function
    returning 400 tensors took 2005: 32 s of instruction selection); a small one stays a function of its own."""
    assert native.INLINE_FROM_ARGUMENTS < 305
    import ctypes

    from relax_mlir import BlockBuilder, TensorStructInfo, Var, op
    from relax_mlir.ir import Tuple

    x = Var("x", TensorStructInfo((4,), "float32"))
    bb = BlockBuilder()
    with bb.function("many", [x]):
        with bb.dataflow():
            outs = [bb.emit(op.multiply(x, rm.const(np.float32(i)))) for i in range(60)]
            out = bb.emit_output(Tuple(outs))
        bb.emit_func_output(out)
    fresh.setenv("RELAX_MLIR_NATIVE", "1")
    ex = rm.compile(bb.get())
    assert isinstance(ex.compiled.engine, native.NativeEngine)
    path = tmp_path / "lib.so"
    path.write_bytes(ex.compiled.engine.elf)
    lib = ctypes.CDLL(str(path))
    assert hasattr(lib, "_mlir_many") and not hasattr(lib, "many")
    values = np.arange(4, dtype=np.float32)
    got = rm.VirtualMachine(ex)["many"](values)
    assert len(got) == 60
    for i, g in enumerate(got):
        np.testing.assert_array_equal(g, values * np.float32(i))


def test_a_link_gold_fails_is_done_again_with_the_default_linker(fresh, tmp_path):
    """GNU gold links when installed (faster); where it fails, the driver's default linker links the same library
    and gold is not tried again in this process."""
    from relax_mlir.backend import library

    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "ld.gold").write_text("#!/bin/sh\necho 'ld.gold: simulated failure' >&2\nexit 1\n")
    (fake / "ld.gold").chmod(0o755)
    fresh.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")
    fresh.setattr(library, "_USE_GOLD", [True])
    fresh.setenv("RELAX_MLIR_NATIVE", "1")
    ex = rm.compile(from_source(MODULE))
    assert isinstance(ex.compiled.engine, native.NativeEngine) and library._USE_GOLD == [False]
    np.testing.assert_allclose(np.asarray(rm.VirtualMachine(ex)["dense"](X, W)),
                               np.asarray(interpret(from_source(MODULE), "dense", X, W)), rtol=2e-6, atol=1e-6)
