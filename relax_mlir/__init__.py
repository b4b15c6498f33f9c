"""relax-mlir: TVM Relax's training workflow on MLIR, in Python."""

from . import ir, op, transform
from .interpreter import interpret
from .ir import *  # noqa: F401,F403

__version__ = "0.1.0"
