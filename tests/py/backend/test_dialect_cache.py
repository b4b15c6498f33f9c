"""The relax dialect's IRDL text is kept in the compile cache's directory: read back only when its checksum holds,
generated again (and rewritten) otherwise, one file per compiler version."""

from __future__ import annotations

import glob
import os

from mlir import ir

from relax_mlir.backend import dialect, disk_cache


def _load() -> frozenset:
    dialect._irdl_cached.cache_clear()
    return dialect.load_relax_dialect(ir.Context())


def test_the_cached_dialect_is_the_generated_one_and_damage_is_repaired(tmp_path, monkeypatch):
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
