"""User-facing errors: each carries one line naming the node/op and the reason."""


class AscendirError(Exception):
    """An error the CLI prints as one line (exit code 2), never as a traceback."""


class AscendirWarning(UserWarning):
    """Something about the input the user should know that does not stop the run (e.g. a model
    declaring an output shape other than the one its graph computes); the CLI tools print it as
    one line `warning: ...`."""


# Anything else the tools catch is a bug (in ascendir or below it), not bad input: `ascendir` and
# `ascendir-opt` print internal_error(e) on one line and exit with this status, and print the
# traceback first when the environment sets DEBUG_ENV.
INTERNAL_ERROR_EXIT = 1
DEBUG_ENV = "ASCENDIR_DEBUG"


def internal_error(e: BaseException) -> str:
    """The one line for an unexpected exception `e`: `internal error: <type>: <message>` and how
    to get the traceback."""
    return f"internal error: {type(e).__name__}: {' '.join(str(e).split())} (set {DEBUG_ENV}=1 for a traceback)"


def one_line(e: BaseException) -> str:
    """The message of `e` (often xDSL's multi-line diagnostic) on one line: the quoted source
    line and its `^^^` marker are dropped, the position and the reason kept."""
    kept: list[str] = []
    for line in str(e).splitlines():
        if line.strip() and set(line.strip()) <= {"^"}:
            if kept:
                kept.pop()  # the source line the carets point into
            continue
        kept.append(line)
    text = " ".join(" ".join(kept).split())
    # xDSL quotes source text in some messages (a 10 kB line): a message stays one short line
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 1] + "…"


MAX_MESSAGE = 400
"""Characters of a message `one_line` keeps (the CLI's `error: ` prefix and path fit in 500)."""


def not_utf8(e: UnicodeDecodeError) -> str:
    """Why IR text failed to decode (a binary or mis-encoded file), e.g. `not UTF-8 text (byte
    0xff at offset 0)`: IR text is UTF-8 (MLIR's own rule)."""
    return f"not UTF-8 text (byte 0x{e.object[e.start]:02x} at offset {e.start})"
