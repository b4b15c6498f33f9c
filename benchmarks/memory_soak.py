"""Resident memory over a long run: 20,000 training steps, then 200 compiles of different modules.

    python benchmarks/memory_soak.py [--steps 20000] [--compiles 200] [--cache on|off]

Prints RSS (``/proc/self/statm``) at regular points, the growth from the first point after warm-up to the
last, and per compile. The steps are the tutorial MLP's (64 -> 128 -> 128 -> 10, batch 64, SGD); the compiles
are small modules that differ by a constant (so no cache, in-process or on disk, can answer one from another),
each called once and dropped, then all of them compiled again. With ``--cache off`` every compile goes through MLIR
and LLVM (an ExecutionEngine per module); with ``on`` (a fresh cache directory) each module is also written to disk,
and compiled again it is loaded back as a library.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE / 2 ** 20


def soak_steps(steps: int) -> list[tuple[int, float]]:
    from relax_mlir.ir.struct_info import TensorStructInfo
    from relax_mlir.models import mlp
    from relax_mlir.training import SGD, CrossEntropyLoss, SetupTrainer, Trainer

    batch = 64
    setup = SetupTrainer(CrossEntropyLoss(reduction="sum"), SGD(0.01, weight_decay=0.01),
                         [TensorStructInfo((batch, 10), "float32"), TensorStructInfo((batch,), "int64")])
    trainer = Trainer(mlp(batch, (64, 128, 128, 10)), 6, setup)
    trainer.build()
    trainer.xavier_uniform_init_params()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, 64)).astype(np.float32)
    y = rng.integers(0, 10, batch).astype(np.int64)
    points = []
    for step in range(steps + 1):
        if step % max(1, steps // 10) == 0:
            points.append((step, rss_mb()))
        trainer.update_params(x, y)
        if step % 1000 == 0:
            trainer.predict(x)
    return points


MODULE = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((16, 16), "float32")) -> R.Tensor((16, 16), "float32"):
        with R.dataflow():
            y = R.multiply(x, R.const({c}, "float32"))
            z = R.nn.relu(R.add(y, x))
            R.output(z)
        return z
"""


def soak_compiles(compiles: int) -> list[tuple[int, float]]:
    import relax_mlir as rm
    from relax_mlir.script import from_source

    x = np.ones((16, 16), np.float32)
    points = []
    for i in range(compiles + 1):
        if i % max(1, compiles // 10) == 0:
            gc.collect()
            points.append((i, rss_mb()))
        c = 1.0 + i / 1024
        vm = rm.VirtualMachine(rm.compile(from_source(MODULE.format(c=repr(c)), "soak")))
        out = vm["main"](x)
        assert abs(float(out[0, 0]) - (c + 1.0)) < 1e-6, (i, out[0, 0])
        del vm, out
    return points


def soak_reloads(compiles: int) -> list[tuple[int, float]]:
    """The same modules as :func:`soak_compiles`, compiled again after the in-process cache let them go: with the
    on-disk cache each comes back as a loaded library."""
    from relax_mlir.backend.build import clear_cache

    clear_cache()
    return soak_compiles(compiles)


def report(title: str, points: list[tuple[int, float]], unit: str) -> None:
    print(f"{title}")
    for n, mb in points:
        print(f"  {unit} {n:>6}: RSS {mb:8.1f} MB")
    half = points[len(points) // 2]  # by then imports, lazy initialisation and the bounded caches are done
    grow, span = points[-1][1] - half[1], points[-1][0] - half[0]
    print(f"  growth over the second half: {grow:+.1f} MB over {span} {unit}s "
          f"({1024 * grow / max(span, 1):+.2f} KB each)")

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20000)
    ap.add_argument("--compiles", type=int, default=200)
    ap.add_argument("--cache", choices=("on", "off"), default="off")
    args = ap.parse_args()
    if args.cache == "off":
        os.environ["RELAX_MLIR_CACHE"] = "0"
    else:
        os.environ["RELAX_MLIR_CACHE_DIR"] = tempfile.mkdtemp(prefix="relax-mlir-soak-")
    if args.steps:
        report(f"training steps (tutorial MLP, batch 64), cache {args.cache}", soak_steps(args.steps), "step")
    if args.compiles:
        report(f"compiles of different modules, cache {args.cache}", soak_compiles(args.compiles), "compile")
        report(f"the same modules compiled again, cache {args.cache}", soak_reloads(args.compiles), "compile")


if __name__ == "__main__":
    main()
