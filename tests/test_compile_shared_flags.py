"""A kernel's timed set_flag / wait_flag closures are made once per op class and flag ends
(exec/sync_ops.py `_timed_flag`): a closure reads nothing of its op but its source and
destination pipe slots and event, so flags of one kind and ends share it; flags that differ in
kind or in any end keep their own. (That a shared closure queued on a held pipe replays as its
own would: tests/test_interpreter_holds.py.)"""

from __future__ import annotations

from ascendir.dialects import ascend
from ascendir.hardware import load_target
from ascendir.interpreter.sim.chip import compile_module
from ascendir.interpreter.timing.timeline import NPIPES

from lowering_harness import small_attention

HW = load_target("ascend910b2")


def test_one_timed_closure_per_kind_and_ends():
    """Flags of one class and ends get one closure, any other pair of flags two: a key without
    the class would run a wait as a set, one without an end would charge another pipe."""
    prog = compile_module(small_attention(), HW, timing_only=True)
    (kp,) = [k for k in prog.kernels.values() if any(isinstance(o, ascend.FlagOp) for o in k._info.tree.ops)]
    flags = [o for o in kp._info.tree.ops if isinstance(o, ascend.FlagOp)]
    keys = {(type(o), kp._info.flag_ends[o]) for o in flags}
    assert len(flags) > 2 * len(keys)  # (repeated flags: the case shared)
    assert len({type(o) for o in flags}) == 2 and len({kp._info.flag_ends[o] for o in flags}) > 4
    closures: dict = {}
    for o in flags:
        closures.setdefault((type(o), kp._info.flag_ends[o]), set()).add(id(kp._comp.op(o)))
    assert all(len(c) == 1 for c in closures.values())
    assert len({next(iter(c)) for c in closures.values()}) == len(keys)
    prog.close()



def test_prewalk_units_are_read_per_op():
    """The pre-walk reads each op's static pipe along the kernel's ops (`statics`, a list in
    their order): the flags' units and the static-pipe ops' unit masks it gives are those of the
    same facts asked op by op (a list out of step with the ops hands one op another's pipe)."""
    from ascendir.dialects.ascend import FLAG_UNITS_ATTR, subblock
    from ascendir.dialects.ascend.flag_placement import flag_units
    from ascendir.interpreter.exec.common import unit_of
    from ascendir.interpreter.sim.kernel import _copy_pipe, _type_pipe

    module = small_attention()
    for o in module.walk():  # (without the lowering's unit hints, a flag's ends follow its nearest static ops)
        if isinstance(o, ascend.FlagOp):
            o.attributes.pop(FLAG_UNITS_ATTR, None)
    prog = compile_module(module, HW, timing_only=True)
    (kp,) = [k for k in prog.kernels.values() if k.nunits > 1]
    order = kp._info.tree.ops[1:]
    static = {}
    for o in order:
        s = _type_pipe(type(o))
        static[o] = _copy_pipe(kp._info.paths[o]) if s == "copy" else s
    assert sum(s is not None for s in static.values()) > 10
    placed = [(static[o][0], unit_of(static[o][0], static[o][1], 2, subblock(o))) if static[o] else None for o in order]
    ends = flag_units(order, placed)
    assert {o: (e[0] // NPIPES, e[1] // NPIPES) for o, e in kp._info.flag_ends.items()} == ends
    masks = {o: 1 << unit_of(s[0], s[1], kp.nunits, subblock(o)) for o, s in static.items()
             if s and not isinstance(o, ascend.FlagOp)}
    assert {o: m for o, m in kp._info.op_units.items() if not isinstance(o, ascend.FlagOp)} == masks
    prog.close()
