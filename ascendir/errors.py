"""User-facing errors: each carries one line naming the node/op and the reason."""


class AscendirError(Exception):
    """An error the CLI prints as one line (exit code 2), never as a traceback."""
