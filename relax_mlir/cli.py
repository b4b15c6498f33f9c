"""The ``relax-mlir`` command line.

    relax-mlir demo                     the end-to-end example that exists today (see README)
    relax-mlir print FILE [-f NAME]     parse a module in the text format, check it, print it back
    relax-mlir check FILE               parse and report every well-formedness problem
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Optional, Sequence


def _load(path: str):
    from .script import from_source

    if path == "-":
        return from_source(sys.stdin.read(), "<stdin>")
    with open(path, encoding="utf-8") as f:
        return from_source(f.read(), path)


def cmd_print(args: argparse.Namespace) -> int:
    from .ir import IRModule, check_well_formed

    mod = _load(args.file)
    check_well_formed(mod)
    if args.function:
        if not isinstance(mod, IRModule):
            raise ValueError("--function needs a module (an @I.ir_module class)")
        print(mod[args.function].script(args.function))
    else:
        print(mod.script() if isinstance(mod, IRModule) else mod.script())
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from .ir import check_well_formed

    check_well_formed(_load(args.file))
    print(f"{args.file}: well formed")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    import numpy as np
    from sklearn.datasets import load_digits

    from .interpreter import interpret
    from .ir import check_well_formed, structural_equal
    from .models import mlp
    from .script import from_source

    sizes = (64, *args.hidden, 10)
    mod = mlp(args.batch_size, sizes)
    print(mod.script("MLP"))
    check_well_formed(mod)
    if not structural_equal(from_source(mod.script()), mod):
        raise AssertionError("print -> parse did not give back an equal module")
    print("round trip: printed, parsed back, structurally equal and well formed")

    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    rng = np.random.default_rng(args.seed)
    weights = []
    for p in mod["backbone"].params[1:]:
        shape = tuple(p.struct_info.shape)
        weights.append((np.sqrt(6.0 / sum(shape)) * rng.uniform(-1, 1, shape)).astype(np.float32))
    batch = x[:args.batch_size]
    start = time.perf_counter()
    logits = interpret(mod, "backbone", batch, *weights)
    ms = (time.perf_counter() - start) * 1e3
    reference = batch
    for i in range(0, len(weights), 2):
        reference = reference @ weights[i] + weights[i + 1]
        if i + 2 < len(weights):
            reference = np.maximum(reference, 0)
    err = float(np.max(np.abs(logits - reference)))
    print(f"interpreted backbone: {args.batch_size} digits -> logits {logits.shape} in {ms:.2f} ms; "
          f"max |difference| from plain NumPy {err:.2e}")
    print("untrained accuracy on this batch: "
          f"{np.mean(logits.argmax(1) == digits.target[:args.batch_size]):.1%} (chance is about 10%)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="relax-mlir", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("demo", help="build the tutorial MLP, round-trip it and run it on digits")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--hidden", type=int, nargs="+", default=[128, 128], help="hidden layer widths")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(run=cmd_demo)

    p = sub.add_parser("print", help="parse a module in the text format, check it and print it back")
    p.add_argument("file", help="a file in the text format, or - for standard input")
    p.add_argument("-f", "--function", help="print only this function")
    p.set_defaults(run=cmd_print)

    p = sub.add_parser("check", help="parse a module and report every well-formedness problem")
    p.add_argument("file")
    p.set_defaults(run=cmd_check)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except (ValueError, OSError) as exc:  # user errors (bad text, ill-formed IR, missing file): no traceback
        print(f"relax-mlir {args.command}: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
