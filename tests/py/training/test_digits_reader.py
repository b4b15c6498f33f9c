"""The fast reader of scikit-learn's digits CSV (``data._read_int_csv``) gives exactly what ``np.loadtxt`` gives, and
declines (None, so that ``np.loadtxt`` reads the file) any text it does not read the same way."""

from __future__ import annotations

import gzip
import os

import numpy as np
import pytest

from relax_mlir.training import data

sklearn = pytest.importorskip("sklearn")

DIGITS = os.path.join(os.path.dirname(sklearn.__file__), "datasets", "data", "digits.csv.gz")


def _write(directory, text: bytes, compress: bool) -> str:
    path = str(directory / ("t.csv.gz" if compress else "t.csv"))  # (np.loadtxt decompresses by the name)
    with (gzip.open if compress else open)(path, "wb") as f:
        f.write(text)
    return path


def test_the_shipped_digits_are_read_as_np_loadtxt_reads_them():
    expected = np.loadtxt(DIGITS, delimiter=",", dtype=np.float64)
    table = data._read_int_csv(DIGITS)
    assert table.dtype == expected.dtype == np.float64 and table.shape == expected.shape == (1797, 65)
    assert np.array_equal(table, expected)
    images, target = data._digits_arrays()
    assert np.array_equal(images, expected[:, :-1].reshape(-1, 8, 8)) and images.dtype == np.float64
    assert np.array_equal(target, expected[:, -1].astype(np.int64)) and target.dtype == np.int64


@pytest.mark.parametrize("compress", [False, True])
@pytest.mark.parametrize("text", [b"0,1,16\n007,10,2\n", b"5\n", b"9007199254740992,0\n3,4\n"])
def test_integer_tables_are_read_as_np_loadtxt_reads_them(tmp_path, text, compress):
    path = _write(tmp_path, text, compress)
    table = data._read_int_csv(path)
    expected = np.loadtxt(path, delimiter=",", dtype=np.float64, ndmin=2)
    assert table.dtype == np.float64 and table.shape == expected.shape and np.array_equal(table, expected)


@pytest.mark.parametrize("compress", [False, True])
@pytest.mark.parametrize("text", [
    b"1.5,2\n3,4\n",  # a point
    b"-1,2\n3,4\n",  # a sign
    b"1, 2\n3,4\n",  # a space
    b"1,2\r\n3,4\r\n",  # CRLF
    b"1,,2\n3,4,5\n",  # an empty field
    b",1\n2,3\n",  # an empty first field
    b"1,2\n\n3,4\n",  # an empty line
    b"1,2\n3,4,5\n",  # a ragged row
    b"1,2,3\n4\n5,6,7\n8,9\n",  # ragged rows of the right total
    b"1,2\n3,4",  # no final newline
    b"",  # nothing
    b"# a comment\n1,2\n",  # a comment
    b"9007199254740993,1\n2,3\n",  # past 2**53: a float64 cannot hold it, np.loadtxt rounds it
    b"99999999999999999999999,1\n2,3\n",  # past int64
])
def test_other_text_is_left_to_np_loadtxt(tmp_path, text, compress):
    assert data._read_int_csv(_write(tmp_path, text, compress)) is None
