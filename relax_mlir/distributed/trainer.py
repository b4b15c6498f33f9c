"""``DistributedTrainer``: data-parallel training over MPI, one process (rank) per shard of the global batch.

    from mpi4py import MPI
    trainer = DistributedTrainer(backbone, 6, setup, comm=MPI.COMM_WORLD)   # setup's batch = global batch / K
    trainer.build(); trainer.xavier_uniform_init_params()                   # on every rank (rank 0's wins)
    loss = trainer.update_params(x_shard, y_shard)                          # the global batch's loss

A step: every rank runs the compiled ``grad_flat`` on its shard (gradients, loss and new states packed by the
compiled code into one vector), the vectors are summed with MPI all-reduce in place (in buckets), and every
rank runs the same compiled ``apply_flat`` (the optimizer) on the same sums, so parameters stay bit-identical.

* Loss reduction: ``"sum"`` sums over the global batch (the gradients are summed as they are); ``"mean"`` is
  the global mean: each rank's part is weighted by its share of the denominator (its number of non-ignored
  targets, or their class weights, for class-index cross-entropy; one part in K otherwise), so the result is
  the one-process mean whatever the ranks' targets are.
* Start: parameters, states, optimizer state, step and seed are broadcast from rank 0 before the first step
  and whenever any rank has set new ones (``xavier_uniform_init_params``, ``load``, ...), checked by one 4-byte
  all-reduce per step. ``check_sync()`` compares a CRC of every rank's arrays (``sync_check_every`` runs it
  every N steps).
* Batch norm: by default each rank normalises with the statistics of its own shard (as PyTorch DDP); the
  running statistics are averaged over the ranks after each step, so every rank predicts alike.
  ``sync_batch_norm=True`` normalises with the global batch's statistics, exactly (``sync_bn.py``: B forward
  and B + 1 backward passes for B batch-norm layers), so K ranks train as one process would.
* Dropout: rank 0 uses the one-process key ``fold_in(seed, step)``, rank r > 0 ``fold_in(fold_in(seed, step),
  r)``: streams differ per rank and are reproducible for a given K.
* Failure: with more than one rank, an uncaught exception on any rank aborts the whole job (``MPI_Abort``);
  a killed rank is noticed by ``mpiexec``, which ends the others. A non-finite step is refused on every rank
  alike (the sums are the same everywhere), each naming the same culprit: the first rank whose shard holds a
  NaN or an infinity, its index there and in the global batch (contiguous shards), or no input at all.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from ..ir.dtype import is_floating, is_int, to_numpy
from ..ir.module import IRModule
from ..op.random import fold_in
from ..training.checkpoint_io import first_non_finite
from ..training.nan_policy import NonFiniteError, non_finite_error
from ..training.trainer import NDArray, Trainer
from . import comm as C
from .flat import APPLY_FLAT, GRAD_FLAT, add_flat_functions, layout_of
from .sync_bn import SYNC_ADJOINT_STATS, SYNC_GRAD_FLAT, SYNC_STATS, add_sync_functions


class DistributedTrainer(Trainer):
    """A :class:`Trainer` whose step is data-parallel over ``comm`` (default ``MPI.COMM_WORLD``).

    Takes Trainer's arguments; ``setup_trainer``'s ``loss_args`` give the *per-rank* batch (the global batch
    divided by the number of ranks). ``bucket_bytes`` bounds one all-reduce message (default 25 MiB, PyTorch
    DDP's bucket: one message for the models here, which is fastest when compute and communication do not
    overlap); ``sync_check_every`` runs :meth:`check_sync` every that many steps (0: only when called), counted
    as the steps this trainer ran, which every rank agrees on (``step`` may differ: that is what is checked);
    ``abort_on_error`` makes an uncaught exception on one rank end every rank.
    """

    def __init__(self, mod: IRModule, param_num: Optional[int] = None, setup_trainer=None, seed: int = 0,
                 nan_policy: str = "raise", *, comm=None, bucket_bytes: int = 25 << 20, sync_check_every: int = 0,
                 sync_batch_norm: bool = False, abort_on_error: bool = True):
        super().__init__(mod, param_num, setup_trainer, seed, nan_policy)
        self.comm = comm if comm is not None else C.world()
        self.rank, self.world_size = self.comm.Get_rank(), self.comm.Get_size()
        self.reduction = self.mod.attrs.get("loss_reduction") or getattr(getattr(setup_trainer, "loss", None),
                                                                         "reduction", None)
        if self.reduction not in ("sum", "mean"):
            raise ValueError(f"DistributedTrainer: the loss must reduce to a scalar with 'sum' or 'mean', got "
                             f"{self.reduction!r} (a module made by SetupTrainer records it as 'loss_reduction')")
        if bucket_bytes < 1 or sync_check_every < 0:
            raise ValueError(f"DistributedTrainer: bucket_bytes must be >= 1 and sync_check_every >= 0, got "
                             f"{bucket_bytes} and {sync_check_every}")
        self.mod = add_flat_functions(self.mod)
        self.layout = layout_of(self.mod)
        self._counts_targets = self.reduction == "mean" and self._mean_over_targets()
        self.sync = None
        if sync_batch_norm:
            # A mean whose denominator is the rank's targets' weight enters the surrogate summed (its value times
            # that weight, with no division): a rank whose targets are all ignored adds 0, not 0 x NaN.
            self.mod, self.sync = add_sync_functions(self.mod, setup_trainer, self.layout, self.world_size,
                                                     summed_loss=self._counts_targets)
        self.bucket_elems = max(1, bucket_bytes // C.wire_dtype(to_numpy(self.layout.dtype)).itemsize)
        self.sync_check_every = sync_check_every
        # Steps run in lockstep (every rank calls update_params together): what sync_check_every counts, since
        # it cannot differ between ranks where ``step`` can, and check_sync is a collective all must enter.
        self._lockstep_steps = 0
        self._synced: Optional[list] = None  # the parameter list last broadcast or stepped in lockstep
        if abort_on_error:
            C.abort_on_uncaught_exception(self.comm)

    def _used_functions(self) -> IRModule:
        from ..transform.utils import reachable

        step = (SYNC_STATS, SYNC_ADJOINT_STATS, SYNC_GRAD_FLAT) if self.sync else (GRAD_FLAT,)
        names = {n for f in (*step, APPLY_FLAT, "predict") for n in reachable(self.mod, f)}
        return IRModule({name: self.mod[name] for name in self.mod if name in names}, self.mod.attrs)

    # -- the step ---------------------------------------------------------------------------------
    def update_params(self, *batch) -> NDArray:
        """One data-parallel step on this rank's shard ``(inputs..., targets...)``; returns the loss of the
        global batch (the same on every rank). Every rank must call it, with shards of equal shape."""
        vm = self._require_vm("update_params")
        inputs, targets = self._training_batch(batch)
        self._broadcast_if_changed()
        if self.sync:
            flat, weight = self._synced_gradients(vm, inputs, targets)
            self._reduce(flat, targets, weight)
        else:
            flat = vm[GRAD_FLAT](*inputs, *self.params, *self.states, *targets, *self._rng_keys())
            self._reduce(flat, targets)
        params, optim = vm[APPLY_FLAT](*self.params, flat, *self.optim_state)
        loss = np.array(flat[self.layout.loss_index])
        out = self._finish_step(loss, params, self.layout.states(flat), optim, inputs)
        self._synced = self.params
        self._lockstep_steps += 1
        if self.sync_check_every and self._lockstep_steps % self.sync_check_every == 0:
            self.check_sync()
        return out

    update = update_params

    def _rng_keys(self) -> list[np.ndarray]:
        keys = super()._rng_keys()
        return [fold_in(k, self.rank) for k in keys] if self.rank else keys

    def _synced_gradients(self, vm, inputs, targets) -> tuple[np.ndarray, float]:
        """``grad_flat``'s vector with global batch-norm statistics (see sync_bn.py), its gradients and loss
        already weighted by this rank's share of a mean; returns it and that weight."""
        weight = self._local_weight(targets) if self.reduction == "mean" else 1.0
        scale = np.array(1.0 if self.sync.summed_loss else weight, self.sync.dtype)
        totals, adjoints = np.zeros(self.sync.size, self.sync.dtype), np.zeros(self.sync.size, self.sync.dtype)

        def call(name: str) -> np.ndarray:
            return vm[name](*inputs, *self.params, *self.states, *targets, *self.sync.views(totals),
                            *self.sync.views(adjoints), scale)

        for _ in range(self.sync.layers):  # round k makes layer k's sums global
            totals = call(SYNC_STATS)
            C.allreduce_in_place(self.comm, totals, self.bucket_elems)
        for _ in range(self.sync.layers):  # round k makes the adjoint of layer B-k's sums exact
            adjoints = call(SYNC_ADJOINT_STATS)
            C.allreduce_in_place(self.comm, adjoints, self.bucket_elems)
        return call(SYNC_GRAD_FLAT), weight

    def _reduce(self, flat: np.ndarray, targets: list[np.ndarray], weighted: Optional[float] = None) -> None:
        """Sum the ranks' gradients and losses (weighted for a mean), average their states, in place.
        ``weighted``: the gradients and loss already carry this rank's weight ``weighted``. A float16/bfloat16
        vector is weighted, summed and divided in float32 (``comm.wire_dtype``) and rounded once at the end, as
        one process rounds its gradient once."""
        wire = flat.astype(C.wire_dtype(flat.dtype), copy=False)
        self._reduce_wire(wire, targets, weighted)
        if wire is not flat:
            flat[...] = wire

    def _reduce_wire(self, flat: np.ndarray, targets: list[np.ndarray], weighted: Optional[float]) -> None:
        """:meth:`_reduce` on a vector MPI sums (float32, float64; float32 for a float16/bfloat16 model)."""
        end = self.layout.loss_index + 1
        if self.reduction == "mean" and weighted is not None:
            flat[-1] = weighted
        elif self.reduction == "mean":
            w = self._local_weight(targets)
            if w:
                flat[:end] *= w
            else:
                flat[:end] = 0  # a rank whose targets are all ignored contributes nothing (not 0 * NaN)
            flat[-1] = w
        if self.layout.state_shapes:
            flat[end:-1] *= 1.0 / self.world_size
        C.allreduce_in_place(self.comm, flat, self.bucket_elems)
        if self.reduction == "mean":
            flat[:end] /= flat[-1]

    def _mean_over_targets(self) -> bool:
        """Whether the loss is nll_loss's (class-index cross-entropy's), whose mean divides by the summed class
        weights of the non-ignored targets: each rank's share of the denominator then depends on its targets."""
        target = self.target_vars[0].struct_info
        pred = self.mod["predict"].ret_struct_info
        pred = pred.fields[0] if self.state_num else pred
        return (self.mod.attrs.get("ignore_index") is not None and is_int(target.dtype)
                and target.ndim == pred.ndim - 1)

    def _local_weight(self, targets: list[np.ndarray]) -> float:
        """This rank's share of a mean's denominator: nll_loss divides by the summed class weights of the
        non-ignored targets; every other mean is over equal-sized shards, so each rank counts 1."""
        if not self._counts_targets:
            return 1.0
        y, ignore = targets[0], self.mod.attrs["ignore_index"]
        valid = y[y != ignore]
        if len(targets) > 1:  # class weights, (C,)
            return float(np.sum(targets[1].astype(np.float64)[valid]))
        return float(valid.size)

    # -- a non-finite step -----------------------------------------------------------------------
    def _refuse(self, loss, params, states, optim, inputs, targets=None) -> None:
        """As Trainer's, with the culprit searched in every rank's shard: the reduced outputs are the same on
        every rank, so every rank refuses the step together, and each must name the same example (a NaN on one
        rank makes every rank's step non-finite). Collective: one allgather, on this failure path only. (``targets``
        are not read: a global batch whose targets are all ignored is a NaN of the reduced loss on every rank.)"""
        outputs = self._step_outputs(loss, params, states, optim)
        first = non_finite_error(self.step, outputs, [])  # the first non-finite output: the same on every rank
        found = next(((v.name_hint, x) for v, x in zip(self.input_vars, inputs)
                      if is_floating(x.dtype) and x.ndim and not np.isfinite(x).all()), None)
        if found is not None:  # (name, value, position, shard size) of this rank's first non-finite input
            name, x = found
            where = first_non_finite(x)
            found = (name, str(x[tuple(where)]), where, len(x))
        found_by_rank = self.comm.allgather(found)
        rank = next((r for r, f in enumerate(found_by_rank) if f is not None), None)
        array = dict(outputs)[first.tensor]
        value = array[tuple(first.index)] if first.index else array[()]
        position = f" at {first.index}" if first.index else ""
        batch_index = None
        if rank is None:
            culprit = (f"the inputs of all {self.world_size} ranks' shards are finite (the step diverged: lower the "
                       "learning rate?)")
        else:
            name, held, where, shard = found_by_rank[rank]
            batch_index = rank * shard + where[0]
            culprit = (f"input {name!r} of rank {rank} holds {held} at {where}: batch index {where[0]} of rank "
                       f"{rank}'s shard, global batch index {batch_index} when rank r's shard is examples "
                       f"{shard}r to {shard}r+{shard - 1}")
        error = NonFiniteError(
            f"DistributedTrainer.update_params: step {self.step} produced a non-finite {first.tensor} "
            f"({value}{position}) on {self.world_size} ranks; {culprit}; parameters, states and optimizer state "
            "are left as before the step", self.step, first.tensor, first.index, batch_index)
        error.rank = rank  # the first rank whose shard holds a non-finite input, or None
        self._raise_or_skip(error, stacklevel=4)

    # -- keeping ranks in step --------------------------------------------------------------------
    def _broadcast_if_changed(self) -> None:
        """Broadcast rank 0's arrays when any rank's parameters are not those of the last lockstep step."""
        if not C.any_rank(self.comm, self.params is not self._synced):
            return
        self.params = C.broadcast(self.comm, self.params)
        self.states = C.broadcast(self.comm, self.states)
        self.optim_state = C.broadcast(self.comm, self.optim_state)
        counters = C.broadcast(self.comm, [np.array([self.step, self.seed], np.int64)])[0]
        self.step, self.seed = int(counters[0]), int(counters[1])
        self._synced = self.params

    def check_sync(self) -> None:
        """Raise ``RuntimeError`` on every rank if the ranks' parameters, states, optimizer state or step differ
        (a CRC-32 of each rank's arrays, gathered). Collective: every rank must call it."""
        h = C.fingerprint([*self.params, *self.states, *self.optim_state, np.array(self.step)])
        groups = C.ranks_disagreeing(self.comm, h)
        if groups:
            described = "; ".join(f"{v:08x} on ranks {r}" for v, r in groups.items())
            raise RuntimeError(f"DistributedTrainer.check_sync: the ranks diverged by step {self.step}: "
                               f"parameter/state hashes {described}")

    def save(self, path: str, extra=None) -> None:
        """Rank 0 writes the checkpoint (atomically, as Trainer.save); the others wait for it, so the file is
        whole when every rank returns."""
        if self.rank == 0:
            super().save(path, extra)
        self.comm.Barrier()
