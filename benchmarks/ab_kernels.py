"""A/B of a compiler change on the large matmuls of the wide MLP's step: variants built side by side in one process,
rounds alternated (``ab_step.py`` does the same for whole training steps).

    python benchmarks/ab_kernels.py \\
        'import relax_mlir.backend.schedule.panels as p; p.PANEL_B = False' \\
        'import relax_mlir.backend.schedule.panels as p; p.PANEL_B = True' [--rounds 15] [--calls 10] [--threads 2]

Each variant is Python run just before its kernels are built (the disk cache is off and the in-process cache
cleared, so every variant compiles); what one sets stays set, so each should set everything it relies on. The
kernels are ``kernels.py``'s 256x1024x1024 products in their three gradient forms (``A B``, ``x^T g``, ``g w^T``),
each checked against NumPy. Printed: the median GFLOP/s of each kernel per variant.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ["RELAX_MLIR_CACHE"] = "0"  # every variant compiles: a cached library would ignore the variant's change
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kernels  # noqa: E402

_FORMS = {"matmul": "A B", "tn": "x^T g", "nt": "g w^T"}  # kernels.py's kinds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("variants", nargs="+", help="Python statements run before each variant's build")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    args = parser.parse_args()

    import numpy as np

    import relax_mlir
    from relax_mlir.backend.build import clear_cache

    rows = [r for r in kernels.matmuls() if "1024" in r[0]]
    rng = np.random.default_rng(0)
    inputs = [[rng.standard_normal(s).astype(np.float32) for s in shapes] for _, shapes, *_ in rows]
    built = []
    for code in args.variants:
        exec(compile(code, "<variant>", "exec"), {})
        clear_cache()
        fns = []
        for (name, shapes, body, ref, _, _), arrays in zip(rows, inputs):
            fn = relax_mlir.VirtualMachine(relax_mlir.compile(kernels._fn(shapes, body), num_threads=args.threads))["k"]
            np.testing.assert_allclose(fn(*arrays), ref(*arrays), rtol=2e-3, atol=2e-3)
            fns.append(fn)
        built.append(fns)
    times = [[[] for _ in rows] for _ in built]
    for _ in range(args.rounds):
        for fns, seen in zip(built, times):
            for fn, arrays, samples in zip(fns, inputs, seen):
                for _ in range(3):
                    fn(*arrays)
                for _ in range(args.calls):
                    start = time.perf_counter()
                    fn(*arrays)
                    samples.append(time.perf_counter() - start)
    print(f"threads {args.threads}; median GFLOP/s over {args.rounds} x {args.calls} calls, variants alternated")
    for code, seen in zip(args.variants, times):
        cells = [f"{_FORMS[row[4]]} {row[5] / statistics.median(s) / 1e9:6.1f}" for row, s in zip(rows, seen)]
        print("  ".join(cells), " ", code)


if __name__ == "__main__":
    main()
