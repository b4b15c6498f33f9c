"""``Trainer``: keeps parameters, states and optimizer state, and runs a compiled training module.

As the tutorial writes it:

    trainer = Trainer(MLP, 6, setup_trainer)      # backbone module, param_num, SetupTrainer
    trainer.build(target="cpu")                   # compile through MLIR ("numpy": the reference interpreter)
    trainer.xavier_uniform_init_params()          # TVM's spelling xaiver_uniform_init_params works too
    loss = trainer.update_params(x, y)            # one step; loss.numpy()
    logits = trainer.predict(x)
    trainer.save("ckpt.npz"); trainer.load("ckpt.npz")   # parameters, states, optimizer state, step: atomic

Every batch is checked (shapes, dtypes, class labels in range) before native code runs.
"""

from __future__ import annotations

import operator
import warnings
from typing import Any, Mapping, Optional, Sequence, Union

import numpy as np

from ..backend.arguments import ArgumentError, conform
from .._files import checked_path
from ..backend.callpath import _native  # relax_mlir/_callpath.c, or None when it was not built at install
from ..ir.dtype import is_floating, is_int, to_numpy
from ..ir.module import IRModule
from ..ir.struct_info import TensorStructInfo
from ..ir.sym import SymDim
from ..op.random import fold_in
from . import checkpoint_io
from .nan_policy import FiniteCheck, check_policy, non_finite_error


class NDArray(np.ndarray):
    """A NumPy array that also answers ``.numpy()``, as TVM's arrays do in the tutorial's code."""

    def numpy(self) -> np.ndarray:
        return np.asarray(self)


def _nd(a) -> NDArray:
    return np.asarray(a).view(NDArray)


class _InterpreterVM:
    """``vm["f"](*args)`` through the NumPy reference interpreter (``build(target="numpy")``)."""

    def __init__(self, mod: IRModule):
        from ..interpreter import Interpreter

        self._interp = Interpreter(mod)

    def __getitem__(self, name: str):
        return lambda *args: self._interp.call(name, *args)



def _extra_arrays(extra: Optional[Mapping[str, Any]], path: str) -> dict[str, np.ndarray]:
    """``save``'s ``extra`` entries as arrays ``load`` reads back: numbers, booleans or strings (or arrays of
    them); anything NumPy would store as Python objects (a dict, None, a ragged list) is refused before the old
    checkpoint is replaced, since loading never unpickles."""
    out = {}
    for key, value in (extra or {}).items():
        if not isinstance(key, str):
            raise TypeError(f"Trainer.save: {path}: extra keys are strings, got {key!r}")
        try:
            array = np.asarray(value)
        except ValueError as exc:  # a ragged list
            raise checkpoint_io.CheckpointError(f"Trainer.save: {path}: not written: extra[{key!r}] is not an "
                                                f"array of one shape ({exc})") from None
        if array.dtype.kind not in "biufcUS" and not is_floating(array.dtype):  # (bfloat16's kind is "V")
            raise checkpoint_io.CheckpointError(
                f"Trainer.save: {path}: not written: extra[{key!r}] = {value!r} would be stored as Python objects, "
                "which load never unpickles; store numbers, booleans, strings or arrays of them")
        out[f"extra/{key}"] = array
    return out

class Trainer:
    """Runs ``update_params`` and ``predict`` of a module made by :class:`SetupTrainer`.

    ``Trainer(backbone_module, param_num, setup_trainer)`` (the tutorial's form) applies ``setup_trainer``;
    ``Trainer(train_module)`` takes a module ``SetupTrainer`` already made.
    ``nan_policy`` ("raise", "skip" or "ignore", see ``nan_policy.py``) says what a step that produces a NaN or
    an infinity does; with "raise" and "skip" such a step leaves every parameter, state and optimizer array as
    it was.
    """

    def __init__(self, mod: IRModule, param_num: Optional[int] = None, setup_trainer=None, seed: int = 0,
                 nan_policy: str = "raise"):
        if param_num is not None and (isinstance(param_num, bool) or not isinstance(param_num, (int, np.integer))):
            raise TypeError(f"Trainer(mod, param_num=None, setup_trainer=None, ...): param_num is the backbone's "
                            f"parameter count, an int, got {type(param_num).__name__}; TVM's "
                            "Trainer(train_mod, vm, device) form is not supported: pass the module SetupTrainer made, "
                            "Trainer(train_mod).build(target), or the backbone, Trainer(backbone, param_num, setup)")
        self.nan_policy = check_policy(nan_policy)  # see nan_policy.py: what is checked after each step, and why
        if setup_trainer is not None:
            if param_num is not None and mod.attrs.get("param_num", param_num) != param_num:
                raise ValueError(f"Trainer: param_num={param_num} disagrees with the module's "
                                 f"param_num={mod.attrs['param_num']}")
            if param_num is not None and "param_num" not in mod.attrs:
                mod = mod.with_attrs({"param_num": param_num, "state_num": mod.attrs.get("state_num", 0)})
            mod = setup_trainer(mod)
        if "update_params" not in mod or "predict" not in mod:
            raise ValueError("Trainer: the module has no update_params/predict: pass a backbone module with its "
                             "param_num and SetupTrainer, or a module SetupTrainer made")
        _check_train_attrs(mod)
        self.mod, self.setup_trainer = mod, setup_trainer
        self.input_num = int(mod.attrs["input_num"])
        self.param_num, self.state_num = int(mod.attrs["param_num"]), int(mod.attrs["state_num"])
        predict = mod["predict"]
        first, last = self.input_num, self.input_num + self.param_num
        self.param_vars = list(predict.params[first:last])
        self.state_vars = list(predict.params[last:last + self.state_num])
        _refuse_shared_names(self.param_vars + self.state_vars)
        loss_params = mod["loss"].params
        # A model with dropout takes a random key last (SetupTrainer records how many): fold_in(seed, step) each step.
        self.has_rng_key = bool(int(mod.attrs["rng_key_num"]))
        self.target_vars = list(loss_params[last + self.state_num:len(loss_params) - self.has_rng_key])
        self.input_vars = list(predict.params[:first])
        self.params: Optional[list[np.ndarray]] = None
        # A model may say how its states start (module attribute "state_init": name -> fill value, e.g. a
        # batch-norm running variance of 1); the rest start at zero, as in TVM.
        fills = dict(mod.attrs.get("state_init", {}))
        self.states = [np.full(_static_shape(v), fills.get(v.name_hint, 0), to_numpy(v.struct_info.dtype))
                       for v in self.state_vars]
        self.optim_state = [np.array(a, copy=True) for a in mod.attrs["optim_state"]]
        # the optimizer's class name, which save records and load compares (None: a module made without it)
        self.optimizer_kind: Optional[str] = mod.attrs.get("optimizer_kind")
        self.step, self.seed, self.skipped_steps = 0, _checked_seed(seed), 0
        self._finite = FiniteCheck()
        self.vm = None
        self._step_fn = None  # the compiled update_params, flat, when it writes into the Trainer's own buffers
        self._loss_dtype = None  # its loss's dtype
        self._spare: Sequence[Optional[np.ndarray]] = []  # where the next step writes (see _reuse_buffers)
        self._made: tuple = ()  # the arrays the last adopted compiled step wrote: the Trainer's own buffers
        self._labels: Optional[list[tuple[int, int]]] = None  # the class-index targets (_label_targets)
        self._label_slots: Optional[list[tuple[int, int]]] = None  # ... as positions in update_params' batch
        self._exact: Optional[list] = None  # per batch variable: (dtype, static shape), or None (_exact_spec)
        self._n_inputs, self._n_batch = len(self.input_vars), len(self.input_vars) + len(self.target_vars)

    # -- building ---------------------------------------------------------------------------------
    def build(self, target: str = "cpu", device: Any = None, opt_level: int = 2, checks: bool = True) -> "Trainer":
        """Compile the training module for the host CPU (``"cpu"`` or ``"llvm"``), or run it with the NumPy
        reference interpreter (``"numpy"``). ``device`` is accepted for TVM's signature; only the CPU exists.
        ``checks=False`` compiles without the runtime index checks (``relax_mlir.compile``)."""
        if target in ("cpu", "llvm"):
            from ..backend import VirtualMachine, compile
            from ..backend.runtime import CompiledFunction

            self.vm = VirtualMachine(compile(self._used_functions(), target="cpu", opt_level=opt_level,
                                             checks=checks))
            step = getattr(self.vm.executable.compiled, "functions", {}).get("update_params")
            n_out = 1 + self.param_num + self.state_num + len(self.optim_state)
            fits = isinstance(step, CompiledFunction) and len(step.signature.results) == n_out and all(
                isinstance(d, int) for r in step.signature.results for d in r.shape)
            self._step_fn = step if fits else None
            self._loss_dtype = step.signature.results[0].dtype if fits else None
            from ..backend.openmp import resolve_threads

            self._finite = FiniteCheck(threads=resolve_threads(None))  # the threads the step was compiled for
        elif target in ("numpy", "interpreter"):
            self.vm = _InterpreterVM(self.mod)
            self._step_fn = None
        else:
            raise ValueError(f"Trainer.build: unknown target {target!r}; expected 'cpu' (or 'llvm') or 'numpy'")
        return self

    def _used_functions(self) -> IRModule:
        """The module restricted to what a Trainer calls (update_params, predict and their callees): compiling
        loss, loss_adjoint and the optimizer on their own as well would cost a third more LLVM time for nothing."""
        from ..transform.utils import reachable

        names = set(reachable(self.mod, "update_params")) | set(reachable(self.mod, "predict"))
        return IRModule({name: self.mod[name] for name in self.mod if name in names}, self.mod.attrs)

    def _require_vm(self, what: str):
        if self.vm is None:
            raise RuntimeError(f"Trainer.{what}: call build() first")
        if self.params is None:
            raise RuntimeError(f"Trainer.{what}: initialise or load the parameters first "
                               "(xavier_uniform_init_params(), zero_init_params() or load_params())")
        return self.vm

    # -- parameters and states --------------------------------------------------------------------
    def xavier_uniform_init_params(self, seed: Optional[int] = None) -> None:
        """Every parameter ``sqrt(6 / sum(shape)) * U(-1, 1)`` (TVM's rule; a 1-D bias uses ``sqrt(6 / n)``)."""
        rng = np.random.default_rng(self.seed if seed is None else seed)
        self.params = []
        for v in self.param_vars:
            shape = _static_shape(v)
            bound = np.sqrt(6.0 / max(sum(shape), 1))
            self.params.append((bound * rng.uniform(-1.0, 1.0, size=shape)).astype(to_numpy(v.struct_info.dtype)))

    xaiver_uniform_init_params = xavier_uniform_init_params  # TVM's spelling, as the tutorial calls it

    def zero_init_params(self) -> None:
        self.params = [np.zeros(_static_shape(v), to_numpy(v.struct_info.dtype)) for v in self.param_vars]

    def load_params(self, params: Union[Mapping[str, Any], Sequence[Any]]) -> None:
        """Set parameters from a dict by name (a subset is fine once initialised) or a full list in order."""
        self.params = self._load(params, self.param_vars, self.params, "load_params")

    def load_states(self, states: Union[Mapping[str, Any], Sequence[Any]]) -> None:
        self.states = self._load(states, self.state_vars, self.states, "load_states")

    def export_params(self) -> dict[str, NDArray]:
        if self.params is None:
            raise RuntimeError("Trainer.export_params: no parameters yet")
        return {v.name_hint: _nd(a.copy()) for v, a in zip(self.param_vars, self.params)}

    def export_states(self) -> dict[str, NDArray]:
        return {v.name_hint: _nd(a.copy()) for v, a in zip(self.state_vars, self.states)}

    def _load(self, values, variables, current, what: str) -> list[np.ndarray]:
        names = [v.name_hint for v in variables]
        if not isinstance(values, (Mapping, list, tuple)):  # a string would be read as its letters, None has no len
            raise TypeError(f"Trainer.{what}: expected a dict by name or a list of {len(names)} arrays "
                            f"({', '.join(names)}), got {type(values).__name__}")
        if isinstance(values, Mapping):
            unknown = [k for k in values if k not in names]
            if unknown:
                raise KeyError(f"Trainer.{what}: unknown name(s) {', '.join(map(repr, unknown))}; "
                               f"expected some of {', '.join(names)}")
            if current is None and len(values) != len(names):
                raise ValueError(f"Trainer.{what}: the first load must give all of {', '.join(names)}")
            out = list(current) if current is not None else [None] * len(names)
            for k, a in values.items():
                out[names.index(k)] = a
        else:
            if len(values) != len(names):
                raise ValueError(f"Trainer.{what}: expected {len(names)} arrays ({', '.join(names)}), "
                                 f"got {len(values)}")
            out = list(values)
        arrays = [self._checked(a, v, f"Trainer.{what}") for a, v in zip(out, variables)]
        problems = checkpoint_io.non_finite_problems({v.name_hint: a for v, a in zip(variables, arrays)})
        if problems:  # (as load() refuses them: a step from them reports a divergence that is not one)
            raise ValueError(f"Trainer.{what}: " + "; ".join(problems))
        return arrays

    @staticmethod
    def _checked(a: Any, v, where: str) -> np.ndarray:
        """``a`` as the parameter's own copy: its shape exactly, its dtype under the policy compiled calls follow
        (``backend/arguments.py``: float64 values for a float32 parameter are rounded once, a cast that would
        change a value is refused)."""
        from ..backend.arguments import ArgumentError, conform

        shape, dtype = _static_shape(v), to_numpy(v.struct_info.dtype)
        got = np.asarray(a) if not isinstance(a, np.ndarray) else a
        if got.shape != shape:
            raise ValueError(f"{where}: {v.name_hint!r} must be {dtype} of shape {shape}, got {got.dtype} {got.shape}")
        converted, problem = conform(a, dtype)
        if converted is None:
            raise ArgumentError(f"{where}: {v.name_hint!r} must be {dtype} of shape {shape}: {problem}")
        return np.array(converted, order="C", copy=True)  # (ascontiguousarray would make a 0-d array 1-d)

    # -- running ----------------------------------------------------------------------------------
    def update_params(self, *batch) -> NDArray:
        """One training step on ``(inputs..., targets...)``; returns the loss (a 0-d array with ``.numpy()``).

        A compiled step writes the new parameters, states and optimizer state into the Trainer's spare buffers
        (allocated once), which become current when the step is adopted; the arrays they replace become the
        spare ones. So no step allocates them, and a refused step (``nan_policy``) leaves the current arrays
        untouched. The arrays of ``trainer.params`` are therefore rewritten two steps later: keep a snapshot with
        ``export_params()`` (a copy) or ``np.copy``."""
        step = self._step_fn
        if step is None or self.params is None:
            vm = self._require_vm("update_params")  # (raises before build() or before the parameters exist)
            inputs, targets = self._training_batch(batch)
            args = self._step_args(inputs, targets)
            loss, params, states, optim = vm["update_params"](*args)
            return self._finish_step(loss, params, states, optim, inputs, targets)
        # the compiled step's route, written flat: it is a few microseconds of every step (trainer_overhead.py)
        spare = self._spare
        if spare.__class__ is not tuple:
            spare = self._reuse_buffers()
        loss = np.empty((), self._loss_dtype)  # returned to the caller: fresh each step
        outs = (loss, *spare)
        check = self.nan_policy != "ignore"
        finite = inputs = targets = None
        if self._labels_fit(batch):  # the common case: the batch goes as given, checked natively in the call
            n_in = self._n_inputs
            args = (*batch[:n_in], *self.params, *self.states, *batch[n_in:],
                    *(self._rng_keys() if self.has_rng_key else ()), *self.optim_state)
            finite = step.call_scanning(args, outs, self._finite.threads if check else 0)
        if finite is None:  # something to convert, or to refuse with the Trainer's message
            inputs, targets = self._training_batch(batch)
            args = self._step_args(inputs, targets)
            spare = self._not_current(spare)
            outs = (loss, *spare)
            step(*args, out=outs)
            finite = not check or self._finite.all_finite(outs)
        p, s = self.param_num, self.param_num + self.state_num
        if not finite:
            if inputs is None:
                inputs, targets = batch[:self._n_inputs], batch[self._n_inputs:]
            self._refuse(loss, spare[:p], spare[p:s], spare[s:], inputs, targets)
            return loss.view(NDArray)  # (the spare buffers stay spare)
        # adopted: the arrays replaced become the next step's buffers, where they are the Trainer's own
        current, made = (*self.params, *self.states, *self.optim_state), self._made
        if len(made) == len(current) and all(map(operator.is_, current, made)):
            self._spare = made  # (the common case: every current array is one a step wrote)
        else:
            self._spare = [a if a is m else None for a, m in zip(current, made)] if made else [None] * len(current)
        self._made = spare
        self.params, self.states, self.optim_state = list(spare[:p]), list(spare[p:s]), list(spare[s:])
        self.step += 1
        return loss.view(NDArray)

    def _step_args(self, inputs: Sequence, targets: Sequence) -> tuple:
        """``update_params``' arguments in its order: inputs, parameters, states, targets, dropout keys, optimizer
        state."""
        return (*inputs, *self.params, *self.states, *targets, *self._rng_keys(), *self.optim_state)

    def _labels_fit(self, batch: tuple) -> bool:
        """Whether the batch has the right count and every class-index target names a class, by the native scan
        (False also when that cannot tell: the checked route then decides)."""
        slots = self._label_slots
        if slots is None:
            if self._labels is None:
                self._labels = self._label_targets()
            slots = self._label_slots = [(self._n_inputs + i, classes) for i, classes in self._labels]
        if len(batch) != self._n_batch or _native is None:
            return False
        for slot, classes in slots:
            if _native.labels_in_range(batch[slot], 0, classes) is not True:
                return False
        return True

    def _not_current(self, spare: Sequence[np.ndarray]) -> tuple[np.ndarray, ...]:
        """``spare`` with a new array for each buffer that is also a current parameter, state or optimizer state
        (arrays of an earlier step a caller put back: ``trainer.params = old``), which the step would overwrite
        while reading it."""
        current = {id(a) for a in (*self.params, *self.states, *self.optim_state)}
        return tuple(np.empty_like(b) if id(b) in current else b for b in spare)

    def _reuse_buffers(self) -> tuple[np.ndarray, ...]:
        """The buffers the next compiled step writes: the spare set, where each slot is one the Trainer made
        (never an array a caller gave: ``load_params`` and ``restore`` copy, but a caller may also assign into
        ``trainer.params``), else a new array."""
        spare = self._spare  # (empty before the first adopted step, else one slot per buffer)
        if spare.__class__ is tuple:  # every slot the Trainer's own
            return spare
        if spare and all(b is not None for b in spare):
            return tuple(spare)
        results = self._step_fn.signature.results[1:]
        return tuple(b if b is not None else np.empty(r.shape, r.dtype)
                     for b, r in zip(spare or [None] * len(results), results))

    def _training_batch(self, batch) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """``(inputs, targets)`` of ``update_params``'s arguments, checked (count, shapes, dtypes, labels)."""
        n_in, n_tg = len(self.input_vars), len(self.target_vars)
        if self._exact is None:
            self._exact = [_exact_spec(v) for v in self.input_vars + self.target_vars]
        exact = self._exact
        if len(batch) == len(exact) and all(  # the common case: arrays of the exact dtype and static shape
                a.__class__ is np.ndarray and spec is not None and a.shape == spec[1] and a.dtype == spec[0]
                for a, spec in zip(batch, exact)):
            inputs, targets = list(batch[:n_in]), list(batch[n_in:])
            self._check_labels(targets)
            return inputs, targets
        if len(batch) != n_in + n_tg:
            raise ValueError(f"Trainer.update_params: expected {n_in} input(s) and {n_tg} target(s) "
                             f"({', '.join(v.name_hint for v in self.input_vars + self.target_vars)}), "
                             f"got {len(batch)} arrays")
        inputs = self._batch(batch[:n_in], self.input_vars, "update_params")
        targets = self._batch(batch[n_in:], self.target_vars, "update_params")
        self._check_labels(targets)
        return inputs, targets

    def _rng_keys(self) -> list[np.ndarray]:
        """The dropout key of this step (none for a model without random ops)."""
        return [fold_in(self.seed, self.step)] if self.has_rng_key else []

    def _finish_step(self, loss, params, states, optim, inputs, targets=None) -> NDArray:
        """Adopt the outputs of a step that wrote fresh buffers (the interpreter's, a distributed step's), or refuse
        them as ``nan_policy`` says; returns the loss. A refused step is one whose outputs are not adopted."""
        if self.nan_policy != "ignore" and not self._finite.all_finite([loss, *params, *states, *optim]):
            self._refuse(loss, params, states, optim, inputs, targets)
            return _nd(loss)
        self.params, self.states, self.optim_state = list(params), list(states), list(optim)
        self.step += 1
        return _nd(loss)

    def _refuse(self, loss, params, states, optim, inputs, targets=None) -> None:
        """Raise NonFiniteError (policy "raise") or warn and count the skipped step (policy "skip")."""
        outputs = self._step_outputs(loss, params, states, optim)
        error = non_finite_error(self.step, outputs, [(v.name_hint, a) for v, a in zip(self.input_vars, inputs)],
                                 self._mean_over_nothing(loss, targets))
        self._raise_or_skip(error, stacklevel=3)

    def _mean_over_nothing(self, loss, targets) -> Optional[str]:
        """Why a NaN loss is no divergence, when the batch says so: a "mean" over no targets is 0/0, as in TVM
        and PyTorch (an empty batch, or class-index targets that are all ``ignore_index``). None otherwise."""
        if not targets or self.mod.attrs.get("loss_reduction") != "mean" or not np.isnan(loss):
            return None
        targets = [np.asarray(t) for t in targets]
        if any(t.size == 0 for t in targets):
            return "the batch is empty: the loss's mean over no examples is 0/0 = NaN"
        ignore, labels = self.mod.attrs.get("ignore_index"), self._labels or self._label_targets()
        if ignore is None or not labels or not all((targets[i] == ignore).all() for i, _ in labels):
            return None
        return (f"every target of the batch is ignore_index ({ignore}): the loss's mean over no targets is 0/0 = "
                "NaN; leave such batches out, or use reduction 'sum'")

    def _step_outputs(self, loss, params, states, optim) -> list[tuple[str, np.ndarray]]:
        """A step's outputs as ``non_finite_error`` names them."""
        outputs = [("loss", np.asarray(loss))]
        outputs += [(f"parameter {v.name_hint!r}", a) for v, a in zip(self.param_vars, params)]
        outputs += [(f"state {v.name_hint!r}", a) for v, a in zip(self.state_vars, states)]
        return outputs + [(f"optimizer state {i}", a) for i, a in enumerate(optim)]

    def _raise_or_skip(self, error: Exception, stacklevel: int) -> None:
        """``nan_policy`` applied to a refused step's ``error``; ``stacklevel`` as the caller's ``warnings.warn``."""
        if self.nan_policy == "raise":
            raise error
        self.skipped_steps += 1
        warnings.warn(f"{error} (skipped: {self.skipped_steps} so far)", RuntimeWarning, stacklevel=stacklevel + 1)

    def update(self, input_instances, targets) -> NDArray:
        """TVM's ``Trainer.update(input_instances, targets)``: ``update_params`` with the inputs and the targets
        each given as one array, or as a list (or tuple) of them when the backbone has several."""
        def listed(value) -> list:
            return list(value) if isinstance(value, (list, tuple)) else [value]
        inputs, targets = listed(input_instances), listed(targets)
        if len(inputs) != self._n_inputs or len(targets) != self._n_batch - self._n_inputs:
            names = lambda vs: ", ".join(v.name_hint for v in vs) or "none"  # noqa: E731
            raise ValueError(f"Trainer.update: expected {self._n_inputs} input(s) ({names(self.input_vars)}) and "
                             f"{self._n_batch - self._n_inputs} target(s) ({names(self.target_vars)}), got "
                             f"{len(inputs)} and {len(targets)}")
        return self.update_params(*inputs, *targets)

    def predict(self, *inputs) -> NDArray:
        """The backbone's prediction (inference mode: running statistics, no dropout)."""
        vm = self._require_vm("predict")
        if len(inputs) != len(self.input_vars):
            raise ValueError(f"Trainer.predict: expected {len(self.input_vars)} input(s), got {len(inputs)}")
        inputs = self._batch(inputs, self.input_vars, "predict")
        out = vm["predict"](*inputs, *self.params, *self.states)
        return _nd(out[0] if self.state_num else out)

    def _batch(self, arrays, variables, where: str) -> list[np.ndarray]:
        out = []
        sizes: dict[str, int] = {}
        for a, v in zip(arrays, variables):
            sinfo: TensorStructInfo = v.struct_info
            # The compiled functions' argument policy (docs/arguments.md), applied here first so that the error
            # names the batch's variable: lists, other layouts and value-preserving casts are converted once.
            a, problem = conform(a, np.dtype(to_numpy(sinfo.dtype)))
            if problem:
                raise ArgumentError(f"Trainer.{where}: {v.name_hint!r}: {problem}")
            if sinfo.shape is not None and not _matches(a.shape, sinfo.shape, sizes):
                raise ArgumentError(f"Trainer.{where}: {v.name_hint!r}: expected shape "
                                    f"({', '.join(map(str, sinfo.shape))}{',' if len(sinfo.shape) == 1 else ''}), "
                                    f"got {a.shape}")
            out.append(a)
        return out

    def _label_targets(self) -> list[tuple[int, int]]:
        """``(position among the targets, number of classes)`` of every class-index target (an integer target one
        rank below the prediction, whose class axis is static); worked out once. The class axis is nll_loss's
        (and PyTorch's): 1 of (N, C, d1, ...), 0 of an unbatched (C,)."""
        pred = self.mod["predict"].ret_struct_info
        pred = pred.fields[0] if self.state_num else pred
        if not isinstance(pred, TensorStructInfo) or pred.shape is None or pred.ndim < 1:
            return []
        classes = pred.shape[min(1, pred.ndim - 1)]
        if not isinstance(classes, int):
            return []
        return [(i, classes) for i, v in enumerate(self.target_vars)
                if is_int(v.struct_info.dtype) and v.struct_info.ndim == pred.ndim - 1]

    def _check_labels(self, targets: list[np.ndarray]) -> None:
        """Class-index targets must name a class: 0 <= y < C (or the loss's ignore_index)."""
        if self._labels is None:
            self._labels = self._label_targets()
        for i, classes in self._labels:
            y = targets[i]
            # the common case, every label a class: one native pass (or two NumPy reductions without it)
            fits = _native.labels_in_range(y, 0, classes) if _native is not None else None
            if fits is None:
                fits = y.size == 0 or (y.min() >= 0 and y.max() < classes)
            if fits:
                continue
            bad = (y < 0) | (y >= classes)
            ignore = self.mod.attrs.get("ignore_index")
            if ignore is not None:
                bad &= y != ignore
            if bad.any():
                raise ValueError(f"Trainer.update_params: {self.target_vars[i].name_hint!r} holds labels outside "
                                 f"the {classes} classes [0, {classes}): {np.unique(y[bad])[:8].tolist()}")

    # -- checkpoints ------------------------------------------------------------------------------
    def save(self, path: str, extra: Optional[Mapping[str, Any]] = None) -> None:
        """Write parameters, states, optimizer state (and the optimizer's class name) and step to one ``.npz``,
        atomically (``checkpoint_io``: a crash or a SIGKILL at any moment leaves the old file intact). ``path``: a
        str, bytes or os.PathLike. Non-finite values are refused: a checkpoint is always one that :meth:`load`
        accepts."""
        path = checked_path(path, "Trainer.save")
        if self.params is None:
            raise RuntimeError("Trainer.save: no parameters yet")
        arrays = {"step": np.array(self.step, np.int64), "seed": np.array(self.seed, np.int64)}
        if self.optimizer_kind is not None:
            arrays["optimizer"] = np.array(self.optimizer_kind)
        arrays.update(self._checkpoint_arrays())
        bad = checkpoint_io.non_finite_problems(arrays)
        if bad:
            raise checkpoint_io.CheckpointError(f"Trainer.save: {path}: not written: " + "; ".join(bad))
        arrays.update(_extra_arrays(extra, path))
        checkpoint_io.write_checkpoint(path, arrays, "Trainer.save")

    def load(self, path: str) -> dict[str, np.ndarray]:
        """Restore what :meth:`save` wrote (exactly), including the step and the seed (which decide dropout
        keys), so training continues as if never stopped; returns the ``extra`` entries. Nothing is changed
        unless the whole file is right; a bad file raises one ``CheckpointError`` naming every problem, a file
        saved with another optimizer class (Adam into AdamW) included; other hyper-parameters (the learning
        rate) may differ. ``path``: a str, bytes or os.PathLike."""
        path = checked_path(path, "Trainer.load")
        where = f"Trainer.load: {path}"
        return self.restore(checkpoint_io.read_checkpoint(path, where), where)

    def restore(self, ckpt: checkpoint_io.Checkpoint, where: str = "") -> dict[str, np.ndarray]:
        """Take the arrays of a checkpoint already read (``checkpoint_io.read_checkpoint``) after checking
        they are this model's: names, shapes, dtypes, finite values. Needs no build(), so a caller can
        refuse a bad file before compiling. ``where`` starts error messages (default ``Trainer.restore: <path>``)."""
        where = where or f"Trainer.restore: {ckpt.path}"
        expected = {k: (a.shape, a.dtype) for k, a in self._checkpoint_arrays(template=True).items()}
        checkpoint_io.check_arrays(ckpt, expected, where, self.optimizer_kind)
        take = lambda prefix, variables: [ckpt.arrays[f"{prefix}/{v.name_hint}"].copy() for v in variables]  # noqa: E731
        self.params, self.states = take("param", self.param_vars), take("state", self.state_vars)
        self.optim_state = [ckpt.arrays[f"optim/{i}"].copy() for i in range(len(self.optim_state))]
        self.step, self.seed = ckpt.step, ckpt.seed
        return dict(ckpt.extra)

    def _checkpoint_arrays(self, template: bool = False) -> dict[str, np.ndarray]:
        """``param/<name>``, ``state/<name>``, ``optim/<i>``: the current arrays, or with ``template`` zero
        arrays of the expected shapes and dtypes (parameters may not exist yet)."""
        params = [np.zeros(_static_shape(v), to_numpy(v.struct_info.dtype)) for v in self.param_vars] \
            if template else self.params
        out = {f"param/{v.name_hint}": a for v, a in zip(self.param_vars, params)}
        out.update({f"state/{v.name_hint}": a for v, a in zip(self.state_vars, self.states)})
        out.update({f"optim/{i}": a for i, a in enumerate(self.optim_state)})
        return out


def _exact_spec(v) -> Optional[tuple[np.dtype, tuple[int, ...]]]:
    """``(dtype, shape)`` of a batch variable whose shape is static: an array with exactly these needs no
    conversion (its layout is the compiled function's to check, under the same argument policy); else None."""
    try:
        shape = _static_shape(v)
    except ValueError:  # a symbolic batch size: the general route binds it
        return None
    return np.dtype(to_numpy(v.struct_info.dtype)), shape


def _static_shape(v) -> tuple[int, ...]:
    s = v.struct_info
    if not isinstance(s, TensorStructInfo) or s.shape is None or not all(isinstance(d, int) for d in s.shape):
        raise ValueError(f"Trainer: {v.name_hint!r} needs a static shape, got {s}")
    return tuple(s.shape)


def _matches(shape: tuple[int, ...], dims, sizes: dict[str, int]) -> bool:
    if len(shape) != len(dims):
        return False
    for n, d in zip(shape, dims):
        if isinstance(d, SymDim) and d.is_var():
            if sizes.setdefault(d.name, n) != n:
                return False
        elif isinstance(d, int) and d != n:
            return False
    return True


def _checked_seed(seed: Any) -> int:
    """The seed as an int a checkpoint stores (int64) and the random generator takes (non-negative)."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"Trainer: seed must be an int, got {type(seed).__name__}")
    if not 0 <= int(seed) < 2 ** 63:
        raise ValueError(f"Trainer: seed must be in [0, 2**63), got {int(seed)}")
    return int(seed)


def _refuse_shared_names(variables: Sequence[Any]) -> None:
    """Parameters and states are saved, loaded and exported by name: two of one name would be stored once and
    loaded into both (a checkpoint would silently change the model)."""
    seen: dict[str, int] = {}
    for i, v in enumerate(variables):
        if v.name_hint in seen:
            raise ValueError(f"Trainer: parameters/states #{seen[v.name_hint]} and #{i} are both named "
                             f"{v.name_hint!r}; checkpoints and load_params/export_params key them by name: "
                             "give each a distinct name")
        seen[v.name_hint] = i


def _check_train_attrs(mod: IRModule) -> None:
    """``Trainer(train_mod)`` reads what SetupTrainer wrote among the module's attributes; a module parsed back
    from an edited text may lack one or hold another type. One ValueError names it and what SetupTrainer puts
    there, rather than a KeyError or a TypeError from inside (or a wrong count silently slicing the parameters)."""
    missing = object()

    def refuse(key: str, want: str, value: Any) -> None:
        got = "it has none" if value is missing else f"got {_short_repr(value)} ({type(value).__name__})"
        raise ValueError(f"Trainer: the module attribute {key} must be {want}, as SetupTrainer writes it; {got}")

    attrs = mod.attrs
    for key, least in (("input_num", 1), ("param_num", 1), ("state_num", 0), ("rng_key_num", 0)):
        value = attrs.get(key, missing)
        if not is_count(value, least):
            refuse(key, f"an int >= {least}", value)
    counted, taken = attrs["input_num"] + attrs["param_num"] + attrs["state_num"], len(mod["predict"].params)
    if counted != taken:
        raise ValueError(f"Trainer: the module attributes input_num + param_num + state_num = {counted}, but predict "
                         f"takes {taken} parameters")
    optim = attrs.get("optim_state", missing)
    if not isinstance(optim, (tuple, list)) or not all(_is_numeric_array(a) for a in optim):
        refuse("optim_state", "a tuple of arrays (the optimizer's initial state)", optim)
    init = attrs.get("state_init", {})
    if not isinstance(init, Mapping) or not all(isinstance(k, str) and _is_number(v) for k, v in init.items()):
        refuse("state_init", "a dict of state names to their fill values (numbers)", init)
    kind = attrs.get("optimizer_kind")
    if kind is not None and not isinstance(kind, str):
        refuse("optimizer_kind", "the optimizer's class name, a str", kind)


def is_count(value: Any, least: int = 0) -> bool:
    """Whether a module attribute is a count of at least ``least``: an int as the text format writes it
    (``"param_num": 4``) or NumPy gives it. ``int()`` would take 1.5 and True for 1 (training only the last
    parameters) and "4" for 4."""
    return not isinstance(value, bool) and isinstance(value, (int, np.integer)) and value >= least


def _is_number(value: Any) -> bool:
    return not isinstance(value, (bool, np.bool_)) and isinstance(value, (int, float, np.integer, np.floating))


def _is_numeric_array(value: Any) -> bool:
    try:
        dtype = np.asarray(value).dtype
        return dtype.kind in "biu" or is_floating(dtype)  # (bfloat16: an optimizer's state of a bfloat16 model)
    except ValueError:  # a ragged list
        return False


def _short_repr(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."
