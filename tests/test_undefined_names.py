"""No name is read that nothing defines (pyflakes), in the package and the benchmark scripts.

A refactor that drops a name some code still reads fails only when that code runs; for rarely run
code (the slow calibration rows, error paths) that can be long after it lands."""

from __future__ import annotations

import re
from pathlib import Path

from pyflakes import api, messages, reporter

ROOT = Path(__file__).resolve().parents[1]


class _Collect(reporter.Reporter):
    def __init__(self) -> None:
        self.found: list = []

    def flake(self, message) -> None:
        self.found.append(message)

    def unexpectedError(self, filename, msg) -> None:
        raise AssertionError(f"{filename}: {msg}")

    def syntaxError(self, filename, msg, lineno, offset, text) -> None:
        raise AssertionError(f"{filename}:{lineno}: {msg}")


def _deleted(path: str, name: str) -> bool:
    """A self-calling closure deleted after use (`del name`, to break its reference cycle): pyflakes
    reads the later `del` as the name's end and reports the calls inside it."""
    return re.search(rf"^\s*del {re.escape(name)}\b", Path(path).read_text(), re.M) is not None


def test_no_undefined_names():
    rep = _Collect()
    api.checkRecursive([str(ROOT / "ascendir"), str(ROOT / "benchmarks")], rep)
    bad = [f"{m.filename}:{m.lineno}: undefined name {m.message_args[0]!r}" for m in rep.found
           if isinstance(m, (messages.UndefinedName, messages.UndefinedLocal, messages.UndefinedExport))
           and not _deleted(m.filename, m.message_args[0])]
    assert not bad, "\n".join(bad)
