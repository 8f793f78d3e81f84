# lit configuration of the MLIR-style pass tests: one folder per pass, RUN lines through
# ascendir-opt and filecheck from the project's virtualenv.
import os

import lit.formats

config.name = "ascendir"
config.test_format = lit.formats.ShTest(False)  # lit's internal shell (ShTest(True) is deprecated)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = config.test_source_root

_bin = os.path.join(os.path.dirname(os.path.dirname(config.test_source_root)), ".venv", "bin")
# Whole words only, so a path such as tests/filecheck/... in %s is left alone.
for _tool in ("ascendir-opt", "filecheck"):
    config.substitutions.append((rf"(?<![\w/.-]){_tool}(?![\w/.-])", os.path.join(_bin, _tool)))
config.environment["OPENBLAS_NUM_THREADS"] = "1"
