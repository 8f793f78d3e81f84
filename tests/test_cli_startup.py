"""What keeps `ascendir --help` fast (issue 21: under 0.3 s; benchmarks/cli_startup.py measures
it): the help text imports none of the heavy packages, which load only when a command runs."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("numpy", "xdsl", "rich", "onnx", "onnxruntime", "jsonschema", "ml_dtypes")


def test_help_imports_no_heavy_package() -> None:
    code = (
        "import sys\n"
        "from ascendir.api.cli import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print('heavy:', *(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "Usage:" in r.stdout
    assert r.stdout.strip().splitlines()[-1] == "heavy:"
