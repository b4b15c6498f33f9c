"""Analyses of Relax functions (TVM's ``relax.analysis``)."""

from .memory import LiveTensorReport, peak_live_bytes

__all__ = ["LiveTensorReport", "peak_live_bytes"]
