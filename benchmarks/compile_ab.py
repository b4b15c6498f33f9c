"""Cold builds of two checkouts of this project alternated in fresh processes: the steady way to compare compile
times on a host whose figures move by a third between runs minutes apart.

    git worktree add /tmp/old <commit>     # (copy relax_mlir/_callpath*.so into it if the build made one)
    python benchmarks/compile_ab.py mlp-digits /tmp/old . [--rounds 15] [--jax]

Each round runs ``compile_time.py``'s cold worker (``Trainer.build()`` with an empty cache directory, after
``load_compiler()``) once per checkout, in order, with ``PYTHONPATH`` set to the checkout; ``--jax`` adds JAX's
compile of the same MLP step each round. Printed: the median and min seconds of each checkout.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def _worker(checkout: str, args: list[str], env: dict) -> float:
    script = os.path.join(checkout, "benchmarks", "compile_time.py")
    proc = subprocess.run([sys.executable, script, "--worker", *args], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": os.path.abspath(checkout), **env})
    if proc.returncode != 0:
        raise SystemExit(f"{checkout}: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else 'failed'}")
    return json.loads(proc.stdout.splitlines()[-1])["build"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workload", help="a workload of train_step.py (mlp-digits, cnn-8, ...)")
    parser.add_argument("checkouts", nargs="+", help="directories holding a checkout of this project")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--jax", action="store_true", help="time JAX's compile of the same MLP step too")
    args = parser.parse_args()
    times: dict[str, list[float]] = {c: [] for c in args.checkouts}
    jax: list[float] = []
    with tempfile.TemporaryDirectory(prefix="relax-mlir-ab-") as tmp:
        for r in range(args.rounds):
            for k, checkout in enumerate(args.checkouts):
                cache = os.path.join(tmp, f"{r}-{k}")
                times[checkout].append(_worker(checkout, ["build", args.workload], {"RELAX_MLIR_CACHE_DIR": cache}))
            if args.jax:
                jax.append(_worker(args.checkouts[0], ["jax", args.workload], {"JAX_PLATFORMS": "cpu"}))
    for checkout, ts in list(times.items()) + ([("jax", jax)] if jax else []):
        print(f"{checkout:<30} median {statistics.median(ts):.3f} s   min {min(ts):.3f} s   ({len(ts)} runs)")


if __name__ == "__main__":
    main()
