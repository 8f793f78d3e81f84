"""Console-script entry points (`ascendir`, `ascendir-opt`): signals end a run as one line.

SIGINT and SIGTERM raise `Signalled` (a BaseException, so no `except Exception` takes it for a
bug) wherever the run is, start-up imports included: output files being written are then
removed (outputs.open_output), and the tool prints `error: interrupted by SIGINT` (or
`terminated by SIGTERM`) and exits with 128 + the signal number (130, 143), as a shell reports a
command a signal ended. A second signal while cleaning up is ignored. Python cannot propagate an
exception out of a weakref callback or a `__del__` (the import system runs such callbacks): a
signal handled there is raised again in the main flow (`_unraisable`).
"""

from __future__ import annotations

import signal
import sys

_ENDED = {signal.SIGINT: "interrupted by SIGINT", signal.SIGTERM: "terminated by SIGTERM"}


class Signalled(BaseException):
    """SIGINT or SIGTERM arrived; `signum` says which."""

    def __init__(self, signum: int):
        super().__init__(_ENDED.get(signum, f"signal {signum}"))
        self.signum = signum


def _raise(signum: int, frame) -> None:
    for s in _ENDED:  # the cleanup the exception triggers is not itself interrupted
        signal.signal(s, signal.SIG_IGN)
    raise Signalled(signum)


def _unraisable(info) -> None:
    """sys.unraisablehook: a `Signalled` raised where Python can only print and drop it (a
    weakref callback, a `__del__`) would lose the signal, so it is raised again a millisecond
    later (SIGALRM), back in the main flow, where it ends the run; anything else as Python
    reports it."""
    if isinstance(info.exc_value, Signalled):
        signum = info.exc_value.signum
        signal.signal(signal.SIGALRM, lambda _s, frame: _raise(signum, frame))
        signal.setitimer(signal.ITIMER_REAL, 0.001)
        return
    sys.__unraisablehook__(info)


def _guarded(tool: str, load) -> None:
    """Run the CLI `load()` returns with the signal handlers installed."""
    for s in _ENDED:
        signal.signal(s, _raise)
    sys.unraisablehook = _unraisable
    try:
        load()()
    except (Signalled, KeyboardInterrupt) as e:
        signum = e.signum if isinstance(e, Signalled) else signal.SIGINT
        prefix = "" if tool == "ascendir" else f"{tool}: "
        print(f"{prefix}error: {_ENDED.get(signum, f'signal {signum}')}", file=sys.stderr)
        sys.exit(128 + signum)


def ascendir() -> None:
    def load():
        from ascendir.api.cli import main

        return main

    _guarded("ascendir", load)


def ascendir_opt() -> None:
    def load():
        from ascendir.api.opt import main

        return main

    _guarded("ascendir-opt", load)
