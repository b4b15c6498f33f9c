"""Checkpoint files: the one place that writes and reads them (``Trainer.save``/``load``, ``relax-mlir train``).

A checkpoint is an uncompressed ``.npz`` (a zip of ``.npy`` members) holding ``format`` (the integer
:data:`FORMAT`), ``step``, ``seed``, ``optimizer`` (the optimizer's class name, ``"AdamW"``; files written before
it was recorded lack it, and still load), ``param/<name>``, ``state/<name>``, ``optim/<i>`` and free
``extra/<key>`` entries. A bfloat16 array (ml_dtypes'), which ``.npy`` cannot describe (``np.savez`` writes it as
raw ``|V2`` bytes and its dtype is lost), is stored as its bits (uint16) and named in a ``bfloat16`` entry (the
list of such names), so it reads back exactly; a file written before that, with raw ``|V2`` where the model
expects bfloat16, loads too. Reading never unpickles, and every way a file can be wrong (missing, empty,
truncated, not a zip, a zip that is not ours, a wrong ``format``, another model's arrays, another optimizer's state,
wrong dtypes, NaN/Inf values) raises one :class:`CheckpointError` that says what is wrong and what was expected, before
anything is compiled. A path is a str, bytes or os.PathLike; anything else (an int, which ``open`` would take
for a file descriptor) is a TypeError.

Writing is atomic: a uniquely named temporary file in the same directory, flushed and ``fsync``ed, renamed over
the target with ``os.replace`` and the directory synced. A writer killed at any moment (SIGKILL included) leaves
the previous file whole (and at worst a ``.<name>.tmp-*`` file beside it); two writers racing on one path leave
one of their two complete files.

Note: ``training/remat.py`` is *gradient* checkpointing (recomputing activations), a different thing.
"""

from __future__ import annotations

import os
import zipfile
import zlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Mapping, Optional, Sequence

import numpy as np

from .._files import checked_path, write_atomically
from ..ir.dtype import is_floating, to_numpy

FORMAT = 1
_BFLOAT16_ENTRY = "bfloat16"  # the names of the entries stored as the uint16 bits of bfloat16 values
_ZIP_MAGIC = b"PK\x03\x04"
_NPY_MAGIC = b"\x93NUMPY"


class CheckpointError(ValueError):
    """A checkpoint file that cannot be used: the message names the file, what is wrong and what was expected."""


@dataclass
class Checkpoint:
    """The arrays of a checkpoint file, read and checked to be a relax-mlir checkpoint (not yet against a model)."""

    path: str
    arrays: dict[str, np.ndarray]
    step: int = 0
    seed: int = 0
    optimizer: Optional[str] = None  # the class name of the optimizer that wrote it (None: not recorded)
    extra: dict[str, np.ndarray] = field(default_factory=dict)


# -- writing --------------------------------------------------------------------------------------------------------
def write_checkpoint(path: str, arrays: Mapping[str, np.ndarray], where: str = "save") -> None:
    """Write ``arrays`` (plus the ``format`` entry) to ``path`` atomically; see the module docstring."""
    entries = {"format": np.array(FORMAT, np.int64), **{k: np.asarray(v) for k, v in arrays.items()}}
    entries.update(_bfloat16_as_bits(entries))
    write_atomically(path, lambda f: np.savez(f, **entries), where, "a file name such as ckpt.npz")


def _bfloat16_as_bits(entries: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The bfloat16 entries as their uint16 bits, and the ``bfloat16`` entry naming them (nothing when there are
    none: a file without bfloat16 is written as before)."""
    names = [k for k, a in entries.items() if a.dtype.name == "bfloat16"]
    if not names:
        return {}
    return {**{k: entries[k].view(np.uint16) for k in names}, _BFLOAT16_ENTRY: np.array(names)}


# -- reading --------------------------------------------------------------------------------------------------------
def read_checkpoint(path: str, where: str) -> Checkpoint:
    """Read every array of the checkpoint at ``path`` (no unpickling), checking the file is a relax-mlir
    checkpoint: raises :class:`CheckpointError` (or ``FileNotFoundError`` for a missing file) otherwise.
    ``where`` starts every message and names the file (``"Trainer.load: ckpt.npz"``, ``"--resume ckpt.npz"``)."""
    path = checked_path(path, where)
    arrays = read_npz(path, where, CheckpointError, _CHECKPOINT)
    _check_format(arrays, where)
    _bfloat16_from_bits(arrays, where)
    for key in ("step", "seed"):
        value = arrays.get(key)
        if value is None or value.shape != () or value.dtype.kind not in "iu" or not 0 <= int(value) < 2**63:
            got = "nothing" if value is None else f"{value.dtype} {value.shape}" if value.shape != () or \
                value.dtype.kind not in "iu" else f"{int(value)}"
            # (a Trainer's step and seed are int64s: 2**64 - 1 as uint64 loaded, then its next save failed)
            raise CheckpointError(f"{where}: the {key!r} entry must be an integer scalar in [0, 2**63), got {got}")
    extra = {k[len("extra/"):]: v for k, v in arrays.items() if k.startswith("extra/")}
    return Checkpoint(path, arrays, int(arrays["step"]), int(arrays["seed"]),
                      _optimizer_entry(arrays, where), extra)


def _bfloat16_from_bits(arrays: dict[str, np.ndarray], where: str) -> None:
    """View back, in place, the entries the ``bfloat16`` entry names (uint16 bits, ``_bfloat16_as_bits``) as
    bfloat16, and drop that entry; a ``bfloat16`` entry that is not a list of uint16 entries is refused."""
    names = arrays.pop(_BFLOAT16_ENTRY, None)
    if names is None:
        return
    if names.ndim != 1 or names.dtype.kind != "U":
        raise CheckpointError(f"{where}: the 'bfloat16' entry is {names.dtype} {names.shape}; expected a list of "
                              "the names of the entries stored as bfloat16 bits (uint16)")
    for name in map(str, names):
        bits = arrays.get(name)
        if bits is None or bits.dtype.kind != "u" or bits.dtype.itemsize != 2:
            got = "no such entry" if bits is None else f"{bits.dtype}"
            raise CheckpointError(f"{where}: the 'bfloat16' entry names {name!r} ({got}); expected an entry of "
                                  "uint16 (the bits of bfloat16 values)")
        arrays[name] = bits.astype(np.uint16, copy=False).view(to_numpy("bfloat16"))  # (native byte order first)


def _optimizer_entry(arrays: Mapping[str, np.ndarray], where: str) -> Optional[str]:
    """The ``optimizer`` entry (a class name such as ``"Adam"``), or None for a file written before it was
    recorded."""
    value = arrays.get("optimizer")
    if value is None:
        return None
    if value.shape != () or value.dtype.kind != "U" or not str(value).isidentifier():
        raise CheckpointError(f"{where}: the 'optimizer' entry must be a class name (a string such as 'Adam'), "
                              f"got {value.dtype} " + (repr(str(value)) if value.shape == () else str(value.shape)))
    return str(value)


_CHECKPOINT = "a checkpoint (.npz) written by Trainer.save or --save"


def read_npz(path: str, where: str, error: type = CheckpointError, expected: str = "an .npz archive of arrays"
             ) -> dict[str, np.ndarray]:
    """Every array of the ``.npz`` at ``path``, read without unpickling. A missing file raises
    ``FileNotFoundError``; a directory, an empty file, a single ``.npy``, a file that is not a zip, a truncated
    or damaged archive, a member that is not ``.npy`` or holds Python objects raise ``error`` (a ValueError
    subclass) with a message that starts with ``where`` and ends with ``expected <expected>``. A ``path`` that is
    not a str, bytes or os.PathLike (an int would be taken for a file descriptor) is a TypeError."""
    path = checked_path(path, where)
    _check_file(path, where, error, expected)
    return _read_members(path, where, error, expected)


def _check_file(path: str, where: str, error: type, expected: str) -> None:
    """Missing, a directory, empty, or a file that is not a zip archive: said before zipfile sees it."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"{where}: no such file; expected {expected}")
    if os.path.isdir(path):
        raise error(f"{where}: is a directory; expected {expected}")
    with open(path, "rb") as f:
        head = f.read(8)
    if not head:
        raise error(f"{where}: the file is empty; expected {expected}")
    if head.startswith(_NPY_MAGIC):
        raise error(f"{where}: a single .npy array, not an .npz archive; expected {expected}")
    if not head.startswith(_ZIP_MAGIC):
        raise error(f"{where}: not a zip archive (it starts with {head!r}); expected {expected}")


def _read_members(path: str, where: str, error: type, expected: str) -> dict[str, np.ndarray]:
    """Every ``.npy`` member; a truncated or damaged archive, a member that is not ``.npy``, that appears twice or
    that holds Python objects (which would need unpickling) is refused."""
    try:
        with zipfile.ZipFile(path) as z:
            infos = z.infolist()
            others = [i.filename for i in infos if not i.filename.endswith(".npy")]
            if others:
                raise error(f"{where}: a zip archive that is not an .npz: it holds {_listing(others)}; expected "
                            f"only .npy arrays, {expected}")
            twice = sorted(n for n, k in Counter(i.filename for i in infos).items() if k > 1)
            if twice:  # a zip may hold a name twice (np.savez never writes that): which one is meant is unclear
                raise error(f"{where}: the archive holds {_listing(twice)} more than once; expected each array "
                            f"once, {expected}")
            return {i.filename[:-len(".npy")]: _read_member(z, i, where, error) for i in infos}
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as exc:
        raise error(f"{where}: truncated or damaged ({exc}); expected a complete {expected.removeprefix('a ')}") \
            from None


def _read_member(z: zipfile.ZipFile, info: zipfile.ZipInfo, where: str, error: type) -> np.ndarray:
    with z.open(info) as f:
        try:
            return np.lib.format.read_array(f, allow_pickle=False)
        except ValueError as exc:
            if "pickle" in str(exc) or "Object arrays" in str(exc):
                raise error(f"{where}: the entry {info.filename} holds Python objects, which loading never "
                            "unpickles; expected numeric arrays") from None
            raise error(f"{where}: the entry {info.filename} is not a readable .npy array ({exc})") from None


def _check_format(arrays: Mapping[str, np.ndarray], where: str) -> None:
    fmt = arrays.get("format")
    if fmt is None:
        raise CheckpointError(f"{where}: an .npz without a 'format' entry (it holds {_listing(sorted(arrays))}); "
                              f"expected a relax-mlir checkpoint (format {FORMAT})")
    if fmt.shape != () or fmt.dtype.kind not in "iu" or int(fmt) != FORMAT:
        shown = repr(fmt.item()) if fmt.size == 1 else f"an array of shape {fmt.shape}"
        raise CheckpointError(f"{where}: its 'format' entry is {shown} ({fmt.dtype}); expected the integer "
                              f"{FORMAT} (a relax-mlir checkpoint of format {FORMAT})")


def _listing(names: Sequence[str], limit: int = 6) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


# -- checking against a model ---------------------------------------------------------------------------------------
def check_arrays(ckpt: Checkpoint, expected: Mapping[str, tuple[tuple[int, ...], np.dtype]], where: str,
                 optimizer: Optional[str] = None) -> None:
    """Check that ``ckpt`` holds exactly the ``param/``, ``state/`` and ``optim/`` entries of ``expected`` (name
    -> (shape, dtype)) with those shapes and dtypes and finite values, and that it was written with the optimizer
    class ``optimizer`` (the trainer's, when known) if it records one; every problem is named in one error.
    ``where`` starts the message and names the file, as in :func:`read_checkpoint`.

    The optimizer's class is compared, not its hyper-parameters: resuming with another learning rate (a schedule)
    is legitimate, but another class would continue the same state under another update rule, silently when the
    layouts agree (Adam's and AdamW's do)."""
    other_optimizer = optimizer is not None and ckpt.optimizer is not None and ckpt.optimizer != optimizer
    _legacy_bfloat16(ckpt, expected)
    problems = []
    if other_optimizer:
        problems.append(f"saved with the optimizer {ckpt.optimizer}, but this trainer's is {optimizer} (the state "
                        f"would continue under another update rule); expected a checkpoint saved with {optimizer}")
    names, layouts = _differences(ckpt, expected, ("param/", "state/"), "this model")
    if names:
        problems.append("a checkpoint of another model: " + "; ".join(names))
    problems += layouts
    optim_names, optim_layouts = _differences(ckpt, expected, ("optim/",), "this optimizer")
    optim = [] if other_optimizer else optim_names + optim_layouts
    if optim:
        causes = ["saved with another optimizer"] if ckpt.optimizer is None else []  # (a file that predates the record)
        causes += ["for another model's parameters"] if names or layouts else []
        cause = f" ({', or '.join(causes)})" if causes else ""
        problems.append(f"its optimizer state does not fit this trainer's {optimizer or 'optimizer'}{cause}: "
                        + "; ".join(optim))
    problems += non_finite_problems({k: a for k, a in ckpt.arrays.items() if k in expected})
    steps = ckpt.arrays.get("optim/0")  # every optimizer's state starts with its step count (optimizer.py)
    if "optim/0" in expected and steps is not None and steps.shape == () and steps.dtype.kind == "i" and steps < 0:
        problems.append(f"optim/0 (the optimizer's step count) is {int(steps)}, expected a count >= 0")
    if problems:
        raise CheckpointError(f"{where}: " + "; ".join(problems))


def _legacy_bfloat16(ckpt: Checkpoint, expected: Mapping[str, tuple[tuple[int, ...], np.dtype]]) -> None:
    """Entries that ``Trainer.save`` wrote as raw ``|V2`` bytes, before bfloat16 was stored as its bits, read as
    the bfloat16 the model expects there (the same bytes): those files load too."""
    for key, (_, dtype) in expected.items():
        a = ckpt.arrays.get(key)
        if a is not None and a.dtype == np.dtype("V2") and np.dtype(dtype).name == "bfloat16":
            ckpt.arrays[key] = a.view(dtype)


def _differences(ckpt: Checkpoint, expected: Mapping[str, tuple[tuple[int, ...], np.dtype]], kinds: tuple[str, ...],
                 owner: str) -> tuple[list[str], list[str]]:
    """What differs between the ``kinds`` entries of ``ckpt`` and ``expected``: the entries it lacks or has that
    ``owner`` does not, then the wrong shapes or dtypes."""
    wanted = [k for k in expected if k.startswith(kinds)]
    missing = [k for k in wanted if k not in ckpt.arrays]
    unknown = [k for k in ckpt.arrays if k.startswith(kinds) and k not in expected]
    names = [f"it lacks {_listing(missing)}"] if missing else []
    names += [f"it has {_listing(unknown)} that {owner} does not"] if unknown else []
    layouts = []
    for key in wanted:
        a, (shape, dtype) = ckpt.arrays.get(key), expected[key]
        if a is not None and (a.shape != tuple(shape) or a.dtype != np.dtype(dtype)):
            layouts.append(f"{key} is {a.dtype} {a.shape}, expected {np.dtype(dtype)} {tuple(shape)}")
    return names, layouts


def non_finite_problems(arrays: Mapping[str, np.ndarray]) -> list[str]:
    """``"<name> holds 2 NaN (first at [0, 1]), expected finite values"`` for every floating array that has a
    NaN or an infinity: a checkpoint holds the state of a run that had not diverged."""
    out = []
    for key, a in arrays.items():
        if (is_floating(a.dtype) or a.dtype.kind == "c") and not finite(a).all():
            with np.errstate(invalid="ignore"):  # (as in finite)
                nan, inf = int(np.isnan(a).sum()), int(np.isinf(a).sum())
            counts = " and ".join(f"{n} {what}" for n, what in ((nan, "NaN"), (inf, "Inf")) if n)
            out.append(f"{key} holds {counts} (first at {first_non_finite(a)}), expected finite values")
    return out


def first_non_finite(a: np.ndarray) -> list[int]:
    """The index of ``a``'s first NaN or infinity (row-major order), as a list."""
    flat = int(np.argmin(finite(a).ravel()))
    return [int(i) for i in np.unravel_index(flat, a.shape)] if a.ndim else []


def finite(a: np.ndarray) -> np.ndarray:
    """``numpy.isfinite(a)``, without the "invalid value" warning ml_dtypes gives for a bfloat16 signaling NaN (it
    widens the value to float32)."""
    with np.errstate(invalid="ignore"):
        return np.isfinite(a)
