"""`ascendir-opt`: run pass pipelines on IR text, with xdsl-opt's flags.

    ascendir-opt in.mlir -p 'fuse-matmul-epilogue,convert-nn-to-ascend{target=ascend910a}'

Named pipelines `O0`, `O1`, `O2` expand to their pass lists (e.g. `-p O2`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from xdsl.xdsl_opt_main import xDSLOptMain

from ascendir.context import DIALECTS
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


def main(args: Sequence[str] | None = None) -> None:
    try:
        AscendirOptMain(description="ascendir modular optimizer driver", args=args).run()
    except Exception as e:  # one line, exit code 2: never a traceback for bad IR
        msg = str(e).strip().splitlines()
        print(f"ascendir-opt: error: {' '.join(msg) if len(msg) < 4 else chr(10).join(msg)}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
