"""Notes a pass leaves for the user: why it left something as it was (one line each).

`ascendir-opt` collects them while its pipeline runs and prints each on stderr as
`ascendir-opt: note: ...` after the IR (as it does choose-tiling's search summary); without a
collector (the Python API) a note goes to stderr at once as `note: ...`. Passes that the lowering
pipeline runs on every kernel say nothing there (see DoubleBuffer.quiet): a note is for a pass
the user asked for.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

_SINKS: list[list[str]] = []


@contextmanager
def collect_notes() -> Iterator[list[str]]:
    """The notes passes leave while open, in order."""
    notes: list[str] = []
    _SINKS.append(notes)
    try:
        yield notes
    finally:
        _SINKS.remove(notes)


def note(message: str) -> None:
    """Leave `message` (one line, starting with the pass name) for the user."""
    if not _SINKS:
        print(f"note: {message}", file=sys.stderr)
    for sink in _SINKS:
        sink.append(message)
