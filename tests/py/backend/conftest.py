"""Fixtures of the backend tests."""

import pytest

from relax_mlir.backend import host as host_module


@pytest.fixture
def pinned_host(monkeypatch):
    """The host pinned (AVX-512, 32 KiB L1d, 1 MiB L2) so that the plans do not depend on the machine."""
    for var, value in (("RELAX_MLIR_VECTOR_BITS", "512"), ("RELAX_MLIR_L1D_BYTES", "32K"),
                       ("RELAX_MLIR_L2_BYTES", "1M")):
        monkeypatch.setenv(var, value)
    host_module.host_cpu.cache_clear()
    yield
    for var in ("RELAX_MLIR_VECTOR_BITS", "RELAX_MLIR_L1D_BYTES", "RELAX_MLIR_L2_BYTES"):
        monkeypatch.delenv(var)
    host_module.host_cpu.cache_clear()
