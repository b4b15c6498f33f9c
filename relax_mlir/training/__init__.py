"""Training: losses, optimizers, learning-rate schedules, SetupTrainer and Trainer (TVM's ``relax.training``),
and checkpointing."""

from .remat import checkpoint, checkpoint_sequential
from .loss import CategoricalCrossEntropyLoss, CrossEntropyLoss, L1Loss, Loss, MSELoss
from .optimizer import SGD, Adam, AdamW, MomentumSGD, Optimizer
from .lr_schedule import (CosineAnnealingLR, ExponentialLR, LinearLR, LRSchedule, MultiStepLR, SequentialLR,
                          StepLR)
from .utils import append_loss
from ..transform.append_loss import AppendLoss  # TVM's relax.training.AppendLoss: the pass, one object
from .setup_trainer import SetupTrainer
from .trainer import Trainer
from .nan_policy import NonFiniteError
from .checkpoint_io import CheckpointError
