"""`insert-sync`: `ascend.set_flag` / `ascend.wait_flag` where one pipe must wait for another.

Each tile op runs on one pipe (copies by their (src, dst) spaces, `ascend.mmad` on M, vector ops on
V, `ascend.gather_rows` on MTE2, `memref.load/store` on S) and reads and writes byte ranges of
buffers (the last memref operand is the one written). Two ops on different pipes touching
overlapping bytes of one buffer, one of them writing, need a happens-before path: program order
within a pipe, set_flag -> its matching wait_flag (flags match first-in first-out per (src, dst,
event)), pipe_barrier ALL. Planned buffers (plan-memory `offset`) are compared by their bytes in
the space (per AIV for UB: each has its own), so two buffers that share bytes are ordered too.

910B mix kernels (core_type = #ascend.core_type<mix> on dav-c220, or a module naming no arch): a block is one AIC
and one or two AIVs, each with its own pipes, so a pipe here is a (unit, pipe) slot: copies run on
the unit owning their on-chip space (L1/L0A/L0B/L0C/BT/FB: AIC, UB: AIV), mmad on the AIC,
vector ops and gather_rows on an AIV, `subblock = 1` marks AIV 1's ops (interpreter
compiler.unit_of). Existing flags connect the units the interpreter gives them
(dialects/ascend/flag_placement.py: the `units` attribute, else the nearest op on the pipe). The
same analysis then finds conflicts within each unit and across units; the units share no buffer
but GM, so the latter are GM hand-offs (FixPipe L0C -> GM then MTE2 GM -> UB; MTE3 UB -> GM then
MTE2 GM -> L1) and the WARs of reused workspaces. Every flag inserted in a mix kernel names its
units (`units = #ascend.flag_units<aic -> aiv>`, <aiv1 -> aic>, <aiv -> aiv>, ...), since MTE2 and MTE3 exist on every
unit. pipe_barrier ALL orders the pipes of each unit among themselves only (each unit runs its
own instruction stream; the interpreter, which joins every unit, is never contradicted by
ordering less). A conflict between one pipe on two units (AIV 0's and AIV 1's MTE3 writing the
same GM bytes) has no flag (set_flag joins two different pipes): it is left, with a pass note
naming the kernel, both ops and the buffer. On a coupled chip (910A) a mix kernel is one unit.

Analysis: the kernel body is executed symbolically for the first and the last block (block-cyclic
tiles give the first block the most tiles and the last one the boundary tiles) -- index
arithmetic, subview offsets and `scf.if` conditions are evaluated exactly, each `scf.for` runs its
first `ITERATIONS` iterations (enough to see loop-carried dependences across ping-pong slots)
and its last `LAST` (boundary tiles, branches of the last iteration), the first ones extended so
that the iterations skipped between them are a whole number of the periods of the rings the
loop index selects (`j % 2`, `j % 3`: flags pair first-in first-out, so an odd skip on a 2-slot
ring would pair a wait for one slot with the set after the other, see _sampled) --
with a vector clock per pipe, as the interpreter's race detector does (interpreter/race.py).
Code neither block reaches gets no flags (the interpreter's race detector still checks it when
it runs). Every
unordered conflict (A on pipe P, then B on pipe Q) gets one flag pair, placed in the innermost
block holding both ops, at the ops of that block that contain them (a pipe is in order, so a set
after a loop still follows everything the loop put on P):

* A's op before B's op: a hand-off right before B's op (set then wait: the set also covers every
  op the src pipe was given up to there, so the other conflicts of the same pipes in between
  need no pair of their own);
* otherwise the dependence is carried by an enclosing `scf.for`: a set after A's op, a wait
  before B's, primed with one set before the outermost loop of the kernel around them and drained
  with one wait after it (each execution of the block waits then sets, so the pair stays balanced
  however often the block runs; priming outside every loop avoids a bubble per outer iteration),
  so every wait has an earlier set and every set is consumed (the Ascend C TQue pattern).

Event ids: hand-offs of a pipe pair share one id (a set immediately waited for is never
outstanding; in a mix kernel only hand-offs between the same units); any other pair takes the
lowest id of the (P, Q) pair not used in the kernel, of the 8 the hardware has (S6
EVENT_ID0-7), whatever units it connects (the interpreter matches a flag by pipes and id, so
one id connects one pair of units); more is an error naming the kernel. The analysis runs again after each round
of insertions (one pair per pipe pair per round, so an inserted pair that also orders another
conflict makes its own pair unnecessary) until no conflict is left.

Why the lowering templates keep their own flags: their queues (kernel_builder.Queue) encode
the pipeline each template was designed around -- one event pair per ping-pong slot selected by
the parity of a core's running chunk count, the priming outside the outermost loop, the
cross-unit workspace rings of mix kernels primed several times -- which a generic pass would
have to rediscover to do as well. On their kernels this pass proves that nothing is missing (it
inserts nothing: tests/test_insert_sync.py checks every corpus kernel, mix kernels included) and
is the tool for IR that has no flags (hand-written, or single-buffered loops that `double-buffer`
split into ping-pong slots).

Control flow that depends on data (a loop bound or an `scf.if` condition computed from a scalar
read from memory, e.g. GroupedMatmul's group list) is covered the way a compiler covers a trip
count or a branch unknown at compile time: such a site has a few outcomes, and the kernel is
executed once per combination of the outcomes of the sites a run reaches (analysis.conflicts),
the conflicts being the union. A data-bound loop runs 0 times, once, and ITERATIONS + LAST (+ r
for each remainder of its ring period) times -- every iteration, so every loop-carried distance
the sampling looks at and every ring slot at the exit (_data_trips) -- or alternates these counts
visit by visit; a data branch is taken, not taken, or alternately. An induction variable whose
start or step is data is data too (the windows it places are anywhere in their source), and
iter_args carry their values. Values read from data still have bounds (bounds.py: `x % 24` is in
[0, 23], sums, products, min / max of bounded values): a comparison they decide is no data
branch, and a data-bound loop runs only the counts its bounds allow (the MoE N-tile loop, at most
one tile per core, runs 0 or 1 times and its second-tile branch is never taken: 10 runs per
block instead of 31). Not covered: combinations of outcomes across the visits of one
site other than "all the same" and "alternating", longer data trip counts (they repeat the
steady state the sampled ones reach). More than MAX_RUNS combinations per block: the kernel is
not analysed (left as it is, as before).

The package, one concept per module: ops.py (the pipe, unit and written buffer of an op, as the
interpreter places it), symbolic.py (the values of the symbolic execution), bounds.py (intervals of the values
that depend on data), analysis.py (the
dependence analysis: `conflicts`), conflict.py (`Conflict`), flags.py (where a flag pair goes
and which event id it takes), redundant.py (`remove_redundant`), sync_pass.py (the rounds of
`insert_sync` and the `InsertSync` pass).
"""

from ascendir.transforms.ascend.insert_sync.analysis import conflicts
from ascendir.transforms.ascend.insert_sync.conflict import Conflict
from ascendir.transforms.ascend.insert_sync.ops import op_pipe, op_unit, split_units, written
from ascendir.transforms.ascend.insert_sync.redundant import remove_redundant
from ascendir.transforms.ascend.insert_sync.sync_pass import InsertSync, insert_sync, shares_bytes

__all__ = [
    "Conflict", "InsertSync", "conflicts", "insert_sync", "op_pipe", "op_unit", "remove_redundant", "shares_bytes",
    "split_units", "written",
]
