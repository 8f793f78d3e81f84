"""`ascendir-opt`: run pass pipelines on IR text, with xdsl-opt's flags.

    ascendir-opt in.mlir -p 'fuse-matmul-epilogue,convert-nn-to-ascend{target=ascend910a}'

Named pipelines `O0`, `O1`, `O2` expand to their pass lists (e.g. `-p O2`) and take no options,
as in `ascendir -p` (pipelines.expand_pipelines); `ascend-lowering{target=...}` expands to the
whole lowering (pipelines.ascend_lowering). Bad input (IR that does not parse or verify, a bad
pass pipeline or option, an unreadable file, an error a pass raises) prints one line
`ascendir-opt: error: ...` and exits with code 2; any other exception is a bug and prints
`ascendir-opt: internal error: <type>: <message>` and exits with code 1, as `ascendir` does
(ASCENDIR_DEBUG=1 prints the traceback too). `-o FILE` is written only on success.

`--load-pass-plugin MODULE` (repeatable) adds the passes a Python module lists in its
ASCENDIR_PASSES (passes.load_pass_plugin; docs/writing-a-pass.md), usable in `-p` like the
built-in ones. Passes and dialects of installed xDSL plugins (packages with an `xdsl.universe`
entry point, pipelines.plugin_passes) are there without the flag.
"""

from __future__ import annotations

import io
import os
import sys
import traceback
from collections.abc import Sequence
from typing import IO

from xdsl.utils.exceptions import ArgSpecParseError, DiagnosticException, ParseError
from xdsl.frontend.mlir import MLIRFrontend
from xdsl.targets.mlir import MLIRTarget
from xdsl.xdsl_opt_main import xDSLOptMain

from ascendir.dialects.ir_checks import check_module, check_string_literals
from ascendir.dialects.ir_text import IRParser, IRPrinter
from ascendir.session import DIALECTS, Session, SessionContext
from ascendir.errors import DEBUG_ENV, INTERNAL_ERROR_EXIT, AscendirError, internal_error, not_utf8, one_line
from ascendir.api.outputs import check_writable, write_text
from ascendir.pipelines import PASSES, expand_pipelines, load_pass_plugin, plugin_dialects, plugin_passes


class _MLIRFrontend(MLIRFrontend):
    """xDSL's `.mlir` frontend reading with ascendir's IRParser (UTF-8 string literals)."""

    def parse(self, ctx, input, input_name="input"):
        return IRParser(ctx, input.read(), input_name).parse_module(not self.no_implicit_module)


class _MLIRTarget(MLIRTarget):
    """xDSL's `.mlir` output writing with ascendir's IRPrinter (UTF-8 string literals, as
    `ascendir compile -o` writes them); --syntax-highlight keeps xDSL's printer."""

    def emit(self, ctx, module, output) -> None:
        if self.syntax_highlight:
            super().emit(ctx, module, output)
            return
        printer = IRPrinter(stream=output, print_generic_format=self.print_generic_format,
                            print_properties_as_attributes=self.print_properties_as_attributes,
                            print_debuginfo=self.print_debuginfo)
        printer.print_op(module)
        printer.print_metadata(ctx.loaded_dialects)
        print("\n", file=output)


class AscendirOptMain(xDSLOptMain):
    """xdsl-opt with ascendir's dialects and passes; the passes share one Session (`session`),
    whose notes and search log `main` prints after the IR."""

    session: Session

    def register_all_dialects(self) -> None:
        # xDSLOptMain made a plain Context just before: carry the session in ours instead
        self.session = Session()
        self.ctx = SessionContext(session=self.session)
        for d in DIALECTS:
            self.ctx.register_dialect(d.name, lambda d=d: d)
        ours = {d.name for d in DIALECTS}
        for name, factory in plugin_dialects().items():  # other installed xDSL plugins' dialects
            if name not in ours:
                self.ctx.register_dialect(name, factory)

    def register_all_frontends(self) -> None:
        super().register_all_frontends()
        self.available_frontends["mlir"] = lambda: _MLIRFrontend

    def register_all_targets(self) -> None:
        super().register_all_targets()
        self.available_targets["mlir"] = lambda: _MLIRTarget

    def register_all_passes(self) -> None:
        for name, factory in {**plugin_passes(), **PASSES}.items():  # other xDSL plugins' passes too
            self.register_pass(name, factory)

    def register_all_arguments(self, arg_parser) -> None:
        super().register_all_arguments(arg_parser)
        arg_parser.add_argument(
            "--load-pass-plugin", metavar="MODULE", action="append", default=[],
            help="import this Python module and add the passes its ASCENDIR_PASSES lists (repeatable)",
        )

    def setup_pipeline(self) -> None:
        # plugins first: -p may name their passes (the arguments are only parsed by now)
        for module in dict.fromkeys(self.args.load_pass_plugin):
            for name, factory in load_pass_plugin(module).items():
                if name in self.available_passes:  # xDSL would let the later one win silently
                    raise AscendirError(f"pass plugin '{module}': the pass name '{name}' is taken by another plugin")
                self.register_pass(name, factory)
        spec = self.args.passes
        if spec:
            self.args.passes = expand_pipelines(spec)
        try:
            super().setup_pipeline()
        except AscendirError:  # a pass rejected its options (choose-tiling's tiling=...)
            raise
        except (Exception, ArgSpecParseError) as e:
            # xDSL says what is wrong with the -p text with a ValueError (unknown pass, option or
            # option type) or an ArgSpecParseError (syntax): bad input, not a bug
            raise AscendirError(f"bad pass pipeline '{spec}': {one_line(e)}") from None

    def parse_chunk(self, chunk, file_extension, start_offset=0):
        data = chunk.read()
        try:
            text = data.decode() if isinstance(data, bytes) else data
        except UnicodeDecodeError as e:  # a binary or mis-encoded file: bad input, not a bug
            raise AscendirError(f"{self.get_input_name()}: {not_utf8(e)}") from None
        check_string_literals(text, self.get_input_name())  # before xDSL's lexer, which backtracks on a bad one
        try:
            module = super().parse_chunk(type(chunk)(data) if isinstance(chunk, (io.BytesIO, io.StringIO)) else io.BytesIO(text.encode()),
                                         file_extension, start_offset)
        except RecursionError:
            raise AscendirError(f"{self.get_input_name()}: regions or attributes nested too deeply to parse") from None
        except OverflowError as e:  # xDSL packs a dense literal (1e308 as f32) without a ParseError
            raise AscendirError(f"{self.get_input_name()}: a literal does not fit its element type ({e})") from None
        except ValueError as e:  # xDSL's attributes check their range so (a subview size 2^64 as i64)
            raise AscendirError(f"{self.get_input_name()}: parse error: {one_line(e)}") from None
        if module is not None:  # xDSL accepts a value used before its definition; the passes would not
            check_module(module)
        return module

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
            write_text(self.args.output_file, text)


class _Buffer(io.StringIO):
    def close(self) -> None:  # xDSLOptMain closes its output stream; keep the text readable
        pass


def main(args: Sequence[str] | None = None) -> None:
    from ascendir.transforms.nn.choose_tiling import log_summary

    try:
        opt = AscendirOptMain(description="ascendir modular optimizer driver", args=args)
        opt.run()
        # what choose-tiling scored, what a pass left alone and why: stderr, so the IR on stdout
        # stays as it was
        log = opt.session.search_log
        for line in ([log_summary(log)] if log else []) + opt.session.notes:
            print(f"ascendir-opt: note: {line}", file=sys.stderr)
    except (AscendirError, ParseError, DiagnosticException, ArgSpecParseError, OSError) as e:
        # bad input (IR, pipeline, options, files): one line, exit code 2, never a traceback
        msg = f"{e.filename}: {e.strerror}" if isinstance(e, OSError) and e.filename else one_line(e)
        print(f"ascendir-opt: error: {msg}", file=sys.stderr)
        sys.exit(2)
    except MemoryError as e:  # IR larger than this machine's memory
        print(f"ascendir-opt: error: out of memory: {one_line(e)}", file=sys.stderr)
        sys.exit(2)
    except Exception as e:  # a bug: one line, the traceback only on request (as `ascendir` does)
        if os.environ.get(DEBUG_ENV):
            traceback.print_exc()
        print(f"ascendir-opt: {internal_error(e)}", file=sys.stderr)
        sys.exit(INTERNAL_ERROR_EXIT)


if __name__ == "__main__":
    main()
