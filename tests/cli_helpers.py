"""Shared helpers for tests that drive the `ascendir` CLI through click's CliRunner."""

from __future__ import annotations

from click.testing import CliRunner, Result

from ascendir.api.cli import main


def run_cli(*args: object) -> Result:
    """`ascendir ARGS...` in-process; exceptions propagate (a traceback fails the test)."""
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def assert_clean_error(result: Result, *fragments: str) -> str:
    """Bad input's contract: exit code 2 and one line `error: ...` containing every fragment,
    no traceback. Returns that line."""
    assert result.exit_code == 2, result.output
    out = result.output.strip()
    assert out.startswith("error: "), out
    assert len(out.splitlines()) == 1, out
    assert "Traceback" not in out
    for f in fragments:
        assert f in out, out
    return out
