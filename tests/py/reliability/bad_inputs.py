"""One bad input per row of docs/reliability.md that had no test of its own, and one per boundary besides, run
together in a child interpreter by ``test_bad_inputs.py`` (a crash would kill the child, not pytest, and name
the case it was running).

Run as ``python -m tests.py.reliability.bad_inputs``: prints a JSON line before each case (``start``) and one
after (its exception's type, the names of the classes it derives from, and its message).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import tempfile
from functools import lru_cache
from typing import Callable

import numpy as np

TMP = tempfile.mkdtemp(prefix="relax-mlir-bad-inputs-")


class CliExit(Exception):
    """A CLI run that ended with a non-zero exit code; the message is ``exit N: <standard error>``."""


def _cli(*argv: str) -> None:
    from relax_mlir.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(list(argv))
        except SystemExit as exc:  # argparse's own refusals
            code = exc.code
    if code:
        raise CliExit(f"exit {code}: {err.getvalue().strip().splitlines()[-1]}")


def _file(name: str, content: bytes) -> str:
    path = os.path.join(TMP, name)
    with open(path, "wb") as f:
        f.write(content)
    return path


def _tensor(shape, dtype="float32"):
    from relax_mlir.ir import TensorStructInfo

    return TensorStructInfo(shape, dtype)


def _var(name, shape, dtype="float32"):
    from relax_mlir.ir import Var

    return Var(name, _tensor(shape, dtype))


def _setup(loss_args=None, optimizer=None):
    from relax_mlir.training import SGD, CrossEntropyLoss, SetupTrainer

    return SetupTrainer(CrossEntropyLoss(), optimizer or SGD(0.1),
                        loss_args if loss_args is not None else [_tensor((4, 3)), _tensor((4,), "int64")])


@lru_cache(maxsize=None)
def _trainer(target: str):
    from relax_mlir.models import mlp
    from relax_mlir.training import Trainer

    trainer = Trainer(mlp(4, (6, 5, 3)), 4, _setup()).build(target)
    trainer.xavier_uniform_init_params(0)
    return trainer


@lru_cache(maxsize=None)
def _take(index_dtype: str = "int64"):
    from relax_mlir.backend import VirtualMachine, compile
    from relax_mlir.ir import IRModule
    from relax_mlir.script import from_source

    text = f'''
@R.function
def take(x: R.Tensor((4, 3), "float32"), i: R.Tensor((3,), "{index_dtype}")) -> R.Tensor((3, 3), "float32"):
    with R.dataflow():
        y = R.take(x, i, axis=0)
        R.output(y)
    return y
'''
    return VirtualMachine(compile(IRModule({"take": from_source(text)})))["take"]


def _no_source():
    namespace: dict = {}
    exec("from relax_mlir.script import relax as R\n"  # noqa: S102 - a function without source, on purpose
         "@R.function\ndef f(x: R.Tensor((2,), 'float32')):\n    return x\n", namespace)


def _parse(text: str):
    from relax_mlir.script import from_source

    return from_source(text)


def _mlp():
    from relax_mlir.models import mlp

    return mlp(4, (6, 5, 3))


def _checkpoint_of(content: bytes):
    from relax_mlir.models import mlp
    from relax_mlir.training import Trainer

    Trainer(mlp(4, (6, 5, 3)), 4, _setup()).load(_file("ckpt.npz", content))


def _nan_batch():
    x = np.zeros((4, 6), np.float32)
    x[2, 0] = np.nan
    _trainer("cpu").update_params(x, np.zeros(4, np.int64))


def _bb_outside():
    from relax_mlir.ir import BlockBuilder
    from relax_mlir.op import nn

    BlockBuilder().emit(nn.relu(_var("x", (2,))))


def _pass(make: Callable):
    return make()(_mlp())


def _transform():
    from relax_mlir import transform

    return transform


# name -> (boundary, thunk, expected exception class name (itself or a base), message regex)
CASES: dict[str, tuple[str, Callable[[], object], str, str]] = {
    "parser: syntax": ("text parser", lambda: _parse("@R.function\ndef f(x: R.Tensor((2,), 'float32'):\n  return x\n"),
                       "ParseError", r"^<string>:2:\d+: invalid syntax"),
    "parser: unknown op": ("text parser", lambda: _parse(
        "@R.function\ndef f(x: R.Tensor((2,), 'float32')):\n    return R.nope(x)\n"), "ParseError",
        r"^<string>:3:\d+: .*nope"),
    "parser: binary junk": ("text parser", lambda: _parse("\x00\xff\xfe"), "ParseError", r"^<string>:\d+:\d+: "),
    "script: no source": ("script front end", _no_source, "ValueError",
                          r"cannot read the source of 'f' .*parse text with relax_mlir.script.from_source"),
    "script: ir_module on a function": ("script front end", lambda: __import__(
        "relax_mlir.script", fromlist=["ir"]).ir.ir_module(lambda: 0), "TypeError",
        r"@I.ir_module decorates a class, got function"),
    "block builder: emit outside a function": ("BlockBuilder", _bb_outside, "BlockBuilderError",
                                               r"not inside `with bb.function"),
    "op: matmul shapes": ("op inference", lambda: __import__("relax_mlir.op", fromlist=["matmul"]).matmul(
        _var("a", (2, 3)), _var("b", (4, 5))), "ValueError", r"^relax.matmul: reduction dims differ: .*\(2, 3\) has "
                                                              r"3, .*\(4, 5\) has 4"),
    "op: a list operand": ("op inference", lambda: __import__("relax_mlir.op", fromlist=["add"]).add(
        _var("a", (2,)), [1, 2]), "TypeError", r"^relax.add: expected a Relax expression, got list"),
    "op: R.const beyond int64": ("op inference", lambda: __import__("relax_mlir.ir.expr", fromlist=["const"]).const(
        2**70), "ValueError", r"^R.const: the integer 1180591620717411303424 does not fit int64"),
    "op: R.const beyond float32": ("op inference", lambda: __import__("relax_mlir.ir.expr", fromlist=["const"])
                                   .const(1e39), "ValueError", r"^R.const: 1e\+39 overflows float32 \(largest "
                                                               r"3.403e\+38\); expected a float32 value, or give "
                                                               r"dtype='float64'$"),
    "op: R.const out of its dtype": ("op inference", lambda: __import__("relax_mlir.ir.expr", fromlist=["const"])
                                     .const(300, "int8"), "ValueError", r"^R.const: .*300.*int8"),
    "op: R.const a fraction into an integer dtype": ("op inference", lambda: __import__(
        "relax_mlir.ir.expr", fromlist=["const"]).const([2, 1.5], "int64"), "ValueError",
        r"^R.const: 1.5 is not representable in int64 \(the conversion would change it\)$"),
    "op: R.const a finite float to inf": ("op inference", lambda: __import__(
        "relax_mlir.ir.expr", fromlist=["const"]).const(1e20, "float16"), "ValueError",
        r"^R.const: 1e\+20 is not representable in float16"),
    "op: R.const NaN into an integer dtype": ("op inference", lambda: __import__(
        "relax_mlir.ir.expr", fromlist=["const"]).const(float("nan"), "int32"), "ValueError",
        r"^R.const: nan is not representable in int32"),
    "op: R.const 3.7 as bool": ("op inference", lambda: __import__(
        "relax_mlir.ir.expr", fromlist=["const"]).const(3.7, "bool"), "ValueError",
        r"^R.const: 3.7 is not representable in bool"),
    "pass: names as a string": ("pass options", lambda: _pass(lambda: _transform().DeadCodeElimination(
        entry_functions="backbone")), "TypeError", r"expected a list of function names, got the string 'backbone' "
                                                   r"\(write \['backbone'\]\)"),
    "pass: unknown function": ("pass options", lambda: _pass(lambda: _transform().DecomposeOpsForTraining(
        func_name="nope")), "ValueError", r"DecomposeOpsForTraining: the module has no function 'nope' \(it has: "
                                          r"backbone\)"),
    "pipeline: opt level": ("pass options", lambda: __import__("relax_mlir.backend.pipeline", fromlist=["x"])
                            .PipelineOptions(opt_level=7), "ValueError", r"opt_level must be 0, 1, 2 or 3, got 7"),
    "gradient: unknown function": ("Gradient", lambda: _pass(lambda: _transform().Gradient("nope")),
                                   "GradientError", r"Gradient: the module has no function 'nope'"),
    "loss: reduction": ("loss/optimizer constructors", lambda: __import__(
        "relax_mlir.training", fromlist=["x"]).CrossEntropyLoss(reduction="avg"), "ValueError",
        r"reduction must be one of 'mean', 'sum', 'none', got 'avg'"),
    "optimizer: negative lr": ("loss/optimizer constructors", lambda: __import__(
        "relax_mlir.training", fromlist=["x"]).SGD(-0.1), "ValueError", r"^SGD: lr must be a finite number >= 0, "
                                                                        r"got -0.1$"),
    "optimizer: beta of 1.5": ("loss/optimizer constructors", lambda: __import__(
        "relax_mlir.training", fromlist=["x"]).Adam(0.1, betas=(1.5, 0.9)), "ValueError",
        r"^Adam: betas\[0\] must be in \[0, 1\), got 1.5$"),
    "setup trainer: one loss arg": ("SetupTrainer", lambda: _setup([_tensor((4, 3))]), "TypeError",
                                    r"CrossEntropyLoss takes loss_args \(predictions, targets, \[weights\]\), got 1"),
    "setup trainer: prediction shape": ("SetupTrainer", lambda: _setup([_tensor((4, 7)), _tensor((4,), "int64")])(
        _mlp()), "ValueError", r"backbone output 0 \(out\) is Tensor\(\(4, 3\), float32\) but loss parameter 0 "
                               r"\(predictions\) is Tensor\(\(4, 7\), float32\)"),
    "trainer: unknown target": ("Trainer", lambda: __import__("relax_mlir.training", fromlist=["x"]).Trainer(
        _mlp(), 4, _setup()).build("gpu"), "ValueError", r"unknown target 'gpu'"),
    "trainer: float labels": ("Trainer", lambda: _trainer("cpu").update_params(
        np.zeros((4, 6), np.float32), np.zeros(4, np.float32)), "ValueError",
        r"'targets': expected dtype int64, got float32 \(an integer parameter takes no floats"),
    "trainer: labels out of range": ("Trainer", lambda: _trainer("cpu").update_params(
        np.zeros((4, 6), np.float32), np.array([0, 1, 2, 10**8])), "ValueError",
        r"labels outside the 3 classes \[0, 3\): \[100000000\]"),
    "trainer: NaN in the batch": ("Trainer", _nan_batch, "NonFiniteError",
                                  r"step 0 produced a non-finite loss \(nan\); input 'x' holds nan at \[2, 0\]: batch "
                                  r"index 2"),
    "compiled: float indices": ("compiled calls", lambda: _take()(np.zeros((4, 3), np.float32), np.zeros(3)),
                                "ArgumentError", r"take: parameter 'i' \(#1\): expected dtype int64, got float64 "
                                                 r"\(an integer parameter takes no floats"),
    "compiled: int64 index too wide for int32": ("compiled calls", lambda: _take("int32")(
        np.zeros((4, 3), np.float32), np.array([0, 2**40, 1])), "ArgumentError",
        r"take: parameter 'i' \(#1\): expected int32; the int64 value 1099511627776 at flat position 1 does not fit"),
    "compiled: index 10**11": ("compiled calls", lambda: _take()(np.zeros((4, 3), np.float32),
                                                                 np.array([0, 1, 10**11])), "IndexError",
                               r"100000000000"),
    "checkpoint: a text file": ("checkpoints", lambda: _checkpoint_of(b"w0 = 1\n"), "CheckpointError",
                                r"not a zip archive \(it starts with b'w0 = 1\\n'\)"),
    "checkpoint: truncated": ("checkpoints", lambda: _checkpoint_of(b"PK\x03\x04" + bytes(40)), "CheckpointError",
                              r"truncated or damaged"),
    "cli: unknown option": ("CLI options and data files", lambda: _cli("train", "--learning-rate", "1"), "CliExit",
                            r"^exit 2: relax-mlir: error: unrecognized arguments: --learning-rate 1$"),
    "cli: negative lr": ("CLI options and data files", lambda: _cli("train", "--lr", "-1"), "CliExit",
                         r"^exit 1: relax-mlir train: error: --lr -1.0: must be a positive number$"),
    "cli: data file of text": ("CLI options and data files", lambda: _cli(
        "train", "--data", _file("data.npz", b"1,2,3\n")), "CliExit",
        r"^exit 1: relax-mlir train: error: .*data.npz: not a zip archive \(it starts with b'1,2,3\\n'\); expected an "
        r".npz of arrays \(x_train, y_train, x_test, y_test, or x and y\)$"),
    "cli: resume from a text file": ("CLI options and data files", lambda: _cli(
        "train", "--resume", _file("resume.npz", b"hello\n")), "CliExit",
        r"^exit 1: relax-mlir train: error: --resume .*resume.npz: not a zip archive"),
}


def main() -> int:
    names = sys.argv[1:] or list(CASES)
    for name in names:
        print(json.dumps({"start": name}), flush=True)
        try:
            CASES[name][1]()
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which judges it
            bases = [c.__name__ for c in type(exc).__mro__]
            print(json.dumps({"case": name, "type": type(exc).__name__, "bases": bases, "message": str(exc)}),
                  flush=True)
        else:
            print(json.dumps({"case": name, "type": None, "bases": [], "message": "no error"}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
