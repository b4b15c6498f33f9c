"""How cold compile time grows with a function's length: k layers of three kinds, each compiled in a fresh process.

    python benchmarks/compile_growth.py [--only perm,mlp,resnet] [--sizes 10 25 50 100 200]

Kinds: ``perm``, k ``permute_dims`` + ``softmax`` pairs whose results are all returned (many separate tensors: the
case docs/compile_time.md quotes); ``mlp``, k dense layers of 64 with ReLU; ``resnet``, k residual blocks of a 3x3
convolution, inference batch norm and ReLU. Printed: the wall and CPU seconds of ``relax_mlir.compile`` (the compiler
loaded first, the disk cache off), and the growth exponent between successive sizes (1: linear).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys


def perm(k: int) -> str:
    body = "\n".join(f"            p{i} = R.permute_dims(a{i}, [0, 2, 1])\n"
                     f"            a{i + 1} = R.nn.softmax(p{i}, axis=-1)" for i in range(k))
    outs = ", ".join(f"a{i + 1}" for i in range(k))
    return f"""
@I.ir_module
class Module:
    @R.function
    def main(a0: R.Tensor((4, 16, 16), "float32")):
        with R.dataflow():
{body}
            out = ({outs},)
            R.output(out)
        return out
"""


def mlp(k: int) -> str:
    params = ", ".join(f'w{i}: R.Tensor((64, 64), "float32"), b{i}: R.Tensor((64,), "float32")' for i in range(k))
    body = "\n".join(f"            m{i} = R.matmul(h{i}, w{i})\n            c{i} = R.add(m{i}, b{i})\n"
                     f"            h{i + 1} = R.nn.relu(c{i})" for i in range(k))
    return f"""
@I.ir_module
class Module:
    @R.function
    def main(h0: R.Tensor((32, 64), "float32"), {params}):
        with R.dataflow():
{body}
            R.output(h{k})
        return h{k}
"""


def resnet(k: int) -> str:
    params = ", ".join(f'w{i}: R.Tensor((8, 8, 3, 3), "float32"), ' + ", ".join(
        f'{s}{i}: R.Tensor((8,), "float32")' for s in ("g", "be", "mm", "mv")) for i in range(k))
    body = "\n".join(f"            c{i} = R.nn.conv2d(h{i}, w{i}, padding=[1, 1, 1, 1])\n"
                     f"            bn{i} = R.nn.batch_norm(c{i}, g{i}, be{i}, mm{i}, mv{i}, axis=1)\n"
                     f"            n{i} = bn{i}[0]\n            r{i} = R.nn.relu(n{i})\n"
                     f"            h{i + 1} = R.add(r{i}, h{i})" for i in range(k))
    return f"""
@I.ir_module
class Module:
    @R.function
    def main(h0: R.Tensor((1, 8, 8, 8), "float32"), {params}):
        with R.dataflow():
{body}
            R.output(h{k})
        return h{k}
"""


KINDS = {"perm": perm, "mlp": mlp, "resnet": resnet}


def worker(kind: str, k: int) -> None:
    """One cold compile, in this fresh process: prints its wall and CPU seconds as JSON."""
    import time

    import relax_mlir
    from relax_mlir.backend import load_compiler
    from relax_mlir.script import from_source

    load_compiler()
    mod = from_source(KINDS[kind](k))
    wall, cpu = time.perf_counter(), time.process_time()
    relax_mlir.compile(mod)
    print(json.dumps({"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(KINDS))
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 25, 50, 100, 200])
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker[0], int(args.worker[1]))
        return
    env = dict(os.environ, RELAX_MLIR_CACHE="0")
    for kind in args.only.split(","):
        print(f"{kind}: k, wall s, CPU s, growth exponent of CPU time since the previous k")
        previous = None
        for k in args.sizes:
            out = subprocess.run([sys.executable, __file__, "--worker", kind, str(k)], env=env, check=True,
                                 capture_output=True, text=True).stdout
            t = json.loads(out.strip().splitlines()[-1])
            growth = "" if previous is None else f"{math.log(t['cpu'] / previous[1]) / math.log(k / previous[0]):.2f}"
            print(f"  {k:5d}  {t['wall']:8.3f}  {t['cpu']:8.3f}  {growth}", flush=True)
            previous = (k, t["cpu"])


if __name__ == "__main__":
    main()
