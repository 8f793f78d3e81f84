"""The dialect lit tests cover the dialects: every registered op of `nn` and `ascend` is printed by a
round-trip test (tests/filecheck/dialects/<dialect>/roundtrip_*.mlir), and every verifier or
parser error the dialect code raises is CHECKed by an invalid test (invalid_*.mlir)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from ascendir.dialects.ascend import Ascend
from ascendir.dialects.nn import NN

ROOT = Path(__file__).resolve().parent.parent
DIALECTS = ROOT / "ascendir" / "dialects"
LIT = ROOT / "tests" / "filecheck" / "dialects"


def _check_lines(pattern: str) -> list[str]:
    """The text after `CHECK...:` of every CHECK line of the lit files matching `pattern`."""
    out = []
    for f in sorted(LIT.glob(pattern)):
        out += [m.group(1) for m in re.finditer(r"^// CHECK[\w-]*:\s*(.*)$", f.read_text(), re.M)]
    return out


@pytest.mark.parametrize("dialect", [NN, Ascend], ids=lambda d: d.name)
def test_every_op_has_a_round_trip_test(dialect) -> None:
    printed = "\n".join(_check_lines(f"{dialect.name}/roundtrip_*.mlir"))
    missing = [op.name for op in dialect.operations if not re.search(rf"(^|[\s=\"]){re.escape(op.name)}\b", printed, re.M)]
    assert not missing, f"ops with no round-trip CHECK line in tests/filecheck/dialects/{dialect.name}/: {missing}"


def _pattern(msg: ast.expr) -> str | None:
    """A regex for the text of an error message expression: literal parts as they are, each
    formatted part as `.*`; None for a message that is not a string (or f-string) literal."""
    if isinstance(msg, ast.Constant) and isinstance(msg.value, str):
        return re.escape(msg.value)
    if isinstance(msg, ast.JoinedStr):
        return "".join(re.escape(v.value) if isinstance(v, ast.Constant) else ".*" for v in msg.values)
    return None


def _messages() -> list[tuple[str, str]]:
    """(where, regex) of every `VerifyException(msg)` and `parser.raise_error(msg)` in the
    dialect code."""
    found = []
    for f in sorted(DIALECTS.rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text())):
            if not (isinstance(node, ast.Call) and node.args):
                continue
            fn = node.func
            if (isinstance(fn, ast.Name) and fn.id == "VerifyException") or (isinstance(fn, ast.Attribute) and fn.attr == "raise_error"):
                pattern = _pattern(node.args[0])
                assert pattern is not None, f"{f.name}:{node.lineno}: error message is not a literal"
                found.append((f"{f.relative_to(ROOT)}:{node.lineno}", pattern))
    return found


def test_the_message_scan_finds_the_verifiers() -> None:
    assert len(_messages()) > 100


def _names(c: str, pattern: str) -> bool:
    """CHECK text `c` names the error of `pattern`: it holds a whole message, or it quotes the
    start of one far enough to tell it from the others (past the op name and ": ")."""
    if re.search(pattern, c):
        return True
    first = re.sub(r"\\(.)", r"\1", pattern.split(".*")[0]).rstrip(" ([{'\",")
    head, sep, tail = first.partition(": ")
    return bool(sep) and len(tail) >= 8 and c.startswith(first)


@pytest.mark.parametrize("where, pattern", _messages(), ids=[w for w, _ in _messages()])
def test_every_verifier_error_has_an_invalid_test(where: str, pattern: str) -> None:
    checks = _check_lines("*/invalid_*.mlir")
    assert any(_names(c, pattern) for c in checks), (
        f"{where}: no CHECK line of tests/filecheck/dialects/*/invalid_*.mlir names /{pattern}/"
    )
