"""Tests of the MLIR backend: pipeline stages, schedules and the ExecutionEngine runtime."""
