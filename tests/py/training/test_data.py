"""Data loaders of ``relax-mlir train``: IDX files (plain and gzip, the four-file layout), npz archives, the digits
split, batches; every malformed input raises a ``DataError`` that names the file and what is wrong."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from relax_mlir.training.data import (DataError, batches, load_data, load_digits_dataset, load_idx_dir, load_npz,
                                      read_idx, write_idx)


def _idx_bytes(array: np.ndarray, type_code: int = 0x08) -> bytes:
    """An IDX file written here independently of ``write_idx``: magic 00 00 type ndim, big-endian sizes, data."""
    header = bytes([0, 0, type_code, array.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    return header + array.astype(array.dtype.newbyteorder(">")).tobytes()


def _write(path, data: bytes, compress: bool = False) -> str:
    with (gzip.open if compress else open)(path, "wb") as f:
        f.write(data)
    return str(path)


def _mnist_like(rng, n: int, side: int = 8):
    y = rng.integers(0, 10, n).astype(np.uint8)
    x = rng.integers(0, 256, (n, side, side)).astype(np.uint8)
    return x, y


def _write_idx_dir(directory, rng, compress: bool, n_train: int = 40, n_test: int = 12):
    (xt, yt), (xs, ys) = _mnist_like(rng, n_train), _mnist_like(rng, n_test)
    ext = ".gz" if compress else ""
    for name, a in (("train-images-idx3-ubyte", xt), ("train-labels-idx1-ubyte", yt),
                    ("t10k-images-idx3-ubyte", xs), ("t10k-labels-idx1-ubyte", ys)):
        _write(directory / (name + ext), _idx_bytes(a), compress)
    return xt, yt, xs, ys


# -- IDX ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("compress", [False, True])
def test_read_idx_uint8_images_and_labels(tmp_path, rng, compress):
    x, y = _mnist_like(rng, 5, side=4)
    ext = ".gz" if compress else ""
    np.testing.assert_array_equal(read_idx(_write(tmp_path / f"x{ext}", _idx_bytes(x), compress)), x)
    got = read_idx(_write(tmp_path / f"y{ext}", _idx_bytes(y), compress))
    assert got.dtype == np.uint8 and got.shape == (5,)
    np.testing.assert_array_equal(got, y)


def test_read_idx_detects_gzip_by_content_and_big_endian_types(tmp_path):
    a = (np.arange(6) - 3).astype(np.int32).reshape(2, 3)
    path = _write(tmp_path / "no_suffix", _idx_bytes(a, 0x0C), compress=True)  # gzip without .gz
    got = read_idx(path)
    assert got.dtype == np.int32 and got.dtype.isnative
    np.testing.assert_array_equal(got, a)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.int32, np.float32, np.float64])
def test_write_idx_round_trips(tmp_path, dtype):
    a = (np.arange(24) % 7).astype(dtype).reshape(2, 3, 4)
    write_idx(str(tmp_path / "a.gz"), a)
    np.testing.assert_array_equal(read_idx(str(tmp_path / "a.gz")), a)


@pytest.mark.parametrize("data, message", [
    (b"\x01\x02\x08\x01" + (3).to_bytes(4, "big") + b"abc", "bad magic number"),
    (b"", "bad magic number"),
    (b"\x00\x00\x07\x01" + (3).to_bytes(4, "big") + b"abc", "unknown IDX element type 0x07"),
    (b"\x00\x00\x08\x03" + (3).to_bytes(4, "big"), "truncated IDX header"),
    (b"\x00\x00\x08\x02" + (3).to_bytes(4, "big") + (4).to_bytes(4, "big") + bytes(11), "truncated"),
    (b"\x00\x00\x08\x01" + (3).to_bytes(4, "big") + bytes(5), "too long"),
    (b"\x00\x00\x08\x00", "0 dimensions"),
])
def test_read_idx_malformed(tmp_path, data, message):
    path = _write(tmp_path / "bad-idx3-ubyte", data)
    with pytest.raises(DataError, match=message) as info:
        read_idx(path)
    assert path in str(info.value)


def test_read_idx_corrupt_gzip_and_missing_file(tmp_path):
    good = gzip.compress(_idx_bytes(np.zeros((4, 4), np.uint8)))
    path = _write(tmp_path / "cut.gz", good[:len(good) // 2])
    with pytest.raises(DataError, match="corrupt gzip"):
        read_idx(path)
    with pytest.raises(DataError, match="no such file"):
        read_idx(str(tmp_path / "absent"))


@pytest.mark.parametrize("compress", [False, True])
def test_idx_directory(tmp_path, rng, compress):
    xt, yt, xs, ys = _write_idx_dir(tmp_path, rng, compress)
    data = load_data(str(tmp_path))
    assert data.x_train.shape == (40, 1, 8, 8) and data.x_train.dtype == np.float32
    np.testing.assert_array_equal(data.x_train[:, 0], xt.astype(np.float32) / np.float32(255))
    np.testing.assert_array_equal(data.y_test, ys.astype(np.int64))
    assert data.y_train.dtype == np.int64 and data.num_classes == int(max(yt.max(), ys.max())) + 1
    assert 0.0 <= data.x_test.min() and data.x_test.max() <= 1.0


def test_idx_directory_dotted_names(tmp_path, rng):
    """Some copies of MNIST name the files train-images.idx3-ubyte."""
    files = {"train-images.idx3-ubyte": _mnist_like(rng, 8)[0], "train-labels.idx1-ubyte": np.ones(8, np.uint8),
             "t10k-images.idx3-ubyte": _mnist_like(rng, 4)[0], "t10k-labels.idx1-ubyte": np.zeros(4, np.uint8)}
    for name, a in files.items():
        _write(tmp_path / name, _idx_bytes(a))
    assert len(load_idx_dir(str(tmp_path)).x_train) == 8


def test_idx_directory_errors(tmp_path, rng):
    with pytest.raises(DataError, match="missing train-images-idx3-ubyte.*t10k-labels-idx1-ubyte"):
        load_data(str(tmp_path))  # names every missing file at once
    _write_idx_dir(tmp_path, rng, compress=False)
    _write(tmp_path / "t10k-labels-idx1-ubyte", _idx_bytes(np.zeros(11, np.uint8)))
    with pytest.raises(DataError, match="x_test has 12 examples, y_test has 11"):
        load_data(str(tmp_path))
    _write(tmp_path / "t10k-labels-idx1-ubyte", _idx_bytes(np.zeros((12, 2), np.uint8)))
    with pytest.raises(DataError, match="labels must be 1-D"):
        load_data(str(tmp_path))
    _write(tmp_path / "t10k-labels-idx1-ubyte", _idx_bytes(np.full(12, 10, np.uint8)))
    _write(tmp_path / "train-labels-idx1-ubyte", _idx_bytes(np.full(40, 3, np.uint8)))
    with pytest.raises(DataError, match=r"y_test: labels out of range: \[10\].*4 classes"):
        load_data(str(tmp_path))


def test_load_data_unknown_paths(tmp_path):
    with pytest.raises(DataError, match="no such file or directory"):
        load_data(str(tmp_path / "nowhere"))
    with pytest.raises(DataError, match="expected a directory of MNIST IDX files or an .npz"):
        load_data(_write(tmp_path / "data.csv", b"1,2"))


# -- npz ----------------------------------------------------------------------------------------------------
def test_npz_four_arrays_uint8(tmp_path, rng):
    (xt, yt), (xs, ys) = _mnist_like(rng, 30), _mnist_like(rng, 10)
    np.savez(tmp_path / "d.npz", x_train=xt, y_train=yt, x_test=xs, y_test=ys)
    data = load_data(str(tmp_path / "d.npz"))
    np.testing.assert_array_equal(data.x_test[:, 0], xs.astype(np.float32) / np.float32(255))
    np.testing.assert_array_equal(data.y_train, yt)
    assert data.name == "d.npz"


def test_npz_x_y_one_hot_flattened(tmp_path, rng):
    """x, y split 80/20 deterministically; one-hot labels become indices; (N, 16) images become 1x4x4."""
    x = rng.uniform(0, 16, (50, 16))
    labels = rng.integers(0, 3, 50)
    np.savez(tmp_path / "d.npz", x=x, y=np.eye(3)[labels])
    data = load_npz(str(tmp_path / "d.npz"))
    assert data.x_train.shape == (40, 1, 4, 4) and data.x_test.shape == (10, 1, 4, 4)
    assert data.num_classes == 3 and data.y_train.dtype == np.int64
    # one scale for both sets (the largest value overall), and every image keeps its label
    x32 = x.astype(np.float32)
    expected = {row.tobytes(): int(c) for row, c in zip(x32 / x32.max(), labels)}
    got = {row.tobytes(): int(c) for row, c in zip(np.concatenate([data.x_train, data.x_test]).reshape(50, 16),
                                                    np.concatenate([data.y_train, data.y_test]))}
    assert got == expected
    again = load_npz(str(tmp_path / "d.npz"))
    np.testing.assert_array_equal(again.x_test, data.x_test)


@pytest.mark.parametrize("arrays, message", [
    ({"x_train": np.zeros((4, 16))}, "missing arrays y_train, x_test, y_test"),
    ({"x_train": np.zeros((4, 15)), "y_train": np.zeros(4), "x_test": np.zeros((2, 15)), "y_test": np.zeros(2)},
     "15 pixels are not square"),
    ({"x_train": np.zeros((4, 16)), "y_train": np.array([0, 1, -1, 2]), "x_test": np.zeros((2, 16)),
      "y_test": np.zeros(2)}, r"labels out of range: negative class indices \[-1\]"),
    ({"x_train": np.zeros((4, 16)), "y_train": np.array([0, 1.5, 1, 2]), "x_test": np.zeros((2, 16)),
      "y_test": np.zeros(2)}, "whole numbers"),
    ({"x_train": np.zeros((4, 16)), "y_train": np.arange(4), "x_test": np.zeros((2, 9)), "y_test": np.zeros(2)},
     "x_test images"),
    ({"x_train": np.full((4, 16), np.nan), "y_train": np.arange(4), "x_test": np.zeros((2, 16)),
      "y_test": np.zeros(2)}, "NaN or infinite"),
    ({"x_train": np.zeros((0, 16)), "y_train": np.zeros(0), "x_test": np.zeros((2, 16)), "y_test": np.zeros(2)},
     "the train set is empty"),
    ({"x": np.zeros((4, 16)), "y": np.zeros(3)}, "x has 4 examples, y has 3"),
])
def test_npz_errors(tmp_path, arrays, message):
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(DataError, match=message):
        load_data(str(tmp_path / "bad.npz"))


def test_npz_not_an_archive(tmp_path):
    with pytest.raises(DataError, match=r"fake.npz: not a zip archive \(it starts with b.not a zi.\); expected an .npz of arrays"):
        load_data(_write(tmp_path / "fake.npz", b"not a zip file"))



@pytest.mark.parametrize("dtype", [np.int64, np.uint8, np.float32])
def test_npz_labels_as_an_n_by_1_column_are_class_indices(tmp_path, rng, dtype):
    """An (N, 1) column (scikit-learn's, MATLAB's, y[:, None]) holds class indices; read as one-hot rows of width
    1 it would be one class, a loss of 0 and 100% accuracy whatever the file says."""
    (xt, yt), (xs, ys) = _mnist_like(rng, 40), _mnist_like(rng, 10)
    np.savez(tmp_path / "col.npz", x_train=xt, y_train=yt[:, None].astype(dtype), x_test=xs,
             y_test=ys[:, None].astype(dtype))
    data = load_data(str(tmp_path / "col.npz"))
    np.testing.assert_array_equal(data.y_train, yt.astype(np.int64))
    np.testing.assert_array_equal(data.y_test, ys.astype(np.int64))
    assert data.num_classes == int(yt.max()) + 1 and data.y_train.shape == (40,)


def test_npz_x_y_with_a_label_column_splits_like_the_flat_labels(tmp_path, rng):
    x, y = rng.uniform(0, 1, (50, 16)), rng.integers(0, 4, 50)
    np.savez(tmp_path / "flat.npz", x=x, y=y)
    np.savez(tmp_path / "col.npz", x=x, y=y[:, None])
    flat, col = load_npz(str(tmp_path / "flat.npz")), load_npz(str(tmp_path / "col.npz"))
    np.testing.assert_array_equal(col.y_train, flat.y_train)
    np.testing.assert_array_equal(col.y_test, flat.y_test)
    assert col.num_classes == flat.num_classes == 4


_X4, _X2 = np.zeros((4, 16)), np.zeros((2, 16))


@pytest.mark.parametrize("arrays, message", [
    ({"x_train": _X4, "y_train": np.array([[0], [1.5], [1], [2]]), "x_test": _X2, "y_test": np.zeros((2, 1))},
     r"col.npz: y_train: labels must be whole numbers \(class indices\), got e.g. \[1.5\]"),
    ({"x_train": _X4, "y_train": np.zeros((4, 0)), "x_test": _X2, "y_test": np.zeros((2, 0))},
     r"col.npz: y_train: one-hot rows of width 0; expected class indices \(N,\) or \(N, 1\)"),
    ({"x": np.array(3.0), "y": np.array(1)}, r"col.npz: x is a single value \(3.0\); expected an array with one entry"),
    ({"x": _X4, "y": np.array(1)}, r"col.npz: y is a single value \(1\); expected an array"),
    ({"x_train": _X4, "y_train": np.array([0, 1, 1e300, 2]), "x_test": _X2, "y_test": np.zeros(2)},
     r"col.npz: y_train: labels out of range: \[1e\+300\] are too large to be class indices"),
    ({"x_train": _X4, "y_train": np.array([0, 1, 2**63, 2], np.uint64), "x_test": _X2, "y_test": np.zeros(2)},
     r"y_train: labels out of range: \[9223372036854775808\] are too large to be class indices"),
    ({"x_train": _X4, "y_train": np.arange(4), "x_test": _X2, "y_test": np.array([0, 2.0**64])},
     r"y_test: labels out of range: \[1.8446744073709552e\+19\] are too large"),
    ({"x_train": _X4, "y_train": np.array([0, -1e300, 1, 2]), "x_test": _X2, "y_test": np.zeros(2)},
     r"y_train: labels out of range: negative class indices \[-1e\+300\]"),
])
def test_npz_label_shapes_and_values_that_are_refused(tmp_path, arrays, message):
    np.savez(tmp_path / "col.npz", **arrays)
    with pytest.raises(DataError, match=message):
        load_data(str(tmp_path / "col.npz"))

# -- digits and batches -------------------------------------------------------------------------------------
def test_digits_read_from_the_file_equal_scikit_learns():
    from sklearn.datasets import load_digits

    from relax_mlir.training.data import _digits_arrays

    images, target = _digits_arrays()
    digits = load_digits()
    np.testing.assert_array_equal(images, digits.images)
    np.testing.assert_array_equal(target, digits.target)
    assert images.shape == (1797, 8, 8) and target.dtype == np.int64


def test_digits_split_is_fixed_and_80_20():
    a, b = load_digits_dataset(), load_data(None)
    assert (len(a.x_train), len(a.x_test)) == (1438, 359)  # 1797 images, 20% rounded
    assert a.x_train.shape[1:] == (1, 8, 8) and a.num_classes == 10
    np.testing.assert_array_equal(a.x_train, b.x_train)
    np.testing.assert_array_equal(a.y_test, b.y_test)
    assert 0.0 <= a.x_train.min() and a.x_train.max() == 1.0
    other = load_digits_dataset(seed=1)
    assert not np.array_equal(other.y_test, a.y_test)


def test_batches_depend_only_on_seed_and_epoch():
    first = [b.tolist() for b in batches(100, 16, seed=3, epoch=2)]
    assert first == [b.tolist() for b in batches(100, 16, seed=3, epoch=2)]
    assert first != [b.tolist() for b in batches(100, 16, seed=3, epoch=1)]
    assert first != [b.tolist() for b in batches(100, 16, seed=4, epoch=2)]
    assert len(first) == 6 and all(len(b) == 16 for b in first)  # drop_last: 100 = 6 * 16 + 4
    assert len(set(sum(first, []))) == 96


def test_batches_keep_last_and_no_shuffle():
    kept = list(batches(10, 4, seed=0, epoch=0, drop_last=False))
    assert [len(b) for b in kept] == [4, 4, 2] and sorted(np.concatenate(kept).tolist()) == list(range(10))
    plain = list(batches(10, 4, seed=0, epoch=5, shuffle=False))
    assert [b.tolist() for b in plain] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    with pytest.raises(ValueError, match="batch_size"):
        list(batches(10, 0, seed=0, epoch=0))


def test_a_path_is_a_str_bytes_or_pathlike_never_a_file_descriptor(tmp_path):
    """``os.path`` and ``open`` take an int for a file descriptor: ``load_data(0)`` read stdin."""
    import pathlib

    with pytest.raises(TypeError, match=r"^load_data: path must be a str or os.PathLike, got int$"):
        load_data(0)
    rng = np.random.default_rng(0)
    path = tmp_path / "d.npz"
    np.savez(path, x=rng.random((10, 4)).astype(np.float32), y=rng.integers(0, 3, 10))
    want = load_data(str(path))
    assert want.x_train.shape[0] + want.x_test.shape[0] == 10
    for given in (bytes(path), pathlib.Path(path)):
        got = load_data(given)
        np.testing.assert_array_equal(got.x_train, want.x_train)
        np.testing.assert_array_equal(got.y_test, want.y_test)
