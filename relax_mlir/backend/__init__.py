"""MLIR side of relax-mlir: lowering pipelines (``pipeline``), matmul schedules (``schedule``) and the
ExecutionEngine runtime with its calling convention (``runtime``). Import the submodules directly."""
