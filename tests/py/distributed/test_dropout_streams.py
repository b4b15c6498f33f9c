"""Dropout streams under data parallelism: rank 0 draws the one-process stream, every other rank its own, and
each is reproducible (same seed, step and rank: same key). No MPI needed: the key depends on the rank alone."""

from __future__ import annotations

import numpy as np

from relax_mlir.distributed import DistributedTrainer
from relax_mlir.ir import TensorStructInfo
from relax_mlir.op.random import fold_in
from relax_mlir.script import from_source
from relax_mlir.training import SGD, CrossEntropyLoss, SetupTrainer, Trainer

from ..training.test_setup_trainer import DROPOUT_BACKBONE


class RankOnly:
    """A communicator as far as the dropout keys need one."""

    def __init__(self, rank: int, size: int):
        self.rank, self.size = rank, size

    def Get_rank(self) -> int:  # noqa: N802 (mpi4py's names)
        return self.rank

    def Get_size(self) -> int:  # noqa: N802
        return self.size


def _module():
    setup = SetupTrainer(CrossEntropyLoss(reduction="sum"), SGD(0.1),
                         [TensorStructInfo((8, 3), "float32"), TensorStructInfo((8,), "int64")])
    return setup(from_source(DROPOUT_BACKBONE))


def _keys(rank: int, step: int, seed: int = 5) -> list[np.ndarray]:
    trainer = DistributedTrainer(_module(), seed=seed, comm=RankOnly(rank, 3), abort_on_error=False)
    trainer.step = step
    return trainer._rng_keys()


def test_each_rank_has_its_own_reproducible_dropout_stream():
    one = Trainer(_module(), seed=5)
    one.step = 4
    assert one.has_rng_key
    (single,) = one._rng_keys()
    (k0,), (k1,), (k2,) = (_keys(r, 4) for r in range(3))
    np.testing.assert_array_equal(k0, single)  # rank 0: the one-process stream
    np.testing.assert_array_equal(k1, fold_in(single, 1))
    assert len({k.tobytes() for k in (k0, k1, k2)}) == 3  # three different streams
    np.testing.assert_array_equal(_keys(2, 4)[0], k2)  # reproducible
    assert _keys(1, 5)[0].tobytes() != k1.tobytes()  # and a new key every step
