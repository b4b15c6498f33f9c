"""Fuzz the text parser for longer than CI does: N mutated printed modules, random bytes and random text.

    python scripts/fuzz_parser.py 100000 [--seed 0] [--timeout 10] [--save-failures DIR]

Each example must parse or raise ``ParseError`` (``relax_mlir/testing/fuzz.py``); anything else, or an example
that runs past ``--timeout`` seconds (a hang), is a failure. Prints the counts (parsed, refused, failed) and each
distinct failure (type and message) with how often it came and the shortest text that caused it; exits 1 if any.
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import signal
import sys
import time
import warnings


class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang()


def _example(rng: random.Random, seeds, k: int) -> str:
    from relax_mlir.testing.fuzz import decode, mutate

    if k % 10 < 8:
        return mutate(rng.choice(seeds), rng)
    if k % 10 == 8:
        return decode(bytes(rng.randrange(256) for _ in range(rng.randrange(400))))
    return "".join(chr(rng.choice((rng.randrange(32, 127), rng.randrange(0x110000) & 0xD7FF, 10)))
                   for _ in range(rng.randrange(200)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("count", type=int, help="examples to try")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=int, default=10, help="seconds an example may take before it is a hang")
    parser.add_argument("--save-failures", metavar="DIR", help="write the shortest text of each failure there")
    args = parser.parse_args()
    from relax_mlir.testing.fuzz import parse_or_refuse, seed_texts

    warnings.simplefilter("ignore", SyntaxWarning)  # Python's own, about odd literals in mutated text
    seeds, rng = seed_texts(), random.Random(args.seed)
    signal.signal(signal.SIGALRM, _alarm)
    counts: collections.Counter = collections.Counter()
    failures: dict[tuple[str, str], list] = {}
    start = time.perf_counter()
    for k in range(args.count):
        text = _example(rng, seeds, k)
        signal.alarm(args.timeout)
        try:
            error = parse_or_refuse(text)
        except _Hang:
            error = TimeoutError(f"no answer within {args.timeout} s")
        finally:
            signal.alarm(0)
        if error is None:
            counts["handled"] += 1
            continue
        counts["failed"] += 1
        entry = failures.setdefault((type(error).__name__, str(error).splitlines()[0][:120] if str(error) else ""),
                                    [0, text])
        entry[0] += 1
        entry[1] = min(entry[1], text, key=len)
    seconds = time.perf_counter() - start
    refused = _refused(seeds, args)
    print(f"{args.count} examples (seed {args.seed}) in {seconds:.1f} s: {counts['handled']} parsed or refused "
          f"with ParseError, {counts['failed']} failed ({len(failures)} distinct)")
    print(f"(of the mutated modules in a 2000-example sample, {refused} were refused by checks past Python's syntax)")
    for n, ((kind, message), (times, text)) in enumerate(sorted(failures.items(), key=lambda kv: -kv[1][0])):
        print(f"\n{times}x {kind}: {message}\n--- shortest text ---\n{text}")
        if args.save_failures:
            os.makedirs(args.save_failures, exist_ok=True)
            with open(os.path.join(args.save_failures, f"failure-{n}.relax"), "w") as f:
                f.write(text)
    return 1 if failures else 0


def _refused(seeds, args) -> int:
    """How many mutants of a fixed sample the parser itself refuses (not Python's syntax): the fuzzer's depth."""
    from relax_mlir.script.parser import ParseError, from_source
    from relax_mlir.testing.fuzz import mutate

    rng, deep = random.Random(args.seed), 0
    for _ in range(2000):
        try:
            from_source(mutate(rng.choice(seeds), rng))
        except ParseError as exc:
            deep += "invalid syntax" not in str(exc)
        except Exception:  # noqa: BLE001 - counted as failures above
            pass
    return deep


if __name__ == "__main__":
    sys.exit(main())
