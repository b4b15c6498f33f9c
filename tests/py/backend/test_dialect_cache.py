"""Where the relax dialect's IRDL text comes from: the file shipped in the package when its stamp and op names match
the registry; else the compile cache's directory, read back only when its checksum holds, generated again (and
rewritten) otherwise, one file per compiler version."""

from __future__ import annotations

import glob
import os

from mlir import ir

from relax_mlir.backend import dialect, disk_cache


def _load() -> frozenset:
    dialect._irdl_cached.cache_clear()
    return dialect.load_relax_dialect(ir.Context())


def test_the_shipped_file_is_read_when_current_and_ignored_otherwise(tmp_path, monkeypatch):
    monkeypatch.setenv("RELAX_MLIR_CACHE", "0")
    generated = dialect.irdl_text()
    names = _load()
    monkeypatch.setattr(dialect, "irdl_text", lambda extra=(): (_ for _ in ()).throw(AssertionError("generated")))
    assert _load() == names  # read from the shipped file, not generated
    for damage in (lambda t: t.replace("// registry sha256 ", "// registry sha256 0"),  # another registry's
                   lambda t: t.replace("irdl.operation @add {", "irdl.operation @add_old {")):  # op names differ
        shipped = tmp_path / "relax.irdl.mlir"
        shipped.write_text(damage(generated), encoding="utf-8")
        monkeypatch.setattr(dialect, "IRDL_PATH", shipped)
        dialect._irdl_cached.cache_clear()
        try:
            dialect.load_relax_dialect(ir.Context())
        except AssertionError as err:
            assert "generated" in str(err)
        else:
            raise AssertionError("a stale shipped file was loaded")


def test_the_cached_dialect_is_the_generated_one_and_damage_is_repaired(tmp_path, monkeypatch):
    monkeypatch.setattr(dialect, "IRDL_PATH", tmp_path / "absent.irdl.mlir")  # no shipped file: the cache's
    monkeypatch.setenv("RELAX_MLIR_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("RELAX_MLIR_CACHE", raising=False)
    stale = tmp_path / "relax-irdl-0000.irdl"
    stale.write_text("from an older version")
    names = _load()
    (path,) = glob.glob(os.path.join(tmp_path, "relax-irdl-*.irdl"))  # the stale one is gone
    assert disk_cache.compiler_fingerprint()[:32] in path
    text = open(path, encoding="utf-8").read()
    assert text.startswith(dialect.irdl_text()) and "// sha256 " in text
    assert _load() == names
    with open(path, "w", encoding="utf-8") as f:  # damaged: one op definition lost, the checksum kept
        f.write(text.replace("irdl.operation", "irdl.opera", 1))
    assert _load() == names
    assert open(path, encoding="utf-8").read() == text  # generated again and rewritten


def test_without_the_cache_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.setenv("RELAX_MLIR_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("RELAX_MLIR_CACHE", "0")
    assert _load()
    assert not os.listdir(tmp_path)
