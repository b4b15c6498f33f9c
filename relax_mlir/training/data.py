"""Data for ``relax-mlir train``: scikit-learn's digits (shipped in its package), IDX files (MNIST and
Fashion-MNIST, gzipped or not) and ``.npz`` archives, split and batched deterministically.

Every problem with a file or its arrays raises :class:`DataError` (a ``ValueError``) naming the file or array,
what is wrong and what was expected; the CLI prints it as one line.
"""

from __future__ import annotations

import gzip
import math
import os
import warnings
import zlib
from dataclasses import dataclass
from typing import Iterator, Mapping, Optional

import numpy as np

from .._files import checked_path
from .checkpoint_io import read_npz

SPLIT_SEED = 0  # the 80/20 split of digits (and of an npz's x, y) is the same whatever --seed says
_KEYS = ("x_train", "y_train", "x_test", "y_test")


class DataError(ValueError):
    """A data file or array that cannot be used; the message names it and says why."""


@dataclass
class Dataset:
    """Images scaled to [0, 1] as float32 ``(N, C, H, W)``, labels as int64 ``(N,)`` in ``[0, num_classes)``."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    name: str
    num_classes: int

    @property
    def image_shape(self) -> tuple[int, int, int]:
        return tuple(self.x_train.shape[1:])


def split(x: np.ndarray, y: np.ndarray, seed: int = SPLIT_SEED, test_fraction: float = 0.2):
    """A fixed-seed shuffle, then the last ``test_fraction`` is the test set: ``x_train, y_train, x_test, y_test``."""
    order = np.random.default_rng(seed).permutation(len(x))
    n_test = int(round(len(x) * test_fraction))
    train, test = order[:len(x) - n_test], order[len(x) - n_test:]
    return x[train], y[train], x[test], y[test]


def _digits_arrays() -> tuple[np.ndarray, np.ndarray]:
    """The digits' images (1797, 8, 8) and labels, read from the file scikit-learn ships without importing it:
    importing ``sklearn.datasets`` costs 0.75 s, half the wall time of a ``relax-mlir train`` with a warm cache."""
    import importlib.util

    spec = importlib.util.find_spec("sklearn")
    path = os.path.join(list(spec.submodule_search_locations)[0], "datasets", "data", "digits.csv.gz") \
        if spec and spec.submodule_search_locations else ""
    if not os.path.exists(path):  # another layout: ask scikit-learn itself
        from sklearn.datasets import load_digits

        digits = load_digits()
        return digits.images, digits.target
    table = _read_int_csv(path)
    if table is None:  # not the layout the fast reader knows: NumPy's general reader
        table = np.loadtxt(path, delimiter=",", dtype=np.float64)
    return table[:, :-1].reshape(-1, 8, 8), table[:, -1].astype(np.int64)


def _read_int_csv(path: str) -> Optional[np.ndarray]:
    """A (gzipped) CSV of non-negative integers, rows of equal length each ending in a newline, as float64: the
    array ``np.loadtxt(path, delimiter=",")`` gives, read with one ``np.fromstring`` (2 ms for the digits, where
    ``np.loadtxt`` took 17 ms, the largest part of a warm ``relax-mlir train`` after the imports). None for any other
    text (a sign, a point, a space, an empty field or line, a ragged row, a value past 2**53): the caller then reads
    it with ``np.loadtxt``, so whatever the file holds, the values are the ones it would give."""
    with open(path, "rb") as f:
        text = f.read()
    if text[:2] == b"\x1f\x8b":
        text = gzip.decompress(text)
    rows = text.split(b"\n")[:-1]  # (the text ends in a newline: checked below)
    if not rows or not text.endswith(b"\n") or text.translate(None, b"0123456789,\n"):
        return None
    commas = rows[0].count(b",")
    if any(row.count(b",") != commas for row in rows):
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (NumPy before 2.3 warns on a field it cannot read, and stops there)
        try:
            values = np.fromstring(text.replace(b"\n", b","), dtype=np.int64, sep=",")
        except (ValueError, DeprecationWarning):  # an empty field
            return None
    if values.size != len(rows) * (commas + 1) or values.max() > 2**53:  # (a longer number is clamped to 2**63 - 1)
        return None
    return values.reshape(len(rows), commas + 1).astype(np.float64)


def load_digits_dataset(seed: int = SPLIT_SEED) -> Dataset:
    """scikit-learn's 8x8 digits (1797 images, no download), pixels / 16, an 80/20 split with ``seed``."""
    images, target = _digits_arrays()
    x = (images / 16.0).astype(np.float32)[:, None, :, :]
    return Dataset(*split(x, target.astype(np.int64), seed), name="digits", num_classes=10)


# -- IDX --------------------------------------------------------------------------------------------------
_IDX_TYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def _read_bytes(path: str) -> bytes:
    """The file's bytes, decompressed when it starts with the gzip magic (whatever its name)."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
        return gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise DataError(f"{path}: corrupt gzip data ({exc})") from None


def read_idx(path: str) -> np.ndarray:
    """Read an IDX file (the MNIST format: magic ``00 00 TT NN``, NN big-endian int32 sizes, the data)."""
    data = _read_bytes(path)
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        raise DataError(f"{path}: not an IDX file (bad magic number {data[:4].hex() or 'none'}; "
                        "expected 0000 then a type byte and the number of dimensions)")
    if data[2] not in _IDX_TYPES:
        raise DataError(f"{path}: unknown IDX element type 0x{data[2]:02x}; expected one of "
                        + ", ".join(f"0x{t:02x}" for t in _IDX_TYPES))
    ndim, header = data[3], 4 + 4 * data[3]
    if ndim == 0:
        raise DataError(f"{path}: IDX header gives 0 dimensions")
    if len(data) < header:
        raise DataError(f"{path}: truncated IDX header ({len(data)} bytes, {ndim} dimensions need {header})")
    dims = tuple(int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim))
    dtype = np.dtype(_IDX_TYPES[data[2]])
    expected, body = math.prod(dims) * dtype.itemsize, len(data) - header
    if body != expected:
        what = "truncated" if body < expected else "too long"
        raise DataError(f"{path}: {what}: the header promises {'x'.join(map(str, dims))} {dtype.name} "
                        f"({expected} bytes), the file holds {body}")
    return np.frombuffer(data, dtype=dtype, offset=header).reshape(dims).astype(dtype.newbyteorder("="))


def write_idx(path: str, array: np.ndarray) -> None:
    """Write ``array`` as an IDX file (gzip-compressed when ``path`` ends in ``.gz``): the inverse of ``read_idx``."""
    codes = {np.dtype(v).newbyteorder("="): k for k, v in _IDX_TYPES.items()}
    array = np.asarray(array)
    if array.dtype not in codes:
        raise DataError(f"write_idx: no IDX type for {array.dtype}")
    header = bytes([0, 0, codes[array.dtype], array.ndim]) + b"".join(d.to_bytes(4, "big") for d in array.shape)
    body = array.astype(np.dtype(_IDX_TYPES[codes[array.dtype]])).tobytes()
    with (gzip.open if path.endswith(".gz") else open)(path, "wb") as f:
        f.write(header + body)


# Both spellings occur in the wild: "train-images-idx3-ubyte" (LeCun, Zalando) and "train-images.idx3-ubyte".
_IDX_STEMS = {"x_train": "train-images", "y_train": "train-labels", "x_test": "t10k-images", "y_test": "t10k-labels"}


def _idx_file(directory: str, key: str) -> Optional[str]:
    stem, kind = _IDX_STEMS[key], "idx3-ubyte" if key.startswith("x") else "idx1-ubyte"
    for sep in ("-", "."):
        for ext in ("", ".gz"):
            path = os.path.join(directory, f"{stem}{sep}{kind}{ext}")
            if os.path.isfile(path):
                return path
    return None


def load_idx_dir(directory: str) -> Dataset:
    """The four MNIST/Fashion-MNIST files of ``directory`` (``train-images-idx3-ubyte[.gz]``, ...)."""
    found = {k: _idx_file(directory, k) for k in _KEYS}
    missing = [f"{_IDX_STEMS[k]}-idx{3 if k.startswith('x') else 1}-ubyte[.gz]" for k, p in found.items() if not p]
    if missing:
        raise DataError(f"{directory}: missing {', '.join(missing)}; expected the four MNIST IDX files")
    arrays = {k: read_idx(p) for k, p in found.items()}
    for k in ("y_train", "y_test"):
        if arrays[k].ndim != 1:
            raise DataError(f"{found[k]}: labels must be 1-D, got shape {arrays[k].shape}")
    for k in ("x_train", "x_test"):
        if arrays[k].ndim != 3:
            raise DataError(f"{found[k]}: images must be 3-D (count, rows, columns), got shape {arrays[k].shape}")
    return make_dataset(arrays, os.path.basename(os.path.normpath(directory)))


# -- npz --------------------------------------------------------------------------------------------------
def load_npz(path: str, seed: int = SPLIT_SEED) -> Dataset:
    """Arrays ``x_train, y_train, x_test, y_test``, or ``x, y`` split 80/20 with ``seed``."""
    try:
        arrays = read_npz(path, path, DataError, "an .npz of arrays (x_train, y_train, x_test, y_test, or x and y)")
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    if not all(k in arrays for k in _KEYS) and "x" in arrays and "y" in arrays:
        x, y = arrays["x"], arrays["y"]
        for key, a in (("x", x), ("y", y)):
            if a.ndim == 0:  # len() of a 0-d array is a TypeError
                raise DataError(f"{path}: {key} is a single value ({a.item()!r}); expected an array with one entry "
                                "per example")
        if len(x) != len(y):
            raise DataError(f"{path}: x has {len(x)} examples, y has {len(y)}")
        arrays = dict(zip(_KEYS, split(x, y, seed)))
    missing = [k for k in _KEYS if k not in arrays]
    if missing:
        raise DataError(f"{path}: missing arrays {', '.join(missing)} (it has {', '.join(arrays) or 'none'}); "
                        "expected x_train, y_train, x_test, y_test, or x and y")
    return make_dataset(arrays, os.path.basename(path))


# -- checks and normalisation -----------------------------------------------------------------------------
def make_dataset(arrays: Mapping[str, np.ndarray], name: str) -> Dataset:
    """Check and normalise raw arrays: images to float32 ``(N, C, H, W)`` in [0, 1], labels (class indices,
    ``(N,)`` or an ``(N, 1)`` column, or one-hot rows) to int64 class indices. Images may be ``(N, H, W)``, ``(N, C, H, W)`` or flattened square
    ``(N, H*W)``; uint8 pixels are divided by 255, other values above 1 by the largest value of both sets."""
    x_train, x_test = (_images(np.asarray(arrays[k]), f"{name}: {k}") for k in ("x_train", "x_test"))
    if x_train.shape[1:] != x_test.shape[1:]:
        raise DataError(f"{name}: x_train images are {x_train.shape[1:]}, x_test images {x_test.shape[1:]}")
    scale = _scale([np.asarray(arrays[k]).dtype for k in ("x_train", "x_test")], x_train, x_test)
    y_train, classes = _labels(np.asarray(arrays["y_train"]), f"{name}: y_train", None)
    y_test, _ = _labels(np.asarray(arrays["y_test"]), f"{name}: y_test", classes)
    for x, y, part in ((x_train, y_train, "train"), (x_test, y_test, "test")):
        if len(x) != len(y):
            raise DataError(f"{name}: x_{part} has {len(x)} examples, y_{part} has {len(y)}")
        if len(x) == 0:
            raise DataError(f"{name}: the {part} set is empty")
    return Dataset(x_train / scale, y_train, x_test / scale, y_test, name, classes)


def _images(x: np.ndarray, what: str) -> np.ndarray:
    if x.dtype.kind not in "biuf":
        raise DataError(f"{what}: images must be numbers, got {x.dtype}")
    if x.ndim == 2:  # flattened square images
        side = int(round(np.sqrt(x.shape[1])))
        if side * side != x.shape[1]:
            raise DataError(f"{what}: flattened images of {x.shape[1]} pixels are not square")
        x = x.reshape(len(x), side, side)
    if x.ndim == 3:
        x = x[:, None]
    if x.ndim != 4:
        raise DataError(f"{what}: expected images (N, H*W), (N, H, W) or (N, C, H, W), got shape {x.shape}")
    x = x.astype(np.float32)
    if not np.isfinite(x).all():
        raise DataError(f"{what}: holds NaN or infinite values")
    return x


def _scale(dtypes: list, x_train: np.ndarray, x_test: np.ndarray) -> np.float32:
    """One scale for both sets, so train and test pixels mean the same thing."""
    if all(d == np.uint8 for d in dtypes):
        return np.float32(255.0)
    top = max(float(x_train.max(initial=0.0)), float(x_test.max(initial=0.0)))
    return np.float32(top if top > 1.0 else 1.0)


def _labels(y: np.ndarray, what: str, classes: Optional[int]) -> tuple[np.ndarray, int]:
    """Class indices (int64) and the number of classes: a one-hot width, else the largest training label + 1.
    An ``(N, 1)`` column is class indices, as scikit-learn, MATLAB or ``y[:, None]`` store them: one-hot rows of
    width 1 would be a single class, a loss of 0 and 100% accuracy whatever the file holds."""
    if y.dtype.kind not in "biuf":
        raise DataError(f"{what}: labels must be numbers, got {y.dtype}")
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim == 2:  # one-hot (or scores): the width is the number of classes
        if y.shape[1] == 0:
            raise DataError(f"{what}: one-hot rows of width 0; expected class indices (N,) or (N, 1), or one-hot "
                            "rows (N, number of classes)")
        if classes is not None and y.shape[1] != classes:
            raise DataError(f"{what}: one-hot rows of width {y.shape[1]}, but the training labels have {classes}")
        return y.argmax(1).astype(np.int64), classes or y.shape[1]
    if y.ndim != 1:
        raise DataError(f"{what}: labels must be 1-D class indices (or an (N, 1) column) or 2-D one-hot rows, "
                        f"got shape {y.shape}")
    if y.dtype.kind == "f" and not (np.isfinite(y).all() and (y == np.round(y)).all()):
        raise DataError(f"{what}: labels must be whole numbers (class indices), got e.g. "
                        f"{y[~np.isfinite(y) | (y != np.round(y))][:3].tolist()}")
    if y.size and y.min() < 0:  # checked before the int64 cast, which would wrap 2**63 and 1e300 to negatives
        negative = np.unique(y[y < 0])[:8].tolist()
        raise DataError(f"{what}: labels out of range: negative class indices {negative}")
    if y.dtype.kind == "f" or y.dtype == np.uint64:
        huge = y >= np.float64(2.0 ** 63) if y.dtype.kind == "f" else y > np.uint64(np.iinfo(np.int64).max)
        if huge.any():
            raise DataError(f"{what}: labels out of range: {np.unique(y[huge])[:8].tolist()} are too large to be "
                            "class indices (at most 2**63 - 1)")
    labels = y.astype(np.int64)
    if classes is None:
        return labels, int(labels.max(initial=0)) + 1
    bad = labels >= classes
    if bad.any():
        raise DataError(f"{what}: labels out of range: {np.unique(labels[bad])[:8].tolist()} are not among the "
                        f"{classes} classes [0, {classes}) of the training labels")
    return labels, classes


# -- entry point and batches ------------------------------------------------------------------------------
def load_data(path: Optional[str], seed: int = SPLIT_SEED) -> Dataset:
    """``None``: digits; a directory: MNIST/Fashion-MNIST IDX files; a ``.npz``: arrays ``x_train``,
    ``y_train``, ``x_test``, ``y_test`` (or ``x``, ``y``, split 80/20 with ``seed``)."""
    if path is None:
        return load_digits_dataset(seed)
    path = checked_path(path, "load_data")  # (an int would be taken for a file descriptor)
    if os.path.isdir(path):
        return load_idx_dir(path)
    if not os.path.exists(path):
        raise DataError(f"{path}: no such file or directory; expected a directory of IDX files or an .npz file")
    if path.endswith(".npz"):
        return load_npz(path, seed)
    raise DataError(f"{path}: expected a directory of MNIST IDX files or an .npz file")


def batches(n: int, batch_size: int, seed: int, epoch: int, shuffle: bool = True,
            drop_last: bool = True) -> Iterator[np.ndarray]:
    """Index batches of one epoch; the order depends only on (seed, epoch), so a resumed run sees the same."""
    if batch_size < 1:
        raise ValueError(f"batches: batch_size must be at least 1, got {batch_size}")
    order = np.random.default_rng([seed, epoch]).permutation(n) if shuffle else np.arange(n)
    stop = n - n % batch_size if drop_last else n
    for start in range(0, stop, batch_size):
        yield order[start:start + batch_size]
