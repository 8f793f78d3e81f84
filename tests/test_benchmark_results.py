"""benchmarks/results.py: a benchmark's --write-results replaces its own section of
docs/results.md and nothing else; the command and the machine are written beside the figures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

import results  # noqa: E402


def test_write_section_replaces_only_its_own(tmp_path):
    doc = tmp_path / "results.md"
    results.write_section("corpus", "python benchmarks/corpus.py --write-results", "first\n", 1.0, doc)
    text = doc.read_text()
    assert text.startswith("# Results\n")
    for name in results.SECTIONS:  # every section present, in order, the others pending
        assert text.count(f"<!-- BEGIN {name} -->") == 1
    assert [text.index(f"<!-- BEGIN {n} -->") for n in results.SECTIONS] == sorted(
        text.index(f"<!-- BEGIN {n} -->") for n in results.SECTIONS)
    assert "```text\nfirst\n```" in text and "Machine: " in text and "Command: `python benchmarks/corpus.py" in text
    pending = text.count("Not generated yet")
    assert pending == len(results.SECTIONS) - 1

    results.write_section("fusion", "cmd-f", "ffn table\n", 2.0, doc)
    results.write_section("corpus", "cmd-c", "second\n", 3.0, doc)
    text = doc.read_text()
    assert "first" not in text and "```text\nsecond\n```" in text and "```text\nffn table\n```" in text
    assert text.count("Not generated yet") == pending - 1


def test_script_flag_writes_its_section(tmp_path):
    # calibration --quick is the shortest script run; point RESULTS at a scratch file via a wrapper
    doc = tmp_path / "results.md"
    code = (f"import sys; sys.path.insert(0, {str(BENCH)!r}); import results; results.RESULTS = __import__('pathlib').Path({str(doc)!r}); "
            f"sys.argv = ['calibration.py', '--quick', '--write-results']; import runpy; "
            f"runpy.run_path({str(BENCH / 'calibration.py')!r}, run_name='__main__')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={"OPENBLAS_NUM_THREADS": "1", "PATH": ""})
    assert r.returncode == 0, r.stderr
    text = doc.read_text()
    assert "benchmarks/calibration.py --quick --write-results`" in text
    assert "median |error|" in text and "simulating" not in text  # figures in, progress (stderr) out
