"""Output files of the CLIs: checked before any work, written through a temporary file renamed
only on success, so a failure never leaves a half-written (or empty) output behind."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from ascendir.errors import AscendirError


def check_writable(path: str | Path, what: str = "output") -> None:
    """Fail early, with one line naming `path`, when it cannot be written.

    Raises:
        AscendirError: `path` is a directory, or its folder is missing or not writable.
    """
    p = Path(path)
    folder = p.parent
    if p.is_dir():
        raise AscendirError(f"cannot write {what} {p}: it is a directory")
    if not folder.is_dir():
        raise AscendirError(f"cannot write {what} {p}: directory {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise AscendirError(f"cannot write {what} {p}: permission denied")


def atomic_write(path: str | Path, write: Callable[[Path], None], what: str = "output") -> None:
    """Call `write(tmp)` on a temporary file beside `path`, then rename it to `path`.

    Raises:
        AscendirError: the folder cannot be written (nothing is left behind).
    """
    path = Path(path)
    check_writable(path, what)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=path.suffix)
    except OSError as e:
        raise AscendirError(f"cannot write {what} {path}: {e.strerror}") from None
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, _file_mode(path))  # mkstemp makes 0600; give what open() would
        os.replace(tmp, path)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise AscendirError(f"cannot write {what} {path}: {e.strerror}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _file_mode(path: Path) -> int:
    """The mode of the file being replaced, else 0666 less the umask."""
    try:
        return path.stat().st_mode & 0o777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask
