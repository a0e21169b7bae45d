"""Writing a knowledge base folder safely: the writer lock (an ``fcntl.flock`` on ``.<name>.lock``
beside the folder, since the folder itself is swapped) and the swap of a freshly written sibling
folder into place (one atomic exchange of the two folders where the system has ``renameat2``), so a
reader never sees a half-written or a missing base."""

from __future__ import annotations

import ctypes
import errno
import fcntl
import functools
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def lock_path(path: str | os.PathLike[str]) -> Path:
    """The lock file of the base at ``path``: ``.<name>.lock`` beside the folder (the folder is swapped)."""
    path = Path(path)
    return path.parent / f".{path.name}.lock"


@contextmanager
def write_lock(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Hold the base's writer lock (exclusive, across threads and processes) for the block."""
    lock = lock_path(path)
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield lock
    finally:
        os.close(fd)  # closing the descriptor releases the lock (a killed process releases it too)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


@functools.lru_cache(maxsize=1)
def _renameat2() -> Any:
    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    return function


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux ``renameat2(RENAME_EXCHANGE)``); False where unsupported."""
    renameat2 = _renameat2()
    if renameat2 is None:
        return False
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):  # the kernel or file system cannot
        return False
    raise OSError(code, os.strerror(code), str(a), None, str(b))


def _swap_in(tmp: Path, path: Path) -> None:
    """Put the folder ``tmp`` at ``path``; the old folder (if any) is removed afterwards."""
    if not path.exists():
        os.replace(tmp, path)
        return
    if _exchange(tmp, path):
        shutil.rmtree(tmp, ignore_errors=True)  # tmp now holds the old base
        return
    old = path.with_name(f".{path.name}.old-{os.getpid()}")  # no exchange: a moment without a base
    os.replace(path, old)
    os.replace(tmp, path)
    shutil.rmtree(old, ignore_errors=True)

