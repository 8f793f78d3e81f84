"""IR text as ascendir reads and writes it: string literals carry UTF-8 text, as in MLIR.

User text reaches string attributes: ONNX node and tensor names (`onnx.node`, `onnx.name`,
`nn.weight @"..."`; exporters name them in Chinese and other scripts) and the "…" that clips a
long label. MLIR has one string attribute holding bytes, so `"…"` and `"\\E2\\80\\A6"` are the
same string there. xDSL 0.75 splits them: its printer writes every non-ASCII byte as a hex
escape, and its lexer (`MLIRLexer._lex_string_literal`) reads an escaped literal whose bytes are
not ASCII as a BYTES_LIT token, which the attribute parser makes a `BytesAttr`, although the
lexer's docstring says STRING_LIT whenever the payload decodes as UTF-8; an op wanting a
`StringAttr` (`ascend.launch`'s `onnx.node`) then failed to verify, and passes reading
`onnx.node` / `onnx.name` as a `StringAttr` missed them. Neither class below changes xDSL for
anyone else (an xDSL host loading ascendir's plugin keeps its own parser and printer).

* `IRParser`: xDSL's `Parser` whose lexer returns STRING_LIT for every literal that decodes as
  UTF-8 (what the docstring says, and MLIR's reading); one that does not stays BYTES_LIT.
* `IRPrinter`: xDSL's `Printer` writing the printable non-ASCII characters of a string as
  themselves (valid MLIR text: MLIR's lexer takes any byte but `"`, `\\` and a line break), so a
  file names the user's nodes readably, error messages quoting IR show them as written, and a
  plain xDSL reader (`xdsl-opt` with ascendir's plugin) reads them as strings too, as long as the
  literal needs no escape besides (a `"`, `\\` or control character in the same name).
  Invisible characters (controls, format characters such as U+202E, line / paragraph
  separators, unassigned code points) stay escaped: a name cannot hide text or break a line.
"""

from __future__ import annotations

import unicodedata

from xdsl.context import Context
from xdsl.parser import Parser
from xdsl.parser.generic_parser import ParserState
from xdsl.printer import Printer
from xdsl.utils.lexer import Input, Token
from xdsl.utils.mlir_lexer import MLIRLexer, MLIRToken, MLIRTokenKind, StringLiteral

# Unicode general categories of characters IRPrinter escapes: controls, format characters,
# surrogates, private use, unassigned, line and paragraph separators.
_INVISIBLE = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


class _UTF8Lexer(MLIRLexer):
    """xDSL's lexer, a string literal whose escaped bytes decode as UTF-8 being STRING_LIT."""

    def lex(self) -> MLIRToken:
        token = super().lex()
        if token.kind is MLIRTokenKind.BYTES_LIT:
            try:
                StringLiteral.from_span(token.span).bytes_contents.decode()
            except UnicodeDecodeError:
                return token
            return Token(MLIRTokenKind.STRING_LIT, token.span)
        return token


class IRParser(Parser):
    """xDSL's `Parser` (same arguments: context, text or UTF-8 bytes, source name for messages)
    reading a string literal that decodes as UTF-8 as a string (`StringAttr`, symbol names),
    escaped or not. Raises what `Parser` raises (ParseError, ...)."""

    def __init__(self, ctx: Context, input: str | bytes, name: str = "<unknown>") -> None:
        super().__init__(ctx, input, name)
        text = input.decode("utf-8") if isinstance(input, bytes) else input
        self._parser_state = ParserState(_UTF8Lexer(Input(text, name)))


class IRPrinter(Printer):
    """xDSL's `Printer` (same arguments) writing the printable non-ASCII characters of string
    literals as UTF-8 text instead of byte escapes; ASCII is escaped as xDSL does it."""

    def print_string_literal(self, string: str) -> None:
        if string.isascii():
            super().print_string_literal(string)
            return
        self.print_string('"')
        run: list[str] = []  # characters written as themselves
        for c in string:
            if c >= "\x80" and unicodedata.category(c) not in _INVISIBLE:
                run.append(c)
                continue
            if run:
                self.print_string("".join(run))
                run.clear()
            if " " <= c <= "~" and c not in '"\\':
                self.print_string(c)
            elif c == "\\":
                self.print_string("\\\\")
            else:  # `"`, an ASCII control or an invisible character: its UTF-8 bytes
                self.print_string("".join(f"\\{b:02X}" for b in c.encode("utf-8", "surrogatepass")))
        self.print_string("".join(run) + '"')
