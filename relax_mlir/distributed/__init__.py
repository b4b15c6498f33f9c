"""Data-parallel training over MPI: :class:`DistributedTrainer` and the sharding of a global batch.

See ``docs/distributed.md``. Needs mpi4py (``pip install 'relax-mlir[mpi]'``), imported only when a
communicator is first needed.
"""

from .trainer import DistributedTrainer

__all__ = ["DistributedTrainer"]
