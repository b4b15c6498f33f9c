"""Peak bytes of live intermediate tensors of an N-layer MLP's gradient, with and without checkpointing.

    python benchmarks/bench_checkpoint.py

Each layer is relu(h @ w) on a 16x32 float32 activation; checkpointing uses about sqrt(N) segments
(checkpoint_sequential). Parameters and the returned gradients are excluded (see relax_mlir.analysis.memory).
"""

from __future__ import annotations

import math

from relax_mlir import transform
from relax_mlir.analysis import peak_live_bytes
from relax_mlir.models import deep_mlp


def main() -> None:
    print(f"{'N':>4} {'segments':>8} {'plain KiB':>10} {'checkpointed KiB':>17} {'ratio':>6}")
    for n in (4, 16, 64):
        plain = peak_live_bytes(transform.Gradient("f")(deep_mlp(n, segments=0))["f_adjoint"]).peak_bytes
        ckpt = peak_live_bytes(transform.Gradient("f")(deep_mlp(n))["f_adjoint"]).peak_bytes
        segments = math.isqrt(n - 1) + 1
        print(f"{n:>4} {segments:>8} {plain / 1024:>10.1f} {ckpt / 1024:>17.1f} {plain / ckpt:>6.2f}")


if __name__ == "__main__":
    main()
