"""Cost functions shared between the tile ops of one form (costmodel.shared_cost): a built-in
factory's function is made once per cost env and per what the factory reads of the op (a copy's
path, layout and transpose; a vector op's name and element types), and costs exactly what the
op's own factory's function costs; other factories are called per op."""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import MemRefType

from ascendir.costmodel import CostEnv, copy, shared_cost, vector
from ascendir.dialects import ascend
from ascendir.dtypes import to_numpy_dtype
from ascendir.hardware import load_target
from ascendir.interpreter.exec import registry

from lowering_harness import small_attention


def _attention_ops():
    """The tile ops of lowering_harness.small_attention."""
    return [o for o in small_attention().walk() if type(o) in registry.COSTS and type(o) in registry.SEMANTICS]


def _values(op):
    """Zero operand values of `op`'s declared shapes (dynamic dims 7) and dtypes (0 for index
    operands)."""
    return [np.zeros([d if d >= 0 else 7 for d in v.type.get_shape()], to_numpy_dtype(v.type.element_type))
            if isinstance(v.type, MemRefType) else 0 for v in op.operands]


def test_shared_functions_cost_what_each_op_costs():
    """Every built-in tile op's shared function gives the OpCost of the op's own factory (GM
    copies for each L2 outcome), while ops of one form share one function: a key missing what a
    factory reads (the transpose of a load) hands an op another form's costs."""
    hw = load_target("ascend910b2")
    ops = _attention_ops()
    env = CostEnv(hw, hw.hbm_bytes_per_cycle / 4)
    fns = [shared_cost(registry.COSTS[type(o)], o, env) for o in ops]
    for o, fn in zip(ops, fns):
        own = registry.COSTS[type(o)](o, env)
        vals = _values(o)
        hits = (None, False, True) if isinstance(o, ascend.CopyOp) else (None,)
        for h in hits:
            kw = {} if h is None else {"hit": h}
            assert fn(*vals, **kw) == own(*vals, **kw), (o.name, h)
    assert len({id(f) for f in fns}) < len(ops) / 4  # a few forms
    transposed = [o for o in ops if isinstance(o, ascend.CopyOp) and o.transpose is not None and o.transpose.value.data]
    assert transposed  # (the test's IR has what the key must tell apart)


def test_forms_apart_and_per_env():
    """Ops of different forms get different functions, the same form under another env (another
    GM share) its own."""
    hw = load_target("ascend910b2")
    ops = _attention_ops()
    env, other = CostEnv(hw, 10.0), CostEnv(hw, 20.0)
    copies = [o for o in ops if isinstance(o, ascend.CopyOp)]
    t = next(o for o in copies if o.transpose is not None and o.transpose.value.data)
    plain = next(o for o in copies if (o.transpose is None or not o.transpose.value.data)
                 and str(o.source.type.memory_space) == str(t.source.type.memory_space)
                 and str(o.dest.type.memory_space) == str(t.dest.type.memory_space))
    assert shared_cost(copy, t, env) is not shared_cost(copy, plain, env)
    assert shared_cost(copy, t, env) is shared_cost(copy, t, env)
    assert shared_cost(copy, t, env) is not shared_cost(copy, t, other)
    v = [o for o in ops if registry.COSTS[type(o)] is vector]
    assert len({id(shared_cost(vector, o, env)) for o in v}) > 1


def test_other_factories_called_per_op():
    """A factory that is not a built-in one (register_op's) is called for every op: nothing says
    what it reads of the op."""
    hw = load_target("ascend910b2")
    ops = _attention_ops()
    env = CostEnv(hw, 10.0)
    calls = []

    def custom(op, env):
        calls.append(op)
        return copy(op, env)

    o = next(o for o in ops if isinstance(o, ascend.CopyOp))
    assert shared_cost(custom, o, env) is not shared_cost(custom, o, env)
    assert calls == [o, o]
