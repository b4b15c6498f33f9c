"""Every allocation of compiled code is checked (``backend/alloc_checks.py``): a ``malloc`` that returns NULL is a
``MemoryError`` after the call, never a write through NULL (a segfault). What runs compiled code runs in a process of
its own, with a timeout: a crash fails the test instead of killing pytest.

The byte counts below are the lowering's: a buffer of n floats is ``malloc(4 n + 64)`` (64 bytes to align it)."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import relax_mlir as rm
from relax_mlir.backend.error_slot import MEMORY_CHECK_PREFIX, take_error
from relax_mlir.backend.library import find_linker
from relax_mlir.backend.options import PipelineOptions
from relax_mlir.script import from_source

ROOT = Path(__file__).resolve().parents[3]

#: softmax over 2**34 rows (a static count) of no columns: the input and the output hold 0 bytes, the row maxima and
#: sums 64 GiB. (With a symbolic row count, an empty row skips them: ``test_empty_symbolic.py``.) ``sm_any`` is the
#: same softmax of any shape, for the calls after the failure.
ROWS = 2**34
SOFTMAX = f"""
@I.ir_module
class M:
    @R.function
    def sm(x: R.Tensor(({ROWS}, "m"), "float32")) -> R.Tensor(({ROWS}, "m"), "float32"):
        with R.dataflow():
            z = R.nn.softmax(x, axis=-1)
            R.output(z)
        return z

    @R.function
    def sm_any(x: R.Tensor(("n", "m"), "float32")) -> R.Tensor(("n", "m"), "float32"):
        with R.dataflow():
            z = R.nn.softmax(x, axis=-1)
            R.output(z)
        return z
"""
TOO_MUCH = f"sm: binding 'z': unable to allocate 64.0 GiB ({4 * ROWS + 64} bytes) in compiled code: out of memory"
#: the address space of a child (what ``ulimit -v`` sets): a 64 GiB malloc fails whatever the machine's memory
CHILD_ADDRESS_SPACE = 8 * 2**30


def _no_core_dump() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # (a child that aborts writes no core file)


def _limit_address_space() -> None:
    _no_core_dump()
    resource.setrlimit(resource.RLIMIT_AS, (CHILD_ADDRESS_SPACE, CHILD_ADDRESS_SPACE))


def run_child(code: str, *args: str, env: dict | None = None, limit: bool = True) -> subprocess.CompletedProcess:
    """Run ``code`` in a Python process of its own (``limit``: of 8 GiB of address space), with a timeout."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=600, preexec_fn=_limit_address_space if limit else _no_core_dump,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", **(env or {})})


# What a child does with the softmax functions of ``module``: the call that cannot allocate, then calls that can.
SOFTMAX_CALLS = f"""
import numpy as np
f, g = module["sm"], module["sm_any"]
try:
    f(np.zeros(({ROWS}, 0), np.float32))
    print("returned")
except MemoryError as err:
    print("MemoryError:", err)
print("empty:", g(np.zeros((1024, 0), np.float32)).shape)
x = np.array([[1, 2, 3], [0, 0, 0], [-1, 5, 2], [9, 9, -9]], np.float32)
print("values:", g(x).tolist())
"""


def _check_softmax_child(proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-3000:]}"
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"MemoryError: {TOO_MUCH}"), lines
    assert lines[1] == "empty: (1024, 0)"  # the slot was cleared: the next calls run
    x = np.array([[1, 2, 3], [0, 0, 0], [-1, 5, 2], [9, 9, -9]], np.float32)
    want = np.exp(x - x.max(axis=1, keepdims=True))
    want /= want.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(json.loads(lines[2].split(": ", 1)[1]), want, rtol=1e-6)


@pytest.mark.parametrize("checks, native", [(True, "1"), (False, "1"), (True, "0")])
def test_a_temporary_too_large_for_malloc_is_a_memory_error(checks, native, tmp_path):
    """Softmax over 2**34 rows of no columns: the pre-call estimate sees only tensors of 0 bytes; the compiled code's
    malloc of the row maxima returns NULL (it used to be written through: SIGSEGV). Also with ``checks=False`` and
    with MLIR's ExecutionEngine (``RELAX_MLIR_NATIVE=0``)."""
    proc = run_child(textwrap.dedent(f"""
        import relax_mlir as rm
        from relax_mlir.script import from_source
        module = rm.VirtualMachine(rm.compile(from_source({SOFTMAX!r}), checks={checks}))
    """) + SOFTMAX_CALLS, env={"RELAX_MLIR_CACHE_DIR": str(tmp_path), "RELAX_MLIR_NATIVE": native})
    _check_softmax_child(proc)


OUTER_SUM = """
@I.ir_module
class M:
    @R.function
    def f(x: R.Tensor(("n",), "float32"), y: R.Tensor(("m",), "float32")) -> R.Tensor(("m",), "float32"):
        with R.dataflow():
            a = R.reshape(x, R.shape(["n", 1]))
            z = R.multiply(a, y)
            t = R.permute_dims(z)
            s = R.sum(t, axis=[1])
            R.output(s)
        return s
"""


def test_a_tensor_that_fits_the_limit_but_not_the_address_space_left_is_a_memory_error(tmp_path):
    """Under ``ulimit -v`` the estimate before the call compares each tensor with the limit, not with what the
    process has left: an outer product of 1.5 GiB passes it with 1 GiB of address space left, and its malloc fails
    (it used to segfault). A small call runs afterwards."""
    proc = run_child(textwrap.dedent(f"""
        import resource, sys
        import numpy as np, relax_mlir as rm
        from relax_mlir.backend.signature import memory_limit
        from relax_mlir.script import from_source
        f = rm.VirtualMachine(rm.compile(from_source({OUTER_SUM!r})))["f"]
        f(np.ones(3, np.float32), np.ones(4, np.float32))
        used = int(next(l for l in open("/proc/self/status") if l.startswith("VmSize:")).split()[1]) * 1024
        limit = used + 2**30
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        n = 20066  # a 1.5 GiB product: under the limit and under memory and swap, over what is left
        if n * n * 4 >= memory_limit():
            sys.exit("skip: less than 1.5 GiB of memory and swap")
        try:
            f(np.ones(n, np.float32), np.ones(n, np.float32))
            print("returned")
        except MemoryError as err:
            print("MemoryError:", err)
        print(f(np.ones(300, np.float32), np.arange(4, dtype=np.float32)).tolist())
    """), env={"RELAX_MLIR_CACHE_DIR": str(tmp_path)}, limit=False)
    if "skip:" in proc.stderr:
        pytest.skip(proc.stderr.strip())
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-3000:]}"
    lines = proc.stdout.splitlines()
    assert lines[0] == (f"MemoryError: f: binding 'z': unable to allocate 1.5 GiB ({20066**2 * 4 + 64} bytes) in "
                        "compiled code: out of memory; the call's results are discarded"), lines
    assert lines[1] == str([0.0, 300.0, 600.0, 900.0])  # s[j] = sum over i of x[i] y[j]


def test_an_exported_library_raises_the_same_memory_error(tmp_path):
    rm.compile(from_source(SOFTMAX)).export_library(tmp_path / "sm.so")
    proc = run_child(textwrap.dedent("""
        import sys
        from relax_mlir.runtime import load_module
        module = load_module(sys.argv[1])
    """) + SOFTMAX_CALLS, str(tmp_path / "sm.so"))
    _check_softmax_child(proc)
    assert "mlir" not in proc.stderr


def _training_module(backbone):
    from relax_mlir.ir.struct_info import TensorStructInfo
    from relax_mlir.training import SGD, CrossEntropyLoss, SetupTrainer

    batch = backbone["backbone"].params[0].struct_info.shape[0]
    setup = SetupTrainer(CrossEntropyLoss(reduction="sum"), SGD(0.01),
                         [TensorStructInfo((batch, 10), "float32"), TensorStructInfo((batch,), "int64")])
    return setup(backbone)


@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_every_malloc_of_a_training_step_is_checked(model):
    """The tutorial MLP's training module, and a CNN's of a symbolic batch (buffers freed by other kernels, the
    deallocation helper): one check per malloc (none is missed: the walk skips only the functions that neither
    allocate, free nor call), the message table names the bindings, and checks=False keeps them (memory safety is
    not optional)."""
    from relax_mlir.models import cnn, mlp

    train = _training_module(mlp(64, (64, 128, 128, 10)) if model == "mlp" else cnn("n", (1, 8, 8), (8, 16), 10))
    for checks in (True, False):
        text = rm.to_mlir(train, "llvm", options=PipelineOptions(checks=checks))
        mallocs = text.count("llvm.call @malloc(")
        assert mallocs >= 15
        assert text.count("llvm.call @relax_mlir_allocation_failed(") == mallocs
        assert "llvm.mlir.global private @relax_mlir_error(" in text
        assert "llvm.func @relax_mlir_error_address() -> i64" in text
        assert f"\"{MEMORY_CHECK_PREFIX}update_params: binding '" in text


def test_a_module_that_allocates_nothing_is_left_alone():
    mod = from_source("""
@I.ir_module
class M:
    @R.function
    def add(x: R.Tensor((4,), "float32"), y: R.Tensor((4,), "float32")):
        z = R.add(x, y)
        return z
""")
    text = rm.to_mlir(mod, "llvm", options=PipelineOptions(checks=False))
    assert "malloc" not in text and "relax_mlir_error" not in text and "relax_mlir.checks =" not in text


def test_the_slot_says_memory_error_with_the_size():
    slot = [2, 3 * 2**30 + 64, 0, 0]
    messages = ["take: binding 'a': index {value}", f"{MEMORY_CHECK_PREFIX}main: binding 'lv3'", MEMORY_CHECK_PREFIX]
    err = take_error(slot, messages, "main")
    assert isinstance(err, MemoryError) and slot == [0, 0, 0, 0]
    assert str(err) == (f"main: binding 'lv3': unable to allocate 3.0 GiB ({3 * 2**30 + 64} bytes) in compiled code: "
                        "out of memory; the call's results are discarded")
    err = take_error([3, 100, 0, 0], messages, "step")  # no location: the function called
    assert str(err).startswith("step: unable to allocate 100 bytes in compiled code")
    err = take_error([2, 5 << 20, 0, 0], messages, "other")  # a binding inlined from another function
    assert str(err).startswith("other: main: binding 'lv3': unable to allocate 5.0 MiB (5242880 bytes)")
    assert isinstance(take_error([1, 7, 0, 0], messages, "main"), IndexError)


# --- every allocation failing in turn ---------------------------------------------------------------------------
#: ``malloc`` and ``free`` for ``LD_PRELOAD``: armed around one native call, the ``fail_at``-th allocation of a nonzero
#: size made by code in [lo, hi) (the compiled library's text) returns NULL, and those made and not freed are counted.
FAILMALLOC_C = r"""
#include <stddef.h>
#include <stdint.h>
extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
#define LIVE 4096
static volatile int armed;
static long fail_at, seen;
static uintptr_t lo, hi;
static void *live[LIVE];
static char lock;
static void acquire(void) { while (__atomic_test_and_set(&lock, __ATOMIC_ACQUIRE)) {} }
static void release(void) { __atomic_clear(&lock, __ATOMIC_RELEASE); }
void failmalloc_arm(long k, uintptr_t from, uintptr_t to) {
  acquire(); fail_at = k; seen = 0; lo = from; hi = to;
  for (int i = 0; i < LIVE; ++i) live[i] = 0;
  armed = 1; release();
}
long failmalloc_disarm(void) {
  acquire(); armed = 0; long n = 0;
  for (int i = 0; i < LIVE; ++i) n += live[i] != 0;
  release(); return n;
}
long failmalloc_seen(void) { return seen; }
void *malloc(size_t size) {
  uintptr_t caller = (uintptr_t)__builtin_return_address(0);
  if (!armed || !size || caller < lo || caller >= hi) return __libc_malloc(size);  /* (NULL is fine for 0) */
  acquire();
  void *p = ++seen == fail_at ? NULL : __libc_malloc(size);
  for (int i = 0; p && i < LIVE; ++i) if (!live[i]) { live[i] = p; break; }
  release();
  return p;
}
void free(void *p) {
  if (armed && p) {
    acquire();
    for (int i = 0; i < LIVE; ++i) if (live[i] == p) { live[i] = 0; break; }
    release();
  }
  __libc_free(p);
}
"""

# Builds the function of argv[2], calls it once normally, then once with each of its allocations failing, then
# normally again; prints one JSON line per call.
FAIL_EACH = """
import ctypes, json, sys
import numpy as np
import relax_mlir as rm
from relax_mlir.ir.struct_info import TensorStructInfo
from relax_mlir.models import mlp
from relax_mlir.training import SGD, CrossEntropyLoss, SetupTrainer

hook = ctypes.CDLL(sys.argv[1])
hook.failmalloc_arm.argtypes = [ctypes.c_long, ctypes.c_size_t, ctypes.c_size_t]
hook.failmalloc_disarm.restype = hook.failmalloc_seen.restype = ctypes.c_long
case = sys.argv[2]
if case == "embedding":
    from relax_mlir.script import from_source
    backbone = from_source('''
@I.ir_module
class Module:
    I.module_attrs({"param_num": 3, "state_num": 0})
    @R.function
    def backbone(ids: R.Tensor((8, 16), "int64"), table: R.Tensor((500, 64), "float32"),
                 w: R.Tensor((64, 10), "float32"), b: R.Tensor((10,), "float32")):
        with R.dataflow():
            rows = R.take(table, ids, axis=0)
            pooled = R.mean(rows, axis=1)
            out = R.add(R.matmul(pooled, w), b)
            R.output(out)
        return out
''')
    batch = 8
else:
    batch = 16 if case == "mlp-step" else 64
    backbone = mlp(batch, (64, 128, 128, 10) if case == "mlp-step" else (512, 512, 10))
setup = SetupTrainer(CrossEntropyLoss(reduction="sum"), SGD(0.01),
                     [TensorStructInfo((batch, 10), "float32"), TensorStructInfo((batch,), "int64")])
if case == "threads":
    name, ex = "backbone", rm.compile(backbone, num_threads=2)
elif case == "cnn":  # a symbolic batch: some buffers are freed by the kernels that may own them
    from relax_mlir.models import cnn
    name, ex = "backbone", rm.compile(cnn("n", (1, 8, 8), (8, 16), 10), num_threads=1)
else:
    name, ex = "update_params", rm.compile(setup(backbone), num_threads=1)
f = ex.compiled[name]
rng = np.random.default_rng(0)
shapes = [[d if isinstance(d, int) else 4 for d in p.shape] for p in f.signature.params]
args = [np.zeros(shape, p.dtype) if p.dtype.kind == "i" else rng.uniform(0.5, 1, shape).astype(p.dtype)
        for shape, p in zip(shapes, f.signature.params)]
address = ex.compiled.engine.raw_lookup(name)
for line in open("/proc/self/maps"):  # the compiled library's code: the mapping holding the function
    span, rest = line.split(" ", 1)
    lo, hi = (int(a, 16) for a in span.split("-"))
    if lo <= address < hi:
        break
native = f._fn

def call(k):
    def armed(argv):
        hook.failmalloc_arm(k, lo, hi)
        try:
            native(argv)
        finally:
            calls.append((hook.failmalloc_seen(), hook.failmalloc_disarm()))
    calls = []
    f._fn = armed
    try:
        out = f(*args)
        outcome = "ok"
    except MemoryError as err:
        out, outcome = None, str(err)
    finally:
        f._fn = native
    seen, leaked = calls[0]
    return out, {"k": k, "outcome": outcome, "seen": seen, "leaked": leaked}

reference, first = call(0)
print(json.dumps(first), flush=True)
for k in range(1, first["seen"] + 1):
    print(json.dumps(call(k)[1]), flush=True)
again, last = call(0)
flat = [r if isinstance(r, tuple) else (r,) for r in (reference, again)]
last["same"] = all(np.array_equal(a, b) for a, b in zip(*flat))
print(json.dumps(last), flush=True)
"""


@pytest.fixture(scope="module")
def failmalloc(tmp_path_factory) -> Path:
    linker = find_linker()
    if linker is None:
        pytest.skip("no C compiler")
    d = tmp_path_factory.mktemp("failmalloc")
    (d / "failmalloc.c").write_text(FAILMALLOC_C)
    subprocess.run([linker, "-shared", "-fPIC", "-O2", "-o", str(d / "failmalloc.so"), str(d / "failmalloc.c")],
                   check=True, capture_output=True)
    return d / "failmalloc.so"


def _fail_each(failmalloc: Path, case: str) -> list[dict]:
    proc = run_child(FAIL_EACH, str(failmalloc), case, env={"LD_PRELOAD": str(failmalloc), "RELAX_MLIR_CACHE": "0"},
                     limit=False)
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stdout[-2000:]} {proc.stderr[-3000:]}"
    return [json.loads(line) for line in proc.stdout.splitlines()]


@pytest.mark.parametrize("case, kept", [("mlp-step", 0), ("embedding", 0), ("cnn", 1)])
def test_each_allocation_failing_in_turn(failmalloc, case, kept):
    """The k-th malloc of a call returns NULL, for every k: each call raises MemoryError and frees what it had
    allocated, and a call afterwards gives the same results as before. The tutorial MLP's training step (every
    allocation in the step's own function); an embedding's (one allocated in a kernel's loop: the kernel gives up,
    its caller sees the slot and gives up too); a CNN of a symbolic batch, where two buffers are freed, or not, by a
    kernel that decides at run time (``bufferization.dealloc``): one of them may be left allocated."""
    calls = _fail_each(failmalloc, case)
    first, failing, last = calls[0], calls[1:-1], calls[-1]
    assert first["outcome"] == "ok" and first["leaked"] == 0 and first["seen"] >= 10
    assert len(failing) == first["seen"]
    function = "backbone" if case == "cnn" else "update_params"
    for call in failing:
        assert call["outcome"].startswith(f"{function}: ") and "in compiled code: out of memory" in call["outcome"]
        assert call["seen"] <= first["seen"] and call["leaked"] <= kept, call
    assert any(c["seen"] == first["seen"] for c in failing)  # the last allocation failed after all the others
    assert last["outcome"] == "ok" and last["same"] and last["leaked"] == 0


def test_each_allocation_of_a_parallel_matmul_failing_in_turn(failmalloc):
    """With 2 threads the matmuls pack their operands into buffers allocated in each iteration of a parallel loop:
    one that fails ends its iteration (the others run: no thread waits at a barrier for it), and the call raises.
    A buffer allocated earlier in the same iteration stays allocated (at most one per thread)."""
    from relax_mlir.backend.openmp import openmp_library

    if openmp_library() is None:
        pytest.skip("no OpenMP runtime")
    calls = _fail_each(failmalloc, "threads")
    first, failing, last = calls[0], calls[1:-1], calls[-1]
    assert first["outcome"] == "ok" and first["leaked"] == 0 and first["seen"] >= 4
    for call in failing:
        assert call["outcome"].startswith("backbone: ") and "in compiled code: out of memory" in call["outcome"]
        assert call["leaked"] <= 2, call
    assert last["outcome"] == "ok" and last["same"] and last["leaked"] == 0


# --- parallel regions, by hand -----------------------------------------------------------------------------------
PARALLEL = """
llvm.func @malloc(i64) -> !llvm.ptr
llvm.func @free(!llvm.ptr)
llvm.func @k(%out: !llvm.ptr, %small: i64, %big: i64, %trips: i64) {
  %c0 = llvm.mlir.constant(0 : i64) : i64
  %c1 = llvm.mlir.constant(1 : i64) : i64
  omp.parallel {
    %p = llvm.call @malloc(%small) : (i64) -> !llvm.ptr
    omp.wsloop {
      omp.loop_nest (%i) : i64 = (%c0) to (%trips) step (%c1) {
        %q = llvm.call @malloc(%big) : (i64) -> !llvm.ptr
        %qi = llvm.ptrtoint %q : !llvm.ptr to i64
        llvm.store %qi, %out : i64, !llvm.ptr
        llvm.call @free(%q) : (!llvm.ptr) -> ()
        omp.yield
      }
    }
    %pi = llvm.ptrtoint %p : !llvm.ptr to i64
    llvm.store %pi, %out : i64, !llvm.ptr
    llvm.call @free(%p) : (!llvm.ptr) -> ()
    omp.terminator
  }
  llvm.return
}
"""


def test_the_checks_of_a_parallel_region():
    """In an ``omp.loop_nest`` a failed allocation ends the iteration (``omp.yield``) and every iteration first
    looks at the slot; elsewhere in a parallel region it aborts with a message (leaving would deadlock the others at
    the next barrier); after the region, the function returns if the slot is set."""
    from mlir import ir

    from relax_mlir.backend.alloc_checks import check_allocations

    with ir.Context() as ctx:
        module = ir.Module.parse(PARALLEL, ctx)
        assert check_allocations(module) == 2
        module.operation.verify()
        text = str(module)
    assert text.count("omp.yield") == 2 and text.count("llvm.call @relax_mlir_allocation_abort(") == 1
    assert text.count("llvm.call @relax_mlir_error_recorded()") == 2  # an iteration's start; after the region
    assert "llvm.alloca" not in text  # nothing of the function's own blocks to free on the way out


@pytest.mark.parametrize("small, big, expect", [(64, 2**62, "slot"), (2**62, 64, "abort")])
def test_a_parallel_region_runs_out_of_memory(small, big, expect):
    from relax_mlir.backend.openmp import openmp_library

    if openmp_library() is None or find_linker() is None:
        pytest.skip("no OpenMP runtime or no C compiler")
    proc = run_child(f"""
        import ctypes
        from mlir import ir
        from relax_mlir.backend.alloc_checks import check_allocations
        from relax_mlir.backend.error_slot import find_slot
        from relax_mlir.backend.native import NativeEngine
        with ir.Context() as ctx, ir.Location.unknown():
            module = ir.Module.parse({PARALLEL!r}, ctx)
            check_allocations(module)
            engine = NativeEngine(module, ["k"])
        out = ctypes.c_int64(0)
        values = [ctypes.c_void_p(ctypes.addressof(out))] + [ctypes.c_int64(v) for v in ({small}, {big}, 100)]
        argv = (ctypes.c_void_p * 4)(*[ctypes.addressof(v) for v in values])
        ctypes.CFUNCTYPE(None, ctypes.c_void_p)(engine.raw_lookup("k"))(argv)
        print("slot:", list(find_slot(engine)))
    """, env={"OMP_NUM_THREADS": "2"}, limit=False)
    if expect == "slot":
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert proc.stdout.strip() == f"slot: [1, {2**62}, 0, 0]"
    else:
        assert proc.returncode == -6, (proc.returncode, proc.stderr[-3000:])  # SIGABRT, not SIGSEGV
        assert f"relax-mlir: could not allocate {2**62} bytes in a parallel region" in proc.stderr
