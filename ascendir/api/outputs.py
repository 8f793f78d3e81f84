"""Output files of the CLIs: checked before any work, and never left half-written.

What a path names decides how it is written (`output_kind`):

* `-`: standard output.
* a regular file, or nothing yet: a temporary file beside it, renamed over it only once the
  whole content is written, so a failure or a signal leaves the old file (or none) and no
  temporary behind. A symlink to a regular file is written through: the file it points to is
  replaced, the link stays.
* a FIFO, a character device (`/dev/null`, `/dev/stdout` of a terminal), or a path that is, or
  links to, a descriptor (`/proc/<pid>/fd/N`, `/dev/fd/N`, `/dev/stdout`: a pipe or a file the
  shell redirected): opened and appended to in place, as a shell redirection would (`>>`). It is
  never unlinked, renamed over or truncated.
* anything else (a directory, a block device, a socket, a symlink loop): an error; it is never
  replaced.

A name ending in `.gz` is gzip-compressed (the name given decides, not a link's target).
"""

from __future__ import annotations

import errno
import os
import re
import stat
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from ascendir.errors import AscendirError

STDOUT = "-"


def is_stdout(path: str | Path | None) -> bool:
    return path is not None and str(path) == STDOUT


def output_kind(path: str | Path) -> str:
    """How `path` is written: "stdout", "atomic" (regular file or none yet), "through" (FIFO,
    character device, /proc fd), or "refuse" (directory, block device, socket)."""
    if is_stdout(path):
        return "stdout"
    p = Path(path)
    try:
        st = p.stat()  # follows symlinks: the kind of what is written
    except FileNotFoundError:
        return "atomic"  # nothing there yet, or a dangling link: created where it points
    except OSError as e:
        return "refuse" if e.errno == errno.ELOOP else "atomic"  # else reported by check_writable
    if _names_descriptor(p):
        return "through"  # /dev/stdout & co.: the descriptor's open file, whatever it is
    if stat.S_ISREG(st.st_mode):
        return "atomic"
    if stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode):
        return "through"
    return "refuse"


_DESCRIPTOR = re.compile(r"/proc/[^/]+/fd/[^/]+|/dev/fd/[^/]+|/dev/std(in|out|err)")


def _names_descriptor(path: Path) -> bool:
    """Whether `path` is, or links (in any hop) to, an open descriptor: /proc/<pid>/fd/N,
    /dev/fd/N, /dev/std*. os.path.realpath cannot tell: it follows /proc's magic link on to the
    file the descriptor has open (a file the shell redirected to, which must not be replaced)."""
    cur = os.path.abspath(path)
    for _ in range(64):  # more hops than the kernel's 40: a loop is refused before this
        parent, name = os.path.split(cur)
        cur = os.path.join(os.path.realpath(parent), name)
        if _DESCRIPTOR.fullmatch(cur):
            return True
        try:
            cur = os.path.join(os.path.dirname(cur), os.readlink(cur))
        except OSError:  # not a link: the file itself
            return False
    return False


def _kind_name(path: Path) -> str:
    try:
        mode = path.stat().st_mode
    except OSError as e:
        if e.errno == errno.ELOOP:
            return "a symlink loop"
        raise
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def check_writable(path: str | Path, what: str = "output") -> None:
    """Fail early, with one line naming `path`, when it cannot be written.

    Raises:
        AscendirError: `path` is a directory, block device or socket, its folder is missing or
            not writable, or the file is not writable.
    """
    kind = output_kind(path)
    if kind == "stdout":
        return
    p = Path(path)
    if kind == "refuse":
        raise AscendirError(f"cannot write {what} {p}: it is {_kind_name(p)} (only regular files, FIFOs, character devices and descriptors are written)")
    if kind == "through":
        if not os.access(p, os.W_OK):
            raise AscendirError(f"cannot write {what} {p}: permission denied")
        return
    target = Path(os.path.realpath(p))
    folder = target.parent
    if not folder.is_dir():
        raise AscendirError(f"cannot write {what} {p}: directory {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise AscendirError(f"cannot write {what} {p}: permission denied")


@contextmanager
def open_output(path: str | Path, what: str = "output") -> Iterator[BinaryIO]:
    """A binary file to write `path` with (see the module docstring for what is written how):
    its content lands only when the `with` block ends without an exception.

    Raises:
        AscendirError: `path` cannot be written (nothing is left behind).
    """
    kind = output_kind(path)
    check_writable(path, what)
    compress = str(path).endswith(".gz")
    p = Path(path)
    if kind != "atomic":
        # written in place, so a failed write (ENOSPC on /dev/full, EPIPE) cannot be undone:
        # it is reported as the atomic path reports it, naming the output
        try:
            if kind == "stdout":
                sys.stdout.flush()
                yield from _maybe_gzip(sys.stdout.buffer, compress, path, what)
                sys.stdout.buffer.flush()
                return
            # O_APPEND: /dev/stdout redirected to a file keeps what was written before
            with os.fdopen(os.open(p, os.O_WRONLY | os.O_APPEND), "wb") as raw:
                yield from _maybe_gzip(raw, compress, p, what)
        except OSError as e:
            raise AscendirError(f"cannot write {what} {p}: {e.strerror or e}") from None
        return
    import tempfile

    target = Path(os.path.realpath(p))  # a symlink is written through: its target is replaced
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as raw:
            yield from _maybe_gzip(raw, compress, p, what)
        os.chmod(tmp, _file_mode(target))  # mkstemp makes 0600; give what open() would
        os.replace(tmp, target)
        tmp = None
    except OSError as e:
        raise AscendirError(f"cannot write {what} {p}: {e.strerror or e}") from None
    finally:  # failures and signals alike (cli turns SIGTERM into an exception)
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


def _maybe_gzip(raw: BinaryIO, compress: bool, path, what: str) -> Iterator[BinaryIO]:
    if not compress:
        yield raw
        return
    import gzip

    # mtime=0: the same content gives the same bytes; level 1: a big run's trace is hundreds of MB
    # of repetitive JSON, which level 9 (gzip's default) takes minutes for (575 MB: 200 s) and
    # level 1 seconds, for a file about a fifth larger
    with gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0, compresslevel=1) as z:
        yield z


def write_output(path: str | Path, write: Callable[[BinaryIO], None], what: str = "output") -> None:
    """`write(f)` into `open_output(path)`."""
    with open_output(path, what) as f:
        write(f)


def write_text(path: str | Path, text: str, what: str = "output") -> None:
    with open_output(path, what) as f:
        f.write(text.encode())


def read_bytes(path: str | Path) -> bytes:
    """The content of `path` (`-`: standard input, as `-` is stdout for outputs), gunzipped when
    it is gzip data (the output side's `.gz`).

    Raises:
        OSError: unreadable; gzip.BadGzipFile / EOFError: a broken gzip stream.
    """
    import gzip

    data = sys.stdin.buffer.read() if is_stdout(path) else Path(path).read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def _file_mode(path: Path) -> int:
    """The mode of the file being replaced, else 0666 less the umask."""
    try:
        return path.stat().st_mode & 0o777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask
