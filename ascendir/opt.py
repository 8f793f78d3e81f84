"""`ascendir-opt`: run pass pipelines on IR text, with xdsl-opt's flags.

    ascendir-opt in.mlir -p 'fuse-matmul-epilogue,convert-nn-to-ascend{target=ascend910a}'

Named pipelines `O0`, `O1`, `O2` expand to their pass lists (e.g. `-p O2`). Errors print one
line `ascendir-opt: error: ...` and exit with code 2; `-o FILE` is written only on success.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Sequence
from typing import IO

from xdsl.utils.exceptions import ArgSpecParseError
from xdsl.xdsl_opt_main import xDSLOptMain

from ascendir.context import DIALECTS
from ascendir.errors import one_line
from ascendir.outputs import atomic_write, check_writable
from ascendir.passes import PASSES, PIPELINES


class AscendirOptMain(xDSLOptMain):
    def register_all_dialects(self) -> None:
        for d in DIALECTS:
            self.ctx.register_dialect(d.name, lambda d=d: d)

    def register_all_passes(self) -> None:
        for name, factory in PASSES.items():
            self.register_pass(name, factory)

    def setup_pipeline(self) -> None:
        spec = self.args.passes
        if spec:
            self.args.passes = ",".join(PIPELINES.get(p, p) for p in spec.split(",") if PIPELINES.get(p, p))
        super().setup_pipeline()

    def prepare_output(self) -> IO[str]:
        # Buffer the result; `run` writes the file only once every chunk went through.
        if self.args.output_file is None:
            return sys.stdout
        self.buffer = _Buffer()
        return self.buffer

    def run(self) -> None:
        if self.args.output_file is not None:
            check_writable(self.args.output_file)  # before any work
        super().run()
        if self.args.output_file is not None:
            text = self.buffer.getvalue()
            atomic_write(self.args.output_file, lambda p: p.write_text(text))


class _Buffer(io.StringIO):
    def close(self) -> None:  # xDSLOptMain closes its output stream; keep the text readable
        pass


def main(args: Sequence[str] | None = None) -> None:
    from ascendir.pass_notes import collect_notes
    from ascendir.transforms.choose_tiling import log_summary, search_log

    try:
        with search_log() as log, collect_notes() as notes:
            AscendirOptMain(description="ascendir modular optimizer driver", args=args).run()
        # what choose-tiling scored, what a pass left alone and why: stderr, so the IR on stdout
        # stays as it was
        for line in ([log_summary(log)] if log else []) + notes:
            print(f"ascendir-opt: note: {line}", file=sys.stderr)
    except (Exception, ArgSpecParseError) as e:  # one line, exit code 2: never a traceback for bad IR
        msg = f"{e.filename}: {e.strerror}" if isinstance(e, OSError) and e.filename else one_line(e)
        print(f"ascendir-opt: error: {msg}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
