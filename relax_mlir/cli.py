"""The ``relax-mlir`` command line.

    relax-mlir train [options]          train an MLP (or a CNN) on digits through MLIR: the main job
    relax-mlir demo                     build, print, round-trip and interpret the tutorial's MLP
    relax-mlir print FILE [-f NAME]     parse a module in the text format, check it, print it back
    relax-mlir check FILE               parse and report every well-formedness problem
    relax-mlir emit FILE --stage S      print the module as MLIR at stage S (relax, linalg, bufferized, llvm, ...)
    relax-mlir export FILE -o LIB.so    compile the module to a shared library relax_mlir.runtime.load_module runs
    relax-mlir import MODEL -o OUT.py   import an ONNX model (.onnx) or a torch.export program (.pt2), print it
    relax-mlir opt FILE --passes P      run Relax passes ("ToNonDataflow,Gradient(func_name=main)") and print
    relax-mlir passes                   list the registered passes
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import gc
import os
import sys
import time
from typing import Optional, Sequence


def _load(path: str):
    from .script import from_source

    if path == "-":  # the bytes, decoded as a file's are (a locale's surrogate escapes said nothing useful)
        data, path = sys.stdin.buffer.read(), "<stdin>"
    else:
        with open(path, "rb") as f:
            data = f.read()
    bom = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0  # UTF-8 with a BOM, as Python reads it
    try:
        text = data[bom:].decode("utf-8")
    except UnicodeDecodeError as exc:
        start = bom + exc.start  # (an offset in the file, the BOM included)
        line = data[:start].count(b"\n") + 1
        raise ValueError(f"{path}:{line}: not UTF-8 text (byte {data[start]:#04x} at offset {start}); the "
                         "text format is UTF-8") from None
    return from_source(text, path, check_well_formed=False)  # each command checks it, reporting every problem


def cmd_print(args: argparse.Namespace) -> int:
    from .ir import IRModule, check_well_formed

    mod = _load(args.file)
    check_well_formed(mod)
    if args.function:
        if not isinstance(mod, IRModule):
            raise ValueError("--function needs a module (an @I.ir_module class)")
        if args.function not in mod:
            raise ValueError(f"--function: the module has no function {args.function!r} (it has: {', '.join(mod)})")
        print(mod[args.function].script(args.function))
    else:
        print(mod.script() if isinstance(mod, IRModule) else mod.script())
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from .ir import check_well_formed

    check_well_formed(_load(args.file))
    print(f"{args.file}: well formed")
    return 0


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def cmd_emit(args: argparse.Namespace) -> int:
    from .backend.build import to_mlir
    from .backend.pipeline import PipelineOptions
    from .ir import Function, IRModule, check_well_formed

    mod = _load(args.file)
    if isinstance(mod, Function):  # a lone @R.function is module function "main"
        mod = IRModule({"main": mod})
    check_well_formed(mod)
    try:
        options = PipelineOptions(opt_level=args.opt_level, num_threads=args.threads, timing=args.timing,
                                  verify_each=args.verify_each)
        text = to_mlir(mod, args.stage, args.function, options)
    except KeyError as exc:  # an unknown --function
        raise ValueError(exc.args[0]) from None
    print(text)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from . import compile as compile_module
    from .transform.utils import reachable
    from .ir import Function, IRModule, check_well_formed
    from .training.config import check_output_path

    # as train's --save: before the module is read and compiled, not after (standard input is no file to replace)
    check_output_path(args.output, "-o", ("the input file", None if args.file == "-" else args.file))
    mod = _load(args.file)
    if isinstance(mod, Function):
        mod = IRModule({"main": mod})
    check_well_formed(mod)
    if args.function:
        unknown = [f for f in args.function if f not in mod]
        if unknown:
            raise ValueError(f"--function: no function {', '.join(map(repr, unknown))} in {args.file}; "
                             f"functions: {', '.join(mod)}")
        keep = {name for f in args.function for name in reachable(mod, f)}
        mod = IRModule({name: mod[name] for name in mod if name in keep}, mod.attrs)
    compile_module(mod, opt_level=args.opt_level, num_threads=args.threads).export_library(args.output)
    print(f"wrote {args.output} ({', '.join(mod)})")
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
    if args.batch_size > len(digits.data):
        raise ValueError(f"--batch-size {args.batch_size}: the digits have {len(digits.data)} examples; expected at "
                         f"most that many")
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


def _parse_shape(text: str) -> tuple[str, tuple[int, ...]]:
    name, _, dims = text.partition("=")
    try:
        shape = tuple(int(d) for d in dims.split(","))
    except ValueError:
        shape = ()
    if not name or not shape or min(shape) < 0:
        raise argparse.ArgumentTypeError(f"expected NAME=D1,D2,... (for example x=8,3,32,32), got {text!r}")
    return name, shape


def import_model(path: str, shapes: Optional[dict] = None):
    """``from_onnx`` for ``.onnx``, ``from_exported_program`` of ``torch.export.load`` for ``.pt2``."""
    if path.endswith(".onnx"):
        from .frontend.onnx import ShapeDictError, from_onnx

        try:
            return from_onnx(path, shape_dict=shapes)
        except ShapeDictError as exc:  # said with --shape, not the Python argument shape_dict
            raise ValueError(exc.for_cli) from None
    if path.endswith(".pt2"):
        import torch

        from .frontend.torch import from_exported_program

        if shapes:
            raise ValueError("--shape applies to ONNX models; a .pt2 program has its shapes")
        if os.path.isdir(path):
            raise IsADirectoryError(f"{path}: a directory; expected a .pt2 file")
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path}: no such file")
        import zipfile

        if not zipfile.is_zipfile(path):  # (torch.export.load would log a traceback of its own first)
            raise ValueError(f"{path}: not an exported program torch.export.load can read (torch.export.save "
                             "writes a zip archive; this is not one)")
        with _torch_export_log() as logged:  # a zip torch.export.save did not write: torch logs the first error
            try:
                program = torch.export.load(path)
            except (zipfile.BadZipFile, RuntimeError, KeyError, EOFError, AssertionError) as exc:
                if "warnings above" in str(exc):  # torch's pointer to what it logged: the logged error instead
                    exc = next((r.exc_info[1] for r in logged if r.exc_info and r.exc_info[1] is not None), exc)
                # (without miniz's advice, "the checkpoint file is corrupted": it is not a checkpoint at all)
                detail = str(exc).split(" This is an internal miniz error", 1)[0].strip()
                raise ValueError(f"{path}: not an exported program torch.export.load can read "
                                 f"({type(exc).__name__}: {detail})") from None
        return from_exported_program(program)
    raise ValueError(f"{path}: expected a .onnx model or a .pt2 exported program (torch.export.save)")


@contextlib.contextmanager
def _torch_export_log():
    """Hold back what ``torch.export.load`` logs while it runs (a file that is a zip but not an exported program:
    a traceback of its own, before our one-line error) and give the records, whose first error is the cause."""
    import logging

    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    logger = logging.getLogger("torch.export")  # (torch gives it a stderr handler of its own)
    saved = logger.handlers, logger.propagate
    logger.handlers, logger.propagate = [Keep()], False
    try:
        yield records
    finally:
        logger.handlers, logger.propagate = saved


def cmd_import(args: argparse.Namespace) -> int:
    import numpy as np

    from ._files import write_atomically
    from .training.config import check_output_path

    # both before the import (not --params after -o was written); neither may replace the model or the other
    check_output_path(args.output, "-o", ("the model", args.model))
    check_output_path(args.params, "--params", ("the model", args.model), ("-o", args.output))
    mod, params, states = import_model(args.model, dict(args.shape or []))
    text = mod.script()
    if args.output:
        write_atomically(args.output, lambda f: f.write(text.encode()), "relax-mlir import", "a file name (model.py)")
    else:
        print(text)
    if args.params:
        arrays = {**{f"param/{k}": v for k, v in params.items()}, **{f"state/{k}": v for k, v in states.items()}}
        write_atomically(args.params, lambda f: np.savez(f, **arrays), "relax-mlir import", "a file name (.npz)")
    print(f"{args.model}: main takes {len(mod['main'].params) - len(params) - len(states)} input(s), "
          f"{len(params)} parameter(s), {len(states)} state(s)" + (f"; wrote {args.output}" if args.output else ""),
          file=sys.stderr)
    return 0


def cmd_opt(args: argparse.Namespace) -> int:
    from .ir import Function, IRModule, check_well_formed
    from .transform import parse_pipeline

    passes = parse_pipeline(args.passes)  # before reading the file: a bad pipeline is reported first
    mod = _load(args.file)
    if isinstance(mod, Function):  # a lone @R.function is the module function its global_symbol names
        name = mod.attrs.get("global_symbol", "main")
        if not isinstance(name, str):
            raise ValueError(f"{args.file}: the function's global_symbol is {name!r}; expected a string (the name "
                             "of the module function it becomes)")
        mod = IRModule({name: mod})
    check_well_formed(mod)  # an ill-formed input is named as such, not as whatever a pass makes of it
    for p in passes:
        try:
            mod = p(mod)
        except TypeError as exc:  # an option of the wrong kind met while running (a size bound to 2.5), in the
            if not str(exc).startswith(f"{p.name}:"):  # pass's words; any other TypeError is a bug: its traceback
                raise
            raise ValueError(f"--passes: {exc}") from None
    print(mod.script())
    return 0


def cmd_passes(args: argparse.Namespace) -> int:
    from .transform import list_passes

    for cls in list_passes():
        print(f"{cls.name:26} {(cls.__doc__ or '').strip().splitlines()[0]}")
    return 0


def cmd_train(args: argparse.Namespace) -> int:

    from .training.config import TrainConfig, check_output_path
    from .training.plot import plot
    from .training.run import train

    for option, value, model in (("--hidden", args.hidden, "mlp"), ("--channels", args.channels, "cnn")):
        if value is not None and args.model != model:  # (it was ignored without a word)
            raise ValueError(f"{option} shapes --model {model}; this run trains --model {args.model}")
    cfg = TrainConfig(model=args.model, hidden=tuple(args.hidden or (128, 128)),
                      channels=tuple(args.channels or (8, 16)),
                      optimizer=args.optimizer, lr=args.lr, weight_decay=args.weight_decay, momentum=args.momentum,
                      dampening=args.dampening, nesterov=args.nesterov,
                      betas=tuple(args.betas) if args.betas else None, eps=args.eps, reduction=args.reduction,
                      epochs=args.epochs, batch_size=args.batch_size, seed=args.seed,
                      data=args.data, target=args.target, opt_level=args.opt_level, save=args.save,
                      resume=args.resume, sync_batch_norm=args.sync_batch_norm, lr_schedule=args.lr_schedule,
                      lr_step_size=args.lr_step_size, lr_milestones=tuple(args.lr_milestones or ()) or None,
                      lr_gamma=args.lr_gamma, lr_eta_min=args.lr_eta_min, warmup_steps=args.warmup_steps,
                      warmup_start_factor=args.warmup_start_factor)
    check_output_path(args.plot, "--plot", ("--save", args.save), ("--data", args.data), ("--resume", args.resume))
    show_progress = args.progress if args.progress is not None else sys.stderr.isatty()
    started = time.perf_counter()
    try:
        history = train(cfg, progress=show_progress)
    except KeyboardInterrupt:
        saved = f"; the last checkpoint is {cfg.save}" if cfg.save else ""
        print(f"relax-mlir train: interrupted{saved}", file=sys.stderr)
        _abort_mpi_job()  # a signal to one rank of an MPI job: the others would wait in their all-reduce forever
        return 130
    if not _is_root():
        return 0  # rank 0 plots and reports for an MPI job
    if args.plot:
        data = os.path.basename(os.path.normpath(cfg.data)) if cfg.data else "digits"
        shape = "-".join(map(str, cfg.hidden if cfg.model == "mlp" else cfg.channels))
        schedule = f" {cfg.lr_schedule}" if cfg.lr_schedule != "constant" else ""
        warmup = f" after {cfg.warmup_steps} warm-up steps" if cfg.warmup_steps else ""
        plot(history, args.plot, f"relax-mlir train: {cfg.model} ({shape}) on {data}, {cfg.optimizer} "
                                 f"lr={cfg.lr}{schedule}{warmup}, batch {cfg.batch_size}, seed {cfg.seed}",
             loss_label=f"cross-entropy ({cfg.reduction} over the batch)")
        print(f"wrote {args.plot}")
    if history.accuracy:
        print(f"final test accuracy: {100 * history.accuracy[-1]:.2f}%")
    if args.timing:
        print(_timing(history, started))
    return 0


def _timing(history, started: float) -> str:
    """Where a ``train`` run's wall time went: since the process started (Linux: /proc; else since the command
    did), its steps, its evaluations, the Trainer's set-up and compile, and the rest (Python and imports, data)."""
    now = time.perf_counter()
    wall, since = now - started, "the command started"
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22: start time, in clock ticks
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        wall, since = max(wall, uptime - start_ticks / os.sysconf("SC_CLK_TCK")), "the process started"
    except (OSError, ValueError, IndexError):
        pass
    ran = len(history.eval_seconds)  # this run's epochs (a resumed history also holds the earlier ones' seconds)
    steps, evaluation = sum(history.seconds[len(history.seconds) - ran:]), sum(history.eval_seconds)
    rest = wall - steps - evaluation - history.build_seconds
    ratio = wall / (steps + evaluation) if steps + evaluation > 0 else float("inf")
    return (f"timing: {wall:.3f} s since {since}: steps {steps:.3f} s, evaluation {evaluation:.3f} s, set-up and "
            f"compile {history.build_seconds:.3f} s, the rest (Python, imports, data) {rest:.3f} s; the wall time "
            f"is {ratio:.1f}x the steps and evaluation")


def _add_train(sub) -> None:
    p = sub.add_parser("train", help="train a model on digits (or --data) through MLIR: the main job",
                       description="Defaults are the tutorial's: MLP 64-128-128-10 with ReLU, SGD lr 0.01, "
                                   "weight decay 0.01, summed cross-entropy, batch 64, Xavier init, 5 epochs, "
                                   "on scikit-learn's digits (80/20 split, fixed).")
    p.add_argument("--model", choices=["mlp", "cnn"], default="mlp",
                   help="mlp: dense layers with ReLU; cnn: conv2d 3x3 + batch_norm + relu + max_pool per stage")
    p.add_argument("--hidden", type=int, nargs="+", default=None, metavar="N",
                   help="MLP hidden widths (default 128 128; --model mlp only)")
    p.add_argument("--channels", type=int, nargs="+", default=None, metavar="C",
                   help="CNN channels per stage (default 8 16; --model cnn only)")
    g = p.add_argument_group("optimizer")
    g.add_argument("--optimizer", choices=["sgd", "momentum", "adam", "adamw"], default="sgd")
    g.add_argument("--lr", type=float, default=0.01, help="learning rate (default 0.01)")
    g.add_argument("--weight-decay", type=float, default=0.01,
                   help="L2 weight decay (decoupled for adamw; default 0.01)")
    # (the optimizer-specific ones default to None: given for another optimizer, they are refused, not ignored)
    g.add_argument("--momentum", type=float, help="momentum's momentum (default 0.9; --optimizer momentum only)")
    g.add_argument("--dampening", type=float, help="momentum's dampening (default 0; --optimizer momentum only)")
    g.add_argument("--nesterov", action="store_true", help="Nesterov momentum (--optimizer momentum only)")
    g.add_argument("--betas", type=float, nargs=2, metavar=("B1", "B2"),
                   help="Adam's betas (default 0.9 0.999; --optimizer adam or adamw only)")
    g.add_argument("--eps", type=float, help="Adam's epsilon (default 1e-8; --optimizer adam or adamw only)")
    g = p.add_argument_group("learning-rate schedule", "PyTorch's torch.optim.lr_scheduler, counted in optimizer "
                             "steps; a schedule's counts start after the warm-up")
    g.add_argument("--lr-schedule", choices=["constant", "step", "multistep", "exponential", "cosine", "linear"],
                   default="constant",
                   help="constant: --lr throughout (default); step: StepLR, x gamma every --lr-step-size steps; "
                        "multistep: MultiStepLR, x gamma at each of --lr-milestones; exponential: ExponentialLR, "
                        "x gamma every step; cosine: CosineAnnealingLR from --lr to --lr-eta-min over the run; "
                        "linear: from --lr to 0 over the run")
    # (the schedule-specific ones default to None: given for another schedule, they are refused, not ignored)
    g.add_argument("--lr-step-size", type=int, metavar="N", help="steps between decays (--lr-schedule step only)")
    g.add_argument("--lr-milestones", type=int, nargs="+", metavar="M",
                   help="the steps where the rate decays (--lr-schedule multistep only)")
    g.add_argument("--lr-gamma", type=float, metavar="G",
                   help="the decay factor (default 0.1; step, multistep, or exponential, where it must be given)")
    g.add_argument("--lr-eta-min", type=float, metavar="E",
                   help="the rate the cosine ends at (default 0; --lr-schedule cosine only)")
    g.add_argument("--warmup-steps", type=int, default=0, metavar="W",
                   help="a linear warm-up from --warmup-start-factor x --lr to --lr over the first W steps, "
                        "before the schedule (default 0: none)")
    g.add_argument("--warmup-start-factor", type=float, metavar="F",
                   help="the warm-up's first rate as a fraction of --lr, in (0, 1] (default 0.01)")
    p.add_argument("--reduction", choices=["sum", "mean"], default="sum", help="cross-entropy reduction")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--global-batch", "--batch-size", dest="batch_size", type=int, default=64, metavar="N",
                   help="examples per step over all MPI ranks (default 64, the tutorial's batch); each of K ranks "
                        "takes N/K. Fixed whatever K is, so the trajectory, the learning rate and checkpoints "
                        "do not depend on how many ranks run it")
    p.add_argument("--sync-batch-norm", action="store_true",
                   help="under mpiexec, the CNN's batch norm uses the global batch's statistics (as one process "
                        "would; about 3x the compute for two layers) instead of each rank's own")
    p.add_argument("--seed", type=int, default=0, help="initial parameters and batch order (default 0)")
    p.add_argument("--data", metavar="PATH",
                   help="a directory of MNIST/Fashion-MNIST IDX files (gzip or not) or an .npz (x_train, "
                        "y_train, x_test, y_test, or x and y); default: scikit-learn's digits")
    p.add_argument("--target", choices=["cpu", "numpy"], default="cpu",
                   help="cpu: compiled through MLIR; numpy: the reference interpreter")
    p.add_argument("--opt-level", type=int, default=2, choices=[0, 1, 2, 3])
    p.add_argument("--plot", metavar="PNG", help="write a PNG of the loss and accuracy curves")
    p.add_argument("--save", metavar="NPZ", help="write a checkpoint after every epoch")
    p.add_argument("--resume", metavar="NPZ", help="continue from a checkpoint written by --save")
    p.add_argument("--timing", action="store_true",
                   help="print where the wall time went (steps, evaluation, set-up and compile, the rest)")
    bar = p.add_mutually_exclusive_group()
    bar.add_argument("--progress", action="store_true", default=None,
                     help="show the progress bar (default: when standard error is a terminal)")
    bar.add_argument("--no-progress", dest="progress", action="store_false")
    p.set_defaults(run=cmd_train)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="relax-mlir", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    _add_train(sub)

    p = sub.add_parser("demo", help="build the tutorial MLP, round-trip it and run it on digits")
    p.add_argument("--batch-size", type=_positive_int, default=64, help="examples run (at most 1797, the digits)")
    p.add_argument("--hidden", type=_positive_int, nargs="+", default=[128, 128], help="hidden layer widths")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(run=cmd_demo)

    p = sub.add_parser("print", help="parse a module in the text format, check it and print it back")
    p.add_argument("file", help="a file in the text format, or - for standard input")
    p.add_argument("-f", "--function", help="print only this function")
    p.set_defaults(run=cmd_print)

    p = sub.add_parser("check", help="parse a module and report every well-formedness problem")
    p.add_argument("file")
    p.set_defaults(run=cmd_check)

    p = sub.add_parser("emit", help="print a module in the text format as MLIR at a stage of the pipeline")
    p.add_argument("file", help="a file in the text format, or - for standard input")
    p.add_argument("--stage", default="relax",
                   choices=["relax", "linalg", "fused", "scheduled", "bufferized", "llvm"],
                   help="relax: the relax dialect; linalg: after lowering; then the pipeline's stages")
    p.add_argument("-f", "--function", help="emit only this function (and the functions it calls)")
    p.add_argument("-O", "--opt-level", type=int, default=2, choices=[0, 1, 2, 3],
                   help="pipeline optimisation level (0: naive loops)")
    p.add_argument("--threads", type=_positive_int, default=None,
                   help="threads large ops may be split across (default: $RELAX_MLIR_NUM_THREADS or every core)")
    p.add_argument("--timing", action="store_true", help="print MLIR's pass timing for every stage on stderr")
    p.add_argument("--verify-each", action="store_true",
                   help="verify the IR after every MLIR pass and transform script (default: before each pipeline)")
    p.set_defaults(run=cmd_emit)

    p = sub.add_parser("export", help="compile a module to a shared library that relax_mlir.runtime.load_module "
                                      "runs with NumPy and ctypes alone (no MLIR)")
    p.add_argument("file", help="a file in the text format, or - for standard input")
    p.add_argument("-o", "--output", required=True, metavar="LIB.so", help="the library to write")
    p.add_argument("-f", "--function", action="append",
                   help="export only this function and its callees (repeatable; default: every function)")
    p.add_argument("-O", "--opt-level", type=int, default=2, choices=[0, 1, 2, 3])
    p.add_argument("--threads", type=_positive_int, default=None,
                   help="threads large ops may be split across (default: $RELAX_MLIR_NUM_THREADS or every core)")
    p.set_defaults(run=cmd_export)

    p = sub.add_parser("import", help="import an ONNX model (.onnx) or a torch.export program (.pt2) and print it "
                                      "in the text format")
    p.add_argument("model", help="model.onnx, or program.pt2 (torch.export.save)")
    p.add_argument("-o", "--output", metavar="OUT.py", help="write the module here (default: standard output)")
    p.add_argument("--params", metavar="PARAMS.npz", help="also write the parameter and state values "
                                                          "(param/<name>, state/<name>)")
    p.add_argument("--shape", type=_parse_shape, action="append", metavar="NAME=D1,D2,...",
                   help="fix the shape of an ONNX input with symbolic dims (repeatable)")
    p.set_defaults(run=cmd_import)

    p = sub.add_parser("opt", help="run Relax passes on a module and print the result")
    p.add_argument("file", help="a file in the text format, or - for standard input")
    p.add_argument("--passes", required=True, metavar="PIPELINE",
                   help='comma-separated pass names with options, e.g. "CanonicalizeBindings,Gradient(func_name=main)"'
                        " (relax-mlir passes lists them)")
    p.set_defaults(run=cmd_opt)

    p = sub.add_parser("passes", help="list the registered Relax passes (transform.PASSES) with a line each")
    p.set_defaults(run=cmd_passes)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    if argv is None:  # the command line (not a caller's process, whose heap is its own business):
        # the ~37000 objects the imports made are never garbage; frozen, the cyclic collector skips them, which
        # matters most when the interpreter exits: its collections over them were most of the exit's time (a warm
        # ``train`` took 37-40 ms from main's return to the process's end, several times that on a loaded host).
        # Garbage still goes by reference counts; only cycles among frozen objects would stay (until the exit).
        gc.freeze()
    args = build_parser().parse_args(argv)
    try:
        return _run(args)
    finally:
        if argv is None:
            gc.freeze()  # what the command made, too: the interpreter exits next


def _run(args: argparse.Namespace) -> int:
    try:
        return args.run(args)
    except RecursionError:  # a module nested deeper than Python's recursion allows (a chain of 1000 tuples)
        print(f"relax-mlir {args.command}: error: the module nests too deeply for this tool (Python's recursion "
              f"limit, {sys.getrecursionlimit()} frames, was reached); expected nesting at most a few hundred deep",
              file=sys.stderr)
        _abort_mpi_job()
        return 1
    except MemoryError as exc:  # a size asked for (--hidden 99999999999) that does not fit: one line, as the rest
        print(f"relax-mlir {args.command}: error: not enough memory for what was asked ({exc or 'MemoryError'})",
              file=sys.stderr)
        _abort_mpi_job()
        return 1
    except Exception as exc:  # noqa: BLE001 (only user errors end here: the rest is raised again, as it was)
        if not _is_user_error(exc):
            raise  # a bug in relax-mlir: its traceback is what a report of it needs
        print(f"relax-mlir {args.command}: error: {exc}", file=sys.stderr)
        _abort_mpi_job()
        return 1


def _is_user_error(exc: Exception) -> bool:
    """Whether an error is the user's (or the machine's), said in one line without a traceback: every refusal of
    a value is a ``ValueError`` (``ParseError``, ``WellFormedError``, ``PipelineError``, a pass's, a checkpoint's,
    an importer's...; a pass option of the wrong kind met while running is made one by ``cmd_opt``), a file that
    cannot be read or written an ``OSError``, a step that diverged a ``NonFiniteError``, a missing or failing C
    compiler (``export``) a ``LinkError`` holding its output. Anything else (a ``TypeError``, ``KeyError``,
    ``AssertionError``...) is a bug in relax-mlir, not in the input."""
    if isinstance(exc, (ValueError, OSError, FloatingPointError)):
        return True
    library = sys.modules.get("relax_mlir.backend.library")  # (loaded if it raised: not imported for every command)
    return library is not None and isinstance(exc, library.LinkError)


def _is_root() -> bool:
    """False on the ranks but 0 of an MPI job (mpi4py is imported only when one runs)."""
    mpi = sys.modules.get("mpi4py.MPI")
    return mpi is None or not mpi.Is_initialized() or mpi.COMM_WORLD.Get_rank() == 0


def _abort_mpi_job() -> None:
    """On an error in one rank of an MPI job, end every rank now: the others would wait in their next
    collective forever."""
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and mpi.Is_initialized() and mpi.COMM_WORLD.Get_size() > 1:
        sys.stderr.flush()
        mpi.COMM_WORLD.Abort(1)


if __name__ == "__main__":
    sys.exit(main())
