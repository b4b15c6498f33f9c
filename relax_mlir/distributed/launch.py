"""Which rank of how many this process is, read from the launcher's environment before MPI is imported.

``relax-mlir train`` runs alone unless ``mpiexec`` (Open MPI, MPICH, Intel MPI, Slurm's PMI) started it with
more than one rank; only then is mpi4py imported and ``MPI_Init`` run, so a plain run needs no MPI at all.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Optional

# The launchers' variables holding the job's number of ranks (Open MPI; MPICH, Intel MPI and Slurm's PMI).
_SIZE_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE")


@dataclass(frozen=True)
class Ranks:
    """This process's place in the job: ``comm`` is None when it runs alone."""

    comm: Any = None
    rank: int = 0
    size: int = 1

    @property
    def root(self) -> bool:
        """Rank 0 prints, plots and writes checkpoints."""
        return self.rank == 0

    def shard(self, items):
        """This rank's equal part of ``items`` (a global batch whose length K divides)."""
        n = len(items) // self.size
        return items[self.rank * n:(self.rank + 1) * n]

    def sum(self, value: int) -> int:
        """``value`` summed over the ranks (an int, on every rank)."""
        return int(self.comm.allreduce(value)) if self.comm is not None else value


def launched_size(environ: Optional[dict] = None) -> int:
    environ = os.environ if environ is None else environ
    for name in _SIZE_VARIABLES:
        if environ.get(name, "").isdigit():
            return int(environ[name])
    return 1


def from_environment() -> Ranks:
    """``Ranks()`` for a lone process; the world communicator when a launcher started several."""
    if launched_size() <= 1:
        return Ranks()
    from .comm import world

    comm = world()
    return Ranks(comm, comm.Get_rank(), comm.Get_size())
