"""The compilation session: what passes hand each other and the user besides the IR.

A pipeline run carries one `Session` in its xDSL context (`SessionContext`): the WeightStore
that pattern passes may read (a causal mask or a BatchNorm scale stored as an initializer), the
notes passes leave for the user (why something was left as it was, one line each), and
choose-tiling's search log (candidates scored per op kind). Nothing of it lives in module
globals, so two pipelines in one process (threads, tests) never see each other's weights, notes
or logs.

    session = Session(weights=store)
    PassPipeline(...).apply(make_context(session), module)
    session.notes, session.search_log

A pass reads it with `session_of(ctx)`; a context that carries none (a plain xDSL `Context`,
e.g. from another tool's driver) gets a throwaway session whose notes go to stderr at once.
The session sits below the passes and above the dialects it loads, so every pass can reach it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.arith import Arith
from xdsl.dialects.builtin import Builtin
from xdsl.dialects.func import Func
from xdsl.dialects.memref import MemRef
from xdsl.dialects.scf import Scf

from ascendir.dialects.ascend import Ascend
from ascendir.dialects.nn import NN
from ascendir.weights import WeightStore

DIALECTS = (Builtin, Func, Arith, Scf, MemRef, NN, Ascend)


@dataclass
class SearchStats:
    """What choose-tiling did for one op kind: ops annotated, distinct problems searched (a
    model repeats its layers' shapes), candidates scored by the analytic estimate, seconds."""

    ops: int = 0
    searches: int = 0
    candidates: int = 0
    seconds: float = 0.0


@dataclass(frozen=True)
class DeclinedRegion:
    """An `nn.fused` region its kind's template declined, so it was lowered op by op."""

    region: str  # as errors name it: `nn.fused #5 (ffn, from '/mlp/fc1/Gemm')`
    kind: str
    reason: str


@dataclass
class Session:
    """State one pipeline run shares between its passes and its caller.

    Attributes:
        weights: the store `nn.weight` ops refer to, readable by pattern passes; None when the
            IR came as text without weights (then weight-reading patterns match nothing).
        notes: what passes left for the user, in order (one line each, starting with the pass
            name).
        echo_notes: print each note to stderr as `note: ...` when it is left (the Python API's
            default: nobody else would show it); the CLI tools collect and print them instead.
        search_log: choose-tiling's SearchStats per op kind ("matmul", "attention").
        declined: the regions convert-nn-to-ascend lowered op by op because their template
            declined them, with the template's reason.
        rank_stores: after shard-tensor-parallel, one WeightStore per rank (`weights` is then
            rank 0's).
    """

    weights: WeightStore | None = None
    notes: list[str] = field(default_factory=list)
    echo_notes: bool = False
    search_log: dict[str, SearchStats] = field(default_factory=dict)
    declined: list[DeclinedRegion] = field(default_factory=list)
    rank_stores: list[WeightStore] | None = None

    def note(self, message: str) -> None:
        """Leave `message` (one line, starting with the pass name) for the user."""
        self.notes.append(message)
        if self.echo_notes:
            print(f"note: {message}", file=sys.stderr)

    def record_search(self, kind: str, searched: bool, candidates: int, seconds: float) -> None:
        """Count one op of `kind` that choose-tiling annotated (`searched`: a new problem)."""
        st = self.search_log.setdefault(kind, SearchStats())
        st.ops += 1
        st.searches += int(searched)
        st.candidates += candidates
        st.seconds += seconds


@dataclass
class SessionContext(Context):
    """An xDSL Context that carries the run's Session (xDSL passes get the context in `apply`)."""

    session: Session = field(default_factory=lambda: Session(echo_notes=True))

    def clone(self) -> SessionContext:
        # xDSL clones the context to apply a pass to a copy (apply_to_clone): the copy shares
        # the session, so what the pass leaves reaches the caller
        base = super().clone()
        return SessionContext(**{f: getattr(base, f) for f in base.__dataclass_fields__}, session=self.session)


def make_context(session: Session | None = None) -> SessionContext:
    """A fresh context with builtin, func, arith, scf, memref, nn and ascend loaded, carrying
    `session` (a new one that echoes its notes when None)."""
    ctx = SessionContext() if session is None else SessionContext(session=session)
    for d in DIALECTS:
        ctx.load_dialect(d)
    return ctx


def session_of(ctx: Context) -> Session:
    """The session `ctx` carries; a throwaway one (notes echoed) for a plain Context."""
    return ctx.session if isinstance(ctx, SessionContext) else Session(echo_notes=True)
