"""User-facing errors: each carries one line naming the node/op and the reason."""


class AscendirError(Exception):
    """An error the CLI prints as one line (exit code 2), never as a traceback."""


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
    return " ".join(" ".join(kept).split())
