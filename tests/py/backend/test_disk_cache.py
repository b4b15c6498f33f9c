"""The on-disk compile cache (``backend/disk_cache.py``): a hit in a new process gives the same numbers as a
compile; a damaged or foreign entry is rejected, never loaded, and rebuilt; processes compiling one module at
once agree and leave one whole entry; least-recently-used eviction; ``RELAX_MLIR_CACHE=0``.

Every process here trains a small model three steps and prints its parameters; the oracle is the same
training with the cache off (bit-equal: the same code), itself checked against the NumPy interpreter."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from relax_mlir.backend import disk_cache
from relax_mlir.backend.library import MAGIC

ROOT = Path(__file__).resolve().parents[3]

# Trains a small model (argv[1]: "mlp" or "cnn"; argv[2]: "cpu" or "numpy") for three steps; prints the cache's
# counters, the final parameters, whether any file of the cache directory is mapped into this process, and
# whether MLIR's bindings were imported.
TRAIN = '''
import json, os, sys
import numpy as np
from relax_mlir.ir.struct_info import TensorStructInfo
from relax_mlir.models import cnn, mlp
from relax_mlir.training import SGD, CrossEntropyLoss, SetupTrainer, Trainer
from relax_mlir.backend import disk_cache

kind, target = sys.argv[1], sys.argv[2]
backbone = mlp(8, (16, 32, 10)) if kind == "mlp" else cnn(8, (1, 8, 8), (4, 8), 10)
setup = SetupTrainer(CrossEntropyLoss(reduction="sum"), SGD(0.01, weight_decay=0.01),
                     [TensorStructInfo((8, 10), "float32"), TensorStructInfo((8,), "int64")])
trainer = Trainer(backbone, 4 if kind == "mlp" else 8, setup).build(target=target)
trainer.xavier_uniform_init_params(seed=1)
rng = np.random.default_rng(0)
x = rng.standard_normal((8, 16) if kind == "mlp" else (8, 1, 8, 8)).astype(np.float32)
y = rng.integers(0, 10, 8)
for _ in range(3):
    trainer.update_params(x, y)
cache = os.environ.get("RELAX_MLIR_CACHE_DIR", "")
with open("/proc/self/maps") as f:
    mapped = [line.split()[-1] for line in f if cache and cache in line]
print(json.dumps({"stats": disk_cache.STATS, "mapped": mapped,
                  "bindings": any(m.startswith("mlir.") for m in sys.modules),
                  "params": [p.tolist() for p in trainer.export_params().values()]}))
'''


def train(cache: Path, kind: str = "mlp", target: str = "cpu", **env: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", TRAIN, kind, target], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "RELAX_MLIR_CACHE_DIR": str(cache), **env}, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


def entries(cache: Path) -> list[str]:
    return sorted(glob.glob(str(cache / "*.so")))


@pytest.fixture(scope="module")
def reference():
    """Per model: parameters after training with the cache off (checked against the interpreter)."""
    out = {}
    for kind in ("mlp", "cnn"):
        compiled = train(Path("/nonexistent"), kind, RELAX_MLIR_CACHE="0")
        interpreted = train(Path("/nonexistent"), kind, "numpy", RELAX_MLIR_CACHE="0")
        for a, b in zip(compiled["params"], interpreted["params"]):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
        out[kind] = compiled["params"]
    return out


@pytest.mark.parametrize("kind", ["mlp", "cnn"])
def test_a_hit_in_a_new_process_gives_the_same_parameters(tmp_path, reference, kind):
    cold = train(tmp_path, kind)
    assert cold["stats"]["hits"] == 0 and cold["stats"]["stored"] == 1 and len(entries(tmp_path)) == 1
    warm = train(tmp_path, kind)
    assert warm["stats"]["hits"] == 1 and warm["stats"]["stored"] == 0
    assert warm["mapped"], "a hit runs the library from the cache"
    assert cold["bindings"] and not warm["bindings"], "a hit never imports MLIR (0.15 s)"
    assert cold["params"] == reference[kind] and warm["params"] == reference[kind]  # bit-equal


def _damage(path: str, how: str) -> None:
    data = open(path, "rb").read()
    if how == "truncated":
        data = data[: len(data) // 2]
    elif how == "flipped":  # one byte of code: only the checksum can tell
        data = data[:4096] + bytes([data[4096] ^ 0xFF]) + data[4097:]
    elif how == "not ours":
        data = b"\x7fELF" + b"\0" * 200
    elif how == "bad magic":
        data = data[:-len(MAGIC)] + b"x" * len(MAGIC)
    with open(path, "wb") as f:
        f.write(data)


@pytest.mark.parametrize("how", ["truncated", "flipped", "not ours", "bad magic", "another key"])
def test_a_damaged_or_foreign_entry_is_rebuilt_never_loaded(tmp_path, reference, how):
    train(tmp_path)
    (entry,) = entries(tmp_path)
    if how == "another key":  # a valid library of another module, under this module's name
        other = tmp_path / "other"
        train(other, "cnn")
        os.replace(entries(other)[0], entry)
    else:
        _damage(entry, how)
    again = train(tmp_path)
    assert again["stats"]["rejected"] == 1 and again["stats"]["hits"] == 0 and again["stats"]["stored"] == 1
    assert again["mapped"] == [], "the rejected entry was loaded"
    assert again["params"] == reference["mlp"]
    assert train(tmp_path)["stats"]["hits"] == 1  # rebuilt whole


def test_processes_compiling_one_module_at_once(tmp_path, reference):
    env = {**os.environ, "RELAX_MLIR_CACHE_DIR": str(tmp_path)}
    procs = [subprocess.Popen([sys.executable, "-c", TRAIN, "mlp", "cpu"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env) for _ in range(4)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
        results.append(json.loads(out.splitlines()[-1]))
    assert all(r["params"] == reference["mlp"] for r in results)
    assert len(entries(tmp_path)) == 1 and not glob.glob(str(tmp_path / ".tmp-*"))
    assert train(tmp_path)["stats"]["hits"] == 1


def test_cache_off_writes_nothing(tmp_path, reference):
    result = train(tmp_path / "cache", RELAX_MLIR_CACHE="0")
    assert result["params"] == reference["mlp"]
    assert result["stats"] == {"hits": 0, "misses": 0, "rejected": 0, "stored": 0, "evicted": 0}
    assert not (tmp_path / "cache").exists()


def test_eviction_removes_the_least_recently_used(tmp_path, monkeypatch):
    monkeypatch.setenv("RELAX_MLIR_CACHE_DIR", str(tmp_path))
    for i, name in enumerate(["old", "mid", "new"]):
        path = tmp_path / f"{name}.so"
        path.write_bytes(b"x" * 1000)
        os.utime(path, (1000 + i, 1000 + i))
    stale = tmp_path / ".tmp-dead"
    stale.write_bytes(b"x")
    os.utime(stale, (1, 1))
    disk_cache.evict(2500)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mid.so", "new.so"]
    os.utime(tmp_path / "mid.so")  # a hit: now the most recent
    disk_cache.evict(1000)
    assert [p.name for p in tmp_path.iterdir()] == ["mid.so"]


@pytest.mark.parametrize("text, expected", [("256M", 256 << 20), ("1G", 1 << 30), ("4096", 4096), ("10k", 10240),
                                            ("1.5G", 3 << 29), ("256MB", 256 << 20), ("", 256 << 20),
                                            (" 64m ", 64 << 20)])
def test_size_limit(monkeypatch, text, expected):
    monkeypatch.setenv("RELAX_MLIR_CACHE_SIZE", text)
    assert disk_cache.size_limit() == expected


def test_bad_size_limit_says_what_is_expected(monkeypatch):
    monkeypatch.setenv("RELAX_MLIR_CACHE_SIZE", "lots")
    with pytest.raises(ValueError, match=r"RELAX_MLIR_CACHE_SIZE must be a number of bytes.*got 'LOTS'"):
        disk_cache.size_limit()


@pytest.mark.parametrize("text", ["lots", "1.5.2G", "-5M", "12T"])
def test_a_bad_size_limit_turns_the_cache_off_with_one_warning_before_any_compile(monkeypatch, text):
    """As the other settings that cannot be honoured: the same on a hit and on a miss (it was a ValueError
    raised after a miss had compiled and stored its entry)."""
    monkeypatch.setenv("RELAX_MLIR_CACHE", "1")
    monkeypatch.setenv("RELAX_MLIR_CACHE_SIZE", text)
    monkeypatch.setattr(disk_cache, "find_linker", lambda: "cc")
    monkeypatch.setattr(disk_cache, "_warned", set())
    with pytest.warns(RuntimeWarning, match=r"compile cache is off: RELAX_MLIR_CACHE_SIZE must be a number"):
        assert not disk_cache.enabled()


def test_location_follows_xdg_and_the_override(monkeypatch):
    monkeypatch.delenv("RELAX_MLIR_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", "/x/cache")
    assert disk_cache.cache_dir() == "/x/cache/relax-mlir"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert disk_cache.cache_dir() == os.path.join(os.path.expanduser("~"), ".cache", "relax-mlir")
    monkeypatch.setenv("RELAX_MLIR_CACHE_DIR", "/y")
    assert disk_cache.cache_dir() == "/y"


def test_no_linker_turns_the_cache_off_with_one_warning(monkeypatch):
    monkeypatch.setenv("RELAX_MLIR_CACHE", "1")
    monkeypatch.setattr(disk_cache, "find_linker", lambda: None)
    monkeypatch.setattr(disk_cache, "_warned", set())
    with pytest.warns(RuntimeWarning, match="compile cache is off: no C compiler"):
        assert not disk_cache.enabled()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not disk_cache.enabled()


def test_the_key_depends_on_text_options_and_nothing_random():
    a = disk_cache.cache_key("text", {"opt_level": 2})
    assert a == disk_cache.cache_key("text", {"opt_level": 2}) and len(a) == 64
    assert a != disk_cache.cache_key("text2", {"opt_level": 2})
    assert a != disk_cache.cache_key("text", {"opt_level": 1})
    code = "from relax_mlir.backend import disk_cache; print(disk_cache.cache_key('text', {'opt_level': 2}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONHASHSEED": "random"}, check=True).stdout.strip()
    assert out == a


def test_an_executable_from_the_cache_prints_its_stages(tmp_path, monkeypatch):
    from relax_mlir import compile as compile_module
    from relax_mlir.backend.build import clear_cache
    from relax_mlir.backend.library import LoadedModule
    from relax_mlir.backend.runtime import CompiledModule
    from relax_mlir.models import mlp

    monkeypatch.setenv("RELAX_MLIR_CACHE_DIR", str(tmp_path))
    mod = mlp(4, (8, 16, 3))
    clear_cache()
    fresh = compile_module(mod)
    clear_cache()
    cached = compile_module(mod)
    assert isinstance(fresh.compiled, CompiledModule) and isinstance(cached.compiled, LoadedModule)
    assert cached.linalg_text == fresh.linalg_text and cached.llvm_text == fresh.llvm_text
    assert cached.library_bytes() == fresh.library_bytes()


def test_a_hit_exposes_the_functions_a_compile_exposes(tmp_path, monkeypatch):
    """A local function is lifted to a module function (``main_inner``) before compiling; a hit built its
    executable from the module as given and had no ``main_inner``."""
    from relax_mlir import VirtualMachine, compile as compile_module
    from relax_mlir.backend.build import clear_cache
    from relax_mlir.backend.library import LoadedModule
    from relax_mlir.script import from_source

    mod = from_source("""
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor((3,), "float32")):
        @R.function
        def inner(y: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
            z = R.add(y, y)
            return z
        w = inner(x)
        return w
""")
    monkeypatch.setenv("RELAX_MLIR_CACHE_DIR", str(tmp_path))
    clear_cache()
    fresh = compile_module(mod)
    clear_cache()
    cached = compile_module(mod)
    assert isinstance(cached.compiled, LoadedModule)
    assert sorted(cached.mod) == sorted(fresh.mod) == ["main", "main_inner"]
    x = np.arange(3, dtype=np.float32)
    for ex in (fresh, cached):
        np.testing.assert_array_equal(VirtualMachine(ex)["main_inner"](x), 2 * x)


def test_an_unwritable_cache_warns_once_and_compiles(tmp_path, monkeypatch):
    import warnings

    from relax_mlir import VirtualMachine, compile as compile_module
    from relax_mlir.backend.build import clear_cache
    from relax_mlir.models import mlp

    (tmp_path / "file").write_text("not a directory")
    monkeypatch.setenv("RELAX_MLIR_CACHE_DIR", str(tmp_path / "file" / "cache"))
    monkeypatch.setattr(disk_cache, "DISABLED", False)
    monkeypatch.setattr(disk_cache, "_warned", set())
    clear_cache()
    mod = mlp(2, (3, 4, 2))
    with pytest.warns(RuntimeWarning, match="compile cache is off: .*Not a directory"):
        ex = compile_module(mod)
    assert disk_cache.DISABLED
    weights = [np.full(p.struct_info.shape, 0.5, np.float32) for p in mod["backbone"].params[1:]]
    x = np.ones((2, 3), np.float32)
    expected = np.full((2, 2), 0.5 * (4 * (0.5 * 3 + 0.5)) + 0.5, np.float32)  # two dense layers by hand
    np.testing.assert_allclose(VirtualMachine(ex)["backbone"](x, *weights), expected, rtol=1e-6)
    clear_cache()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compile_module(mlp(2, (3, 5, 2)))


def test_large_arrays_enter_the_key_as_digests_of_their_bytes():
    """A module's key reads its large arrays (a constant in a function, the optimizer's initial state in the
    module's attributes) through a digest of their bytes: one changed element, dtype or shape changes the key;
    equal arrays give the same key; the text is not the values written out (Adam's state of a wide MLP took 20 s
    to print)."""
    from relax_mlir.backend.build import DIGEST_ARRAYS_FROM, _disk_key
    from relax_mlir.backend.options import PipelineOptions
    from relax_mlir.ir.printer import format_module
    from relax_mlir.script import from_source

    source = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((100,), "float32")):
        return R.add(x, R.const(CONST, "float32"))
"""
    values = [round(0.01 * i, 2) for i in range(100)]

    def module(vals, state):
        mod = from_source(source.replace("CONST", repr(vals)))
        return mod.with_attrs({"optim_state": state})

    base_state = [np.zeros(5000, np.float32)]
    key = _disk_key(module(values, base_state), PipelineOptions())
    assert key == _disk_key(module(values, [np.zeros(5000, np.float32)]), PipelineOptions())
    changed = list(values)
    changed[57] = 9.5
    assert key != _disk_key(module(changed, base_state), PipelineOptions())  # a constant's element
    one = np.zeros(5000, np.float32)
    one[4999] = 1e-30
    assert key != _disk_key(module(values, [one]), PipelineOptions())  # an attribute's last element
    assert key != _disk_key(module(values, [np.zeros(5000, np.float64)]), PipelineOptions())  # its dtype
    assert key != _disk_key(module(values, [np.zeros((50, 100), np.float32)]), PipelineOptions())  # its shape
    text = format_module(module(values, base_state), digest_arrays_from=DIGEST_ARRAYS_FROM)
    assert text.count("R.const_digest(") == 2 and "0.57" not in text
    assert "0.57" in module(values, base_state).script()  # the script itself still writes every value


def test_a_changed_source_file_changes_the_compiler_fingerprint():
    """A source counts by its size and modification time (as Python's bytecode cache tells a changed source):
    rewriting one file of the package gives every entry a new key."""
    path = Path(disk_cache.__file__).resolve().parent / "signature.py"
    before = disk_cache.compiler_fingerprint.__wrapped__()
    assert disk_cache.compiler_fingerprint.__wrapped__() == before  # nothing random in it
    st = os.stat(path)
    try:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
        assert disk_cache.compiler_fingerprint.__wrapped__() != before
    finally:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert disk_cache.compiler_fingerprint.__wrapped__() == before


def test_constants_with_the_same_bytes_in_another_byte_order_get_their_own_entries(tmp_path, monkeypatch):
    """A constant of 64 or more elements enters the key as a digest; of its raw bytes, a big-endian ``>f4`` array
    and a native one with the same bytes (other values) got one key, and the second module ran the first one's
    code from the disk cache. Each module, compiled after the other with the in-process cache cleared, computes
    its own values (the interpreter's)."""
    from relax_mlir import VirtualMachine, compile as compile_module, op
    from relax_mlir.backend.build import clear_cache
    from relax_mlir.interpreter import Interpreter
    from relax_mlir.ir import BlockBuilder, Constant, TensorStructInfo, Var

    native = np.arange(64, dtype=np.float32) + 1
    swapped = native.view(">f4")  # the same bytes: other values (1.0 read big-endian is 4.6e-41)
    assert native.tobytes() == swapped.tobytes() and not np.array_equal(native, swapped)

    def module(values):
        x = Var("x", TensorStructInfo((64,), "float32"))
        bb = BlockBuilder()
        with bb.function("main", [x]):
            with bb.dataflow():
                out = bb.emit_output(op.add(x, Constant(values)))
            bb.emit_func_output(out)
        return bb.get()

    monkeypatch.setenv("RELAX_MLIR_CACHE_DIR", str(tmp_path))
    x = np.zeros(64, np.float32)
    for values in (native, swapped, native):
        mod = module(values)
        clear_cache()  # (the in-process cache confirms a hit structurally; the disk cache has only the key)
        got = VirtualMachine(compile_module(mod))["main"](x)
        np.testing.assert_array_equal(got, Interpreter(mod).call("main", x))
        np.testing.assert_array_equal(got, values.astype(np.float32))
    assert len(entries(tmp_path)) == 2
