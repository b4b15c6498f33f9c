"""Warm ``relax-mlir train`` runs of checkouts of this project alternated in fresh processes: the whole command's
wall time with the compile cache warm (issue 9's third target), steady on a host whose figures drift.

    git worktree add /tmp/old <commit>     # (copy relax_mlir/_callpath*.so into it if the build made one)
    python benchmarks/warm_train_ab.py /tmp/old . [--rounds 15]

Each checkout gets a cache directory of its own, warmed by one untimed run; each round then runs ``relax-mlir train
--timing`` once per checkout, in order, with ``PYTHONPATH`` set to the checkout and bytecode written (a checkout
whose ``.pyc`` files are not written compiles every module on every start). Printed: the median and min wall time
of the process and of what ``--timing`` reports since the process started, and the last ``--timing`` line.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time


def _run(checkout: str, cache: str) -> tuple[float, float, str]:
    env = {**os.environ, "PYTHONPATH": os.path.abspath(checkout), "RELAX_MLIR_CACHE_DIR": cache}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "relax_mlir.cli", "train", "--timing"], capture_output=True,
                          text=True, env=env, cwd=tempfile.gettempdir())
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{checkout}: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else 'failed'}")
    line = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.startswith("timing:")][-1]
    return wall, float(re.match(r"timing: ([\d.]+) s", line).group(1)), line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkouts", nargs="+", help="directories holding a checkout of this project")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        caches = {c: os.path.join(tmp, str(i)) for i, c in enumerate(args.checkouts)}
        for c in args.checkouts:
            _run(c, caches[c])  # (fills the cache and writes the bytecode)
        walls: dict[str, list[float]] = {c: [] for c in args.checkouts}
        reported: dict[str, list[float]] = {c: [] for c in args.checkouts}
        last: dict[str, str] = {}
        for _ in range(args.rounds):
            for c in args.checkouts:
                wall, since_start, last[c] = _run(c, caches[c])
                walls[c].append(wall)
                reported[c].append(since_start)
    for c in args.checkouts:
        print(f"{c}: process wall median {statistics.median(walls[c]):.3f} s, min {min(walls[c]):.3f} s; "
              f"--timing median {statistics.median(reported[c]):.3f} s, min {min(reported[c]):.3f} s "
              f"({args.rounds} rounds)\n  {last[c]}")


if __name__ == "__main__":
    main()
