"""Analyses of Relax functions (TVM's ``relax.analysis``): variables, memory, well-formedness."""

from ..ir.well_formed import well_formed
from .memory import LiveTensorReport, estimate_memory_usage, peak_live_bytes
from .variables import all_vars, bound_vars, free_vars, get_var2val

__all__ = ["LiveTensorReport", "peak_live_bytes", "estimate_memory_usage", "well_formed", "free_vars", "bound_vars",
           "all_vars", "get_var2val"]
