"""Loss functions (TVM's ``relax.training.loss``): a loss object, called with the struct info (or Vars) of its
arguments, returns a Relax ``Function`` with one dataflow block computing the loss.

    func = CrossEntropyLoss(reduction="sum")(TensorStructInfo((64, 10), "float32"),
                                             TensorStructInfo((64,), "int64"))
    print(func)

    @R.function
    def cross_entropy_loss(predictions: R.Tensor((64, 10), dtype="float32"),
                           targets: R.Tensor((64,), dtype="int64")) -> R.Tensor((), dtype="float32"):
        R.func_attr({"global_symbol": "cross_entropy_loss"})
        with R.dataflow():
            log_probs: R.Tensor((64, 10), dtype="float32") = R.nn.log_softmax(predictions)
            loss: R.Tensor((), dtype="float32") = R.nn.nll_loss(log_probs, targets, reduction="sum")
            R.output(loss)
        return loss

Join a loss to a backbone with :func:`relax_mlir.training.utils.append_loss` (or the pass
``relax_mlir.transform.AppendLoss``). The numerics are those of ``shared/reference/training_semantics.md``.
"""

from __future__ import annotations

from typing import ClassVar, Literal, Optional, Sequence, Union

from .. import op
from ..ir.block_builder import BlockBuilder
from ..ir.dtype import is_float, is_int
from ..ir.expr import Expr, Function, Var
from ..ir.struct_info import StructInfo, TensorStructInfo

Reduction = Literal["mean", "sum", "none"]
ParamLike = Union[Var, StructInfo]

__all__ = ["Loss", "L1Loss", "MSELoss", "CrossEntropyLoss", "CategoricalCrossEntropyLoss"]


def _param(value: ParamLike, name: str, loss_name: str) -> Var:
    """A fresh parameter: named ``name`` for a struct info; a Var keeps its name and struct info (as TVM), but a
    new Var object is made so the loss function never shares variables with the caller's IR."""
    if isinstance(value, StructInfo):
        return Var(name, value)
    if isinstance(value, Var):
        return Var(value.name_hint, value.struct_info)
    raise TypeError(f"{loss_name}: {name} must be a relax Var or StructInfo, got {type(value).__name__}")


def _tensor(var: Var, loss_name: str) -> TensorStructInfo:
    sinfo = var.struct_info
    if not isinstance(sinfo, TensorStructInfo):
        raise TypeError(f"{loss_name}: {var.name_hint} must be a tensor, got {sinfo}")
    return sinfo


def _same_shape(predictions: Var, targets: Var, loss_name: str) -> None:
    """Refuse targets that would broadcast against the predictions (PyTorch warns of the same: predictions (N, 1)
    and targets (N,) make an (N, N) loss). Symbolic sizes that may be equal pass; a size 1 against another does
    not."""
    p, t = _tensor(predictions, loss_name), _tensor(targets, loss_name)
    if p.ndim == -1 or t.ndim == -1 or p.shape is None or t.shape is None:
        return
    bad = p.ndim != t.ndim or any(a != b and (isinstance(a, int) and isinstance(b, int) or 1 in (a, b))
                                  for a, b in zip(p.shape, t.shape))
    if bad:
        raise ValueError(f"{loss_name}: targets {t} and predictions {p} differ in shape (they would broadcast "
                         "into a loss of another shape); the targets must have the predictions' shape")


class Loss:
    """Base class of losses: ``Loss(loss_name, num_backbone_outputs, reduction="mean")``.

    ``reduction`` is ``"mean"`` (the mean over *all* elements, ``R.mean``), ``"sum"`` (``R.sum``, a 0-d result) or
    ``"none"`` (unreduced); anything else is a ``ValueError``. ``num_backbone_outputs`` is how many of the loss
    function's first parameters are backbone outputs (1 for every loss here); ``append_loss`` uses it.

    Write your own by subclassing: call ``super().__init__(name, num_backbone_outputs, reduction)`` and override
    :meth:`compute`, which receives the BlockBuilder (inside the function's dataflow block) and the parameters, and
    returns the loss expression; the last call it returns is bound as the function's output ``loss``. Use
    :meth:`_with_reduction` for the reduction. ``__call__(predictions, targets)`` makes the parameters; override it
    (calling :meth:`_make_function`) for other parameter lists. For example::

        class LogCoshLikeLoss(Loss):
            def __init__(self, reduction="mean"):
                super().__init__("log_square_loss", 1, reduction)

            def compute(self, bb, predictions, targets):
                d = bb.emit(op.subtract(predictions, targets), "diff")
                return self._with_reduction(op.log(op.add(op.multiply(d, d), const(1.0, "float32"))))
    """

    _valid_reductions: ClassVar[tuple[str, ...]] = ("mean", "sum", "none")
    #: A target label the loss skips (class-index losses set it); ``SetupTrainer`` records it for ``Trainer``.
    ignore_index: Optional[int] = None

    def __init__(self, loss_name: str, num_backbone_outputs: int, reduction: Reduction = "mean") -> None:
        if reduction not in self._valid_reductions:
            raise ValueError(f"{type(self).__name__}: reduction must be one of "
                             f"{', '.join(map(repr, self._valid_reductions))}, got {reduction!r}")
        if not isinstance(num_backbone_outputs, int) or num_backbone_outputs < 1:
            raise ValueError(f"{type(self).__name__}: num_backbone_outputs must be a positive int, "
                             f"got {num_backbone_outputs!r}")
        self._loss_name = loss_name
        self._num_backbone_outputs = num_backbone_outputs
        self._reduction = reduction

    @property
    def loss_name(self) -> str:
        """The function's name and ``global_symbol``."""
        return self._loss_name

    @property
    def reduction(self) -> str:
        return self._reduction

    @property
    def num_backbone_outputs(self) -> int:
        """How many of the loss function's first parameters are outputs of the backbone."""
        return self._num_backbone_outputs

    def __call__(self, predictions: ParamLike, targets: ParamLike) -> Function:
        """The loss function of ``(predictions, targets)`` (struct info, or Vars whose names are kept)."""
        return self._make_function([_param(predictions, "predictions", self._loss_name),
                                    _param(targets, "targets", self._loss_name)])

    def compute(self, bb: BlockBuilder, *params: Var) -> Expr:
        """The loss expression of the parameters; subclasses implement it (see the class docstring)."""
        raise NotImplementedError(f"{type(self).__name__} must implement compute(bb, *params) or __call__")

    def _make_function(self, params: Sequence[Var]) -> Function:
        """Build ``loss_name(params...)`` with one dataflow block whose output is ``compute``'s result."""
        bb = BlockBuilder()
        with bb.function(self._loss_name, list(params), attrs={"global_symbol": self._loss_name}):
            with bb.dataflow():
                loss = bb.emit_output(self.compute(bb, *params), "loss")
            bb.emit_func_output(loss)
        return bb.get()[self._loss_name]

    def _with_reduction(self, expr: Expr) -> Expr:
        """``expr`` reduced as ``reduction`` says: ``R.sum`` / ``R.mean`` over every axis, or unchanged."""
        if self._reduction == "sum":
            return op.sum(expr)
        if self._reduction == "mean":
            return op.mean(expr)
        return expr

    def __repr__(self) -> str:
        return f"{type(self).__name__}(reduction={self._reduction!r})"


class L1Loss(Loss):
    """``reduce(abs(predictions - targets))`` (``l1_loss``); "mean" averages over every element.

        lv = R.subtract(predictions, targets)
        loss = R.mean(R.abs(lv))          # lv1 = R.abs(lv); loss = R.mean(lv1)
    """

    def __init__(self, reduction: Reduction = "mean") -> None:
        super().__init__("l1_loss", 1, reduction)

    def compute(self, bb: BlockBuilder, predictions: Var, targets: Var) -> Expr:
        _same_shape(predictions, targets, self._loss_name)
        return self._with_reduction(op.abs(op.subtract(predictions, targets)))


class MSELoss(Loss):
    """``d = predictions - targets; reduce(d * d)`` (``mse_loss``, no 1/2 factor); "mean" over every element.

        diff = R.subtract(predictions, targets)
        lv = R.multiply(diff, diff)
        loss = R.mean(lv)
    """

    def __init__(self, reduction: Reduction = "mean") -> None:
        super().__init__("mse_loss", 1, reduction)

    def compute(self, bb: BlockBuilder, predictions: Var, targets: Var) -> Expr:
        _same_shape(predictions, targets, self._loss_name)
        diff = bb.emit(op.subtract(predictions, targets), "diff")
        return self._with_reduction(op.multiply(diff, diff))


class _WeightedLoss(Loss):
    """Shared by the cross-entropy losses: ``(predictions, targets, weights=None)`` and ``ignore_index``."""

    def __init__(self, loss_name: str, reduction: Reduction, ignore_index: int) -> None:
        super().__init__(loss_name, 1, reduction)
        if isinstance(ignore_index, bool) or not isinstance(ignore_index, int):
            raise TypeError(f"{type(self).__name__}: ignore_index must be an int, got {ignore_index!r}")
        self.ignore_index = ignore_index

    def __call__(self, predictions: ParamLike, targets: ParamLike,  # type: ignore[override]
                 weights: Optional[ParamLike] = None) -> Function:
        """The loss function of ``(predictions, targets[, weights])``; ``weights`` (C,) rescales each class."""
        params = [_param(predictions, "predictions", self._loss_name), _param(targets, "targets", self._loss_name)]
        if weights is not None:
            params.append(_param(weights, "weights", self._loss_name))
        for p in params:
            _tensor(p, self._loss_name)
        self._check(*params)
        return self._make_function(params)

    def _check(self, predictions: Var, targets: Var, weights: Optional[Var] = None) -> None:
        """Argument checks run before anything is built (the ops check the rest)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(reduction={self._reduction!r}, ignore_index={self.ignore_index})"


class CrossEntropyLoss(_WeightedLoss):
    """Softmax cross-entropy (``cross_entropy_loss``): ``CrossEntropyLoss(reduction="mean", ignore_index=-100)``.

    The class axis is PyTorch's: axis 1 of predictions (N, C) or (N, C, d1, ..., dk) (an image's per-pixel
    classes), axis 0 of unbatched predictions (C,). It is the axis ``nll_loss`` picks the class along, so the
    softmax runs over it too: ``log_softmax(predictions, axis=1)`` for rank >= 3, the default last axis (the same
    axis) below. (TVM normalises over the last axis whatever the rank, and so mixes two axes for rank >= 3.)

    The targets' form is read from their struct info:

    * **class indices**, an int tensor of one rank less than ``predictions`` ((N,) for (N, C), (N, d1, ...) for
      (N, C, d1, ...)): ``nll_loss(log_softmax(predictions), targets, weights, reduction, ignore_index)``. "mean"
      is nll_loss's weighted mean ``sum(-w[t] * logp[n, t]) / sum(w[t])`` over non-ignored targets (NaN if all
      are ignored, or the batch is empty).
    * **class probabilities or one-hot**, a tensor of the predictions' shape, int or float (PyTorch accepts this;
      the tutorial feeds one-hot labels): ``l = -sum(targets * log_softmax(predictions), axis=C's)`` (times
      ``weights`` per class before the sum, if given), then "mean" is ``mean(l)`` over N (and d1, ...), "sum"
      ``sum(l)``, "none" ``l`` of shape (N,) (or (N, d1, ...)). Int targets are cast to the predictions' dtype;
      ``ignore_index`` does not apply.

    IR (probability targets of rank 2, reduction "sum")::

        log_probs = R.nn.log_softmax(predictions)
        lv = R.astype(targets, "float32")
        lv1 = R.multiply(lv, log_probs)
        lv2 = R.sum(lv1, axis=[-1])
        lv3 = R.negative(lv2)
        loss = R.sum(lv3)
    """

    def __init__(self, reduction: Reduction = "mean", ignore_index: int = -100) -> None:
        super().__init__("cross_entropy_loss", reduction, ignore_index)

    @staticmethod
    def _is_probabilities(predictions: Var, targets: Var) -> bool:
        p, t = predictions.struct_info, targets.struct_info
        return p.ndim != -1 and p.ndim == t.ndim

    def _check(self, predictions: Var, targets: Var, weights: Optional[Var] = None) -> None:
        p, t = predictions.struct_info, targets.struct_info
        if self._is_probabilities(predictions, targets):
            if p.shape is not None and t.shape is not None and p.shape != t.shape:
                raise ValueError(f"{self._loss_name}: probability (one-hot) targets must have the predictions' "
                                 f"shape {p}, got {t}")
            if not (is_float(t.dtype) or is_int(t.dtype)):
                raise TypeError(f"{self._loss_name}: probability targets must be int or float, got {t.dtype}")
        elif not is_int(t.dtype):
            raise TypeError(f"{self._loss_name}: targets must be class indices (an int tensor of rank "
                            f"{p.ndim - 1}) or probabilities of the predictions' shape {p}, got {t}")
        elif p.ndim >= 3 and t.ndim == p.ndim - 1 and p.shape is not None and t.shape is not None:
            per_item = (p.shape[0], *p.shape[2:])
            if any(isinstance(a, int) and isinstance(b, int) and a != b for a, b in zip(per_item, t.shape)):
                raise ValueError(f"{self._loss_name}: class-index targets {t} do not fit predictions {p}: the class "
                                 f"axis is axis 1 (predictions (N, C, d1, ...), targets (N, d1, ...), as PyTorch), so "
                                 f"the targets' shape must be ({', '.join(map(str, per_item))}); move a last class "
                                 "axis to axis 1 first (R.permute_dims)")

    def compute(self, bb: BlockBuilder, predictions: Var, targets: Var, weights: Optional[Var] = None) -> Expr:
        rank = predictions.struct_info.ndim
        axis = 1 if rank >= 3 else -1  # the class axis (see the class docstring); -1 keeps TVM's IR for (N, C)
        log_probs = bb.emit(op.nn.log_softmax(predictions, axis=axis), "log_probs")
        if not self._is_probabilities(predictions, targets):
            return op.nn.nll_loss(log_probs, targets, weights, reduction=self._reduction,
                                  ignore_index=self.ignore_index)
        dtype = predictions.struct_info.dtype
        probs = targets if targets.struct_info.dtype == dtype else op.astype(targets, dtype)
        weighted = op.multiply(probs, log_probs)
        if weights is not None:
            # (N, C) * (C,) broadcasts over N; for (N, C, d1, ...) the weights become (C, 1, ...) first
            per_class = weights if rank < 3 else bb.emit(op.expand_dims(weights, list(range(1, rank - 1))))
            weighted = op.multiply(weighted, per_class)
        return self._with_reduction(op.negative(op.sum(weighted, axis=axis)))


class CategoricalCrossEntropyLoss(_WeightedLoss):
    """Cross-entropy with one-hot **integer** targets (N, C) (``categorical_cross_entropy_loss``), exactly TVM's.

    A non-int ``targets`` dtype is a ``TypeError``. If ``ignore_index >= 0`` the one-hot rows become class indices,
    ``t = reshape(argmax(targets, axis=1), (N,))``, and the loss is ``nll_loss(log_softmax(predictions), t,
    weights, reduction, ignore_index)``. Otherwise ``l = -log_softmax(predictions) * targets`` (times ``weights``
    if given) and ``reduce(l)``: "mean" then averages over all N*C elements, unlike nll_loss's weighted mean.

        log_probs = R.nn.log_softmax(predictions)
        lv = R.negative(log_probs)
        lv1 = R.astype(targets, "float32")
        lv2 = R.multiply(lv, lv1)
        loss = R.mean(lv2)
    """

    def __init__(self, reduction: Reduction = "mean", ignore_index: int = -100) -> None:
        super().__init__("categorical_cross_entropy_loss", reduction, ignore_index)

    def _check(self, predictions: Var, targets: Var, weights: Optional[Var] = None) -> None:
        t = targets.struct_info
        if not is_int(t.dtype):
            raise TypeError(f"{self._loss_name}: targets must be one-hot int/uint tensors, got dtype {t.dtype}")
        if self.ignore_index >= 0 and (t.ndim != 2 or t.shape is None):
            raise ValueError(f"{self._loss_name}: with ignore_index >= 0 the targets must be (N, C) with a known "
                             f"shape (they are turned into class indices), got {t}")

    def compute(self, bb: BlockBuilder, predictions: Var, targets: Var, weights: Optional[Var] = None) -> Expr:
        log_probs = bb.emit(op.nn.log_softmax(predictions), "log_probs")
        if self.ignore_index >= 0:
            n = targets.struct_info.shape[0]
            labels = bb.emit(op.reshape(op.argmax(targets, axis=1), (n,)), "labels")
            return op.nn.nll_loss(log_probs, labels, weights, reduction=self._reduction,
                                  ignore_index=self.ignore_index)
        # TVM casts to "float32"; the predictions' dtype is the same there and also works for float16/float64.
        lv: Expr = op.multiply(op.negative(log_probs), op.astype(targets, predictions.struct_info.dtype))
        if weights is not None:
            lv = op.multiply(bb.emit(lv), weights)  # (N, C) * (C,): broadcast over N
        return self._with_reduction(lv)
