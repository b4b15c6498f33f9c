"""Training: losses, optimizers, SetupTrainer and Trainer (TVM's ``relax.training``), and checkpointing."""

from .checkpoint import checkpoint, checkpoint_sequential
