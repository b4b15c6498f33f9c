"""Atomic file writes: what every writer of the package uses (checkpoints, exported libraries, the compile cache,
the dialect file, ``relax-mlir import``): a temporary file in the target's directory, fsynced, then renamed over
the target, so that a reader sees the old file or the new one whole, never a part, and a writer killed at any
moment leaves the old file (or none). A symbolic link is followed (the file it names is replaced, the link stays);
a target that is not a regular file (a device, FIFO or socket) is refused rather than replaced."""

from __future__ import annotations

import errno
import os
import stat
import tempfile


def checked_path(path, where: str) -> str:
    """``path`` as a ``str``: a ``str``, an ``os.PathLike`` or ``bytes`` (decoded as the OS does, ``os.fsdecode``).
    Anything else is a ``TypeError`` said first: an int in particular, which ``open`` and ``os.path`` would take
    as a file descriptor (reading the caller's descriptor, or stdin, and closing it)."""
    if isinstance(path, (str, bytes, os.PathLike)):
        return os.fsdecode(path)
    raise TypeError(f"{where}: path must be a str or os.PathLike, got {type(path).__name__}")


def write_atomically(path: str, write, where: str, expected: str = "a file name") -> None:
    """Call ``write(f)`` on a binary file that replaces ``path`` only once whole (see the module docstring); a
    writer killed at any moment leaves the old file, or none. An error creating the temporary file names ``path``,
    the file the caller asked for."""
    path = checked_path(path, where)
    if not path or path.endswith(("/", os.sep)) or os.path.basename(path) in ("", ".", ".."):
        raise IsADirectoryError(f"{where}: {path!r} names no file; expected {expected}")
    if os.path.islink(path):  # a link stays a link: the file it names is the one replaced
        path = os.path.realpath(path)
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise IsADirectoryError(f"{where}: {path} is a directory; expected {expected}")
    if os.path.exists(path) and not stat.S_ISREG(os.stat(path).st_mode):
        # a FIFO, a device (/dev/null, /dev/full), a socket: renaming over it would replace the node itself
        raise OSError(errno.EINVAL, f"{where}: {path} is not a regular file (a device, FIFO or socket); "
                                    f"expected {expected}")
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"{where}: {path}: the directory {directory} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.tmp-", dir=directory)  # unique per writer
    except OSError as exc:  # (it named the temporary file, which the caller never saw: the target instead)
        raise OSError(exc.errno, f"{where}: {path}: cannot create a file in {directory} ({exc.strerror})") from None
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; the result is an ordinary file
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    _fsync_directory(directory)  # the rename itself survives a power cut only once the directory is synced


def _fsync_directory(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return  # some filesystems do not open directories; the rename is still atomic there
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
