"""Seconds to get a runnable training step: cold compile, warm (on-disk cache) compile, ahead-of-time load,
next to JAX's ``jit(step).lower(...).compile()``; every figure from a fresh process.

    python benchmarks/compile_time.py [--runs 5] [--only mlp-digits,cnn-8]

Workloads are ``train_step.py``'s (``mlp-digits`` is the tutorial's MLP as ``relax-mlir train`` runs it, 64-128-
128-10 batch 64; ``cnn-8`` is ``relax-mlir train --model cnn``); the module compiled is what a ``Trainer``
compiles (``update_params`` and ``predict``, from ``SetupTrainer``). Per run and workload:

    cold    a new process, an empty cache directory: ``Trainer.build()``, after ``load_compiler()`` (loading MLIR's
            bindings and the compiler's modules, ~0.13 s, is timed apart as ``load``, as JAX's compile is timed
            after ``import jax`` and its backend's start; SetupTrainer's work is not counted)
    load    in the cold run's process: ``relax_mlir.backend.load_compiler()``, which a first compile does itself
    warm    a new process, the cache directory a cold run filled: ``Trainer.build()``
    aot     a new process: ``relax_mlir.runtime.load_module(step.so)`` (the library ``export_library`` wrote)
    jax     a new process: ``jax.jit(update).lower(params, x, y).compile()`` of the same MLP step

Printed: the median (min-max) of each over ``--runs`` runs, and the issue's targets (cold MLP < 0.5 s, cold
CNN < 1.5 s, warm < 0.05 s).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_step import LR, WD, WORKLOADS, jax_update, make_data  # noqa: E402

TARGETS = {("mlp", "cold"): 0.5, ("cnn", "cold"): 1.5, ("mlp", "warm"): 0.05, ("cnn", "warm"): 0.05}


# --- workers (each in a fresh process; prints one JSON line) -------------------------------------------------------
def _trainer(name: str):
    from relax_mlir.ir.struct_info import TensorStructInfo
    from relax_mlir.models import cnn, mlp
    from relax_mlir.training import SGD, CrossEntropyLoss, SetupTrainer, Trainer

    kind, batch, shape = WORKLOADS[name]
    backbone = mlp(batch, shape) if kind == "mlp" else cnn(batch, shape, (8, 16), 10)
    setup = SetupTrainer(CrossEntropyLoss(reduction="sum"), SGD(LR, weight_decay=WD),
                         [TensorStructInfo((batch, 10), "float32"), TensorStructInfo((batch,), "int64")])
    return Trainer(backbone, len(make_data(name)["params"]), setup)


def work_build(name: str, export: str = "") -> dict:
    t0 = time.perf_counter()
    trainer = _trainer(name)
    t1 = time.perf_counter()
    from relax_mlir.backend import load_compiler

    load_compiler()  # MLIR's bindings and the compiler's modules, timed apart (JAX's figure follows `import jax`)
    t2 = time.perf_counter()
    trainer.build()
    t3 = time.perf_counter()
    if export:
        trainer.vm.executable.export_library(export)
    from relax_mlir.backend import disk_cache

    return {"setup": t1 - t0, "import": t2 - t1, "build": t3 - t2, "stats": dict(disk_cache.STATS)}


def work_load(path: str) -> dict:
    t0 = time.perf_counter()
    from relax_mlir.runtime import load_module

    t1 = time.perf_counter()
    lib = load_module(path)
    t2 = time.perf_counter()
    assert "update_params" in lib and not any(m.startswith("mlir") for m in sys.modules)
    return {"import": t1 - t0, "load": t2 - t1}


def work_jax(name: str) -> dict:
    import jax
    import jax.numpy as jnp

    data = make_data(name)
    args = ([jnp.asarray(p) for p in data["params"]], jnp.asarray(data["x"]), jnp.asarray(data["y"]))
    jax.block_until_ready(args)
    t0 = time.perf_counter()
    jax.jit(jax_update()).lower(*args).compile()
    return {"build": time.perf_counter() - t0}


# --- the parent ---------------------------------------------------------------------------------------------------
def _run(args: list[str], env: dict) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--worker", *args], capture_output=True, text=True,
                          env={**os.environ, **env})
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "failed"}
    return json.loads(proc.stdout.splitlines()[-1])


def measure(name: str, runs: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"cold": [], "load": [], "warm": [], "aot": [], "jax": []}
    with tempfile.TemporaryDirectory(prefix="relax-mlir-bench-") as tmp:
        warm_dir, lib = os.path.join(tmp, "warm"), os.path.join(tmp, "step.so")
        first = _run(["build", name, lib], {"RELAX_MLIR_CACHE_DIR": warm_dir})
        if "error" in first:
            raise SystemExit(f"{name}: {first['error']}")
        print(f"  {name}: SetupTrainer {first['setup']:.2f} s (not counted)")
        for i in range(runs):
            cold = _run(["build", name], {"RELAX_MLIR_CACHE_DIR": os.path.join(tmp, f"cold{i}")})
            times["cold"].append(cold["build"])
            times["load"].append(cold["import"])
            warm = _run(["build", name], {"RELAX_MLIR_CACHE_DIR": warm_dir})
            assert warm["stats"]["hits"] == 1, warm["stats"]
            times["warm"].append(warm["build"])
            times["aot"].append(_run(["load", lib], {})["load"])
            if WORKLOADS[name][0] == "mlp":
                jax_run = _run(["jax", name], {"JAX_PLATFORMS": "cpu"})
                if "error" in jax_run:
                    print(f"  jax skipped: {jax_run['error']}")
                else:
                    times["jax"].append(jax_run["build"])
    return {k: v for k, v in times.items() if v}


def report(name: str, times: dict[str, list[float]]) -> None:
    kind = WORKLOADS[name][0]
    print(f"\n{name}: seconds, median (min-max) of {len(times['cold'])} fresh processes")
    for what, ts in times.items():
        target = TARGETS.get((kind, what))
        verdict = "" if target is None else \
            f"   target < {target:g} s: {'met' if statistics.median(ts) < target else 'NOT met'}"
        print(f"  {what:<5} {statistics.median(ts):8.3f} ({min(ts):.3f}-{max(ts):.3f}){verdict}")
    cold_and_load = [c + lo for c, lo in zip(times["cold"], times["load"])]
    print(f"  cold + load {statistics.median(cold_and_load):.3f} ({min(cold_and_load):.3f}-{max(cold_and_load):.3f}): "
          "a first compile in a new process that did not load the compiler first")
    if "jax" in times:
        print(f"  cold / jax: {statistics.median(times['cold']) / statistics.median(times['jax']):.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", default="mlp-digits,cnn-8", help="comma-separated workloads of train_step.py")
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        job, rest = args.worker[0], args.worker[1:]
        print(json.dumps({"build": lambda: work_build(*rest), "load": lambda: work_load(*rest),
                          "jax": lambda: work_jax(*rest)}[job]()))
        return
    names = [n for n in args.only.split(",") if n]
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        parser.error(f"unknown workloads {unknown}; known: {', '.join(WORKLOADS)}")
    for name in names:
        report(name, measure(name, args.runs))


if __name__ == "__main__":
    main()
