"""Data for ``relax-mlir train``: scikit-learn's digits (shipped in its package), IDX files (MNIST and
Fashion-MNIST, gzipped or not) and ``.npz`` archives, split and batched deterministically.
"""

from __future__ import annotations

import gzip
import os
from dataclasses import dataclass
from typing import Iterator, Optional

import numpy as np


@dataclass
class Dataset:
    """Images scaled to [0, 1] as float32 ``(N, C, H, W)`` and labels as int64 ``(N,)``."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    name: str

    @property
    def image_shape(self) -> tuple[int, int, int]:
        return tuple(self.x_train.shape[1:])

    @property
    def num_classes(self) -> int:
        return int(max(self.y_train.max(), self.y_test.max())) + 1


def _split(x: np.ndarray, y: np.ndarray, seed: int, test_fraction: float = 0.2):
    """A fixed-seed shuffle, then the last ``test_fraction`` is the test set."""
    order = np.random.default_rng(seed).permutation(len(x))
    n_test = int(round(len(x) * test_fraction))
    train, test = order[:len(x) - n_test], order[len(x) - n_test:]
    return x[train], y[train], x[test], y[test]


def load_digits_dataset(seed: int = 0) -> Dataset:
    """scikit-learn's 8x8 digits (1797 images, no download), pixels / 16, an 80/20 split with ``seed``."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None, :, :]
    return Dataset(*_split(x, digits.target.astype(np.int64), seed), name="digits")


def read_idx(path: str) -> np.ndarray:
    """Read an IDX file (the MNIST format; gzip-compressed when the name ends in ``.gz``)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        raise ValueError(f"{path}: not an IDX file (bad magic number)")
    types = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
    if data[2] not in types:
        raise ValueError(f"{path}: unknown IDX element type 0x{data[2]:02x}")
    ndim = data[3]
    dims = tuple(int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim))
    dtype = np.dtype(types[data[2]])
    body = data[4 + 4 * ndim:]
    if len(body) != int(np.prod(dims)) * dtype.itemsize:
        raise ValueError(f"{path}: the header promises {dims} elements of {dtype}, the file holds {len(body)} bytes")
    return np.frombuffer(body, dtype=dtype).reshape(dims).astype(dtype.newbyteorder("="))


_IDX_NAMES = {"x_train": "train-images-idx3-ubyte", "y_train": "train-labels-idx1-ubyte",
              "x_test": "t10k-images-idx3-ubyte", "y_test": "t10k-labels-idx1-ubyte"}


def load_data(path: Optional[str], seed: int = 0) -> Dataset:
    """``None``: digits; a directory: MNIST/Fashion-MNIST IDX files; a ``.npz``: arrays ``x_train``,
    ``y_train``, ``x_test``, ``y_test`` (or ``x``, ``y``, split 80/20 with ``seed``)."""
    if path is None:
        return load_digits_dataset(seed)
    if os.path.isdir(path):
        arrays = {}
        for key, stem in _IDX_NAMES.items():
            found = [os.path.join(path, stem + ext) for ext in ("", ".gz") if os.path.exists(os.path.join(path, stem + ext))]
            if not found:
                raise FileNotFoundError(f"{path}: no {stem} (or {stem}.gz); expected the four MNIST IDX files")
            arrays[key] = read_idx(found[0])
        return _normalise(arrays, os.path.basename(os.path.normpath(path)), seed)
    if path.endswith(".npz"):
        with np.load(path, allow_pickle=False) as f:
            arrays = {k: f[k] for k in f.files}
        return _normalise(arrays, os.path.basename(path), seed)
    raise ValueError(f"--data {path}: expected a directory of IDX files or an .npz file")


def _normalise(arrays: dict, name: str, seed: int) -> Dataset:
    if "x" in arrays and "y" in arrays and "x_train" not in arrays:
        arrays = dict(zip(("x_train", "y_train", "x_test", "y_test"), _split(arrays["x"], arrays["y"], seed)))
    missing = [k for k in ("x_train", "y_train", "x_test", "y_test") if k not in arrays]
    if missing:
        raise ValueError(f"{name}: missing arrays {', '.join(missing)} (or give x and y)")

    def images(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x)
        scale = 255.0 if x.dtype == np.uint8 or (x.size and x.max() > 1.0) else 1.0
        x = (x.astype(np.float32) / scale)
        if x.ndim == 2:  # flattened square images
            side = int(round(np.sqrt(x.shape[1])))
            if side * side != x.shape[1]:
                raise ValueError(f"{name}: images of {x.shape[1]} pixels are not square")
            x = x.reshape(len(x), side, side)
        return x[:, None] if x.ndim == 3 else x

    def labels(y: np.ndarray) -> np.ndarray:
        y = np.asarray(y)
        if y.ndim == 2:  # one-hot
            y = y.argmax(1)
        return y.astype(np.int64)

    return Dataset(images(arrays["x_train"]), labels(arrays["y_train"]), images(arrays["x_test"]),
                   labels(arrays["y_test"]), name)


def batches(n: int, batch_size: int, seed: int, epoch: int, shuffle: bool = True,
            drop_last: bool = True) -> Iterator[np.ndarray]:
    """Index batches of one epoch; the order depends only on (seed, epoch), so a resumed run sees the same."""
    order = np.random.default_rng([seed, epoch]).permutation(n) if shuffle else np.arange(n)
    stop = n - n % batch_size if drop_last else n
    for start in range(0, stop, batch_size):
        yield order[start:start + batch_size]
