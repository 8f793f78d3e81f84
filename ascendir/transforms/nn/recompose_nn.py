"""`recompose-nn`: rebuild the named ops that ONNX exporters decompose.

Patterns (operand order of commutative ops and Div-by-c vs Mul-by-1/c are both accepted; every
intermediate must have no user outside the pattern, so nothing is computed twice):

* RMSNorm → `nn.rms_norm(x, w)`:
      ms = reduce_mean(pow(x, 2) | mul(x, x), last axes, keepdims)
      r  = reciprocal(sqrt(ms + eps)) | div(1, sqrt(ms + eps)) | rsqrt(ms + eps)
      y  = mul(x, r)   (or div(x, sqrt(ms + eps)));   out = mul(y, w)
  (torch.onnx dynamo=False emits Div(1, Sqrt), dynamo=True emits Reciprocal(Sqrt)).
* LayerNormalization → `nn.layer_norm(x, w, b)`:
      d = x - reduce_mean(x); var = reduce_mean(pow(d, 2) | mul(d, d))
      y = d / sqrt(var + eps)  (or d * reciprocal/rsqrt); out = y * w [+ b]
* GELU → `nn.gelu` (approximate none): 0.5 · x · (1 + erf(x / √2)) in any association
  (x·(1+erf)·0.5, (0.5·x)·(1+erf), x·((1+erf)·0.5)); x / √2 may be x · (1/√2).
* GELU tanh → `nn.gelu {approximate = #nn.gelu_approximate<tanh>}`: 0.5 · x · (1 + tanh(√(2/π) · (x + 0.044715 · x³)))
  with x³ as pow(x, 3) or x·x·x.
* SiLU → `nn.silu`: x · sigmoid(x).
* Scaled dot-product attention → `nn.attention`:
      s = matmul(q, kT) [· c | / c] [+ mask];  out = matmul(softmax(s, -1), v)
  where kT is a transpose whose last two dims swap a [B, H, S, D] key; K and V that went through
  repeat_kv (reshape [B, Hkv, 1, S, D] → expand [B, Hkv, n, S, D] → reshape [B, Hkv·n, S, D])
  are used before the repeat, giving num_kv_heads = Hkv (GQA) with no copy. The mask, when it is
  `where(and(T, P), 0, lowest)` (or `where(T, 0, lowest)`, or a constant) with T a constant
  lower-triangular boolean (aligned to the last query), becomes causal = true and the remaining
  mask `where(P, 0, lowest)`; an all-true T just drops out. A mask whose triangle cannot be read
  (an nn.weight with no visible WeightStore) stays an ordinary additive mask.

The resulting module computes the same values as the input up to float rounding (the tests run
both with run_nn on every corpus transformer).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import BoolAttr, FloatAttr, IntegerAttr, ModuleOp, TensorType, i1, i64
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from ascendir.dialects import nn
from ascendir.dtypes import is_float
from ascendir.patterns import (
    Constants, erase_dead, funcs, other_operand, single_use,
)
from ascendir.session import session_of

SQRT2 = math.sqrt(2.0)
GELU_TANH_C = math.sqrt(2.0 / math.pi)
# An additive mask value at or below this is "masked" (HF uses finfo.min, some exporters -1e9 / -inf).
MASKED_BELOW = -1e4


def _insert_before(anchor: Operation, *ops: Operation) -> None:
    anchor.parent_block().insert_ops_before(list(ops), anchor)


def _replace(old: Operation, new_ops: list[Operation], value: SSAValue) -> None:
    """Insert `new_ops` before `old`, route `old`'s result to `value`, erase the dead pattern. The
    new ops keep the ONNX node of the op whose result they take over (reports name it)."""
    node = old.attributes.get("onnx.node")
    if node is not None:
        for op in new_ops:
            op.attributes.setdefault("onnx.node", node)
    _insert_before(old, *new_ops)
    old.results[0].replace_all_uses_with(value)
    erase_dead([old])


def _last_axes(x: SSAValue, red: Operation) -> int | None:
    """First reduced axis if `red` reduces exactly the trailing axes of x (keepdims), else None."""
    if not isinstance(red, nn.ReduceMeanOp) or not red.keepdims.value.data:
        return None
    rank = len(nn.shape_of(x))
    axes = list(red.axes.get_values())
    if not axes or axes != list(range(axes[0], rank)):
        return None
    return axes[0]


def _is_square_of(op: Operation | None, x: SSAValue, consts: Constants) -> bool:
    if isinstance(op, nn.PowOp):
        return op.lhs == x and consts.is_scalar(op.rhs, 2.0)
    return isinstance(op, nn.MulOp) and op.lhs == x and op.rhs == x


def _inverse_sqrt_user(a: SSAValue, consts: Constants) -> tuple[str, Operation, list[Operation]] | None:
    """From `a` = var + eps, the op applying 1/sqrt(a) to the data: ("div", div(d, sqrt(a)))
    or ("mul", mul(d, r)) with r = reciprocal(sqrt) | div(1, sqrt) | rsqrt. Returns (how, op,
    intermediate ops)."""
    u = single_use(a)
    if isinstance(u, nn.RsqrtOp):
        m = single_use(u.result)
        return ("mul", m, [u]) if isinstance(m, nn.MulOp) else None
    if not isinstance(u, nn.SqrtOp):
        return None
    s = u.result
    w = single_use(s)
    if isinstance(w, nn.DivOp) and w.rhs == s and w.lhs != s:
        if consts.is_scalar(w.lhs, 1.0):
            m = single_use(w.result)
            return ("mul", m, [u, w]) if isinstance(m, nn.MulOp) else None
        return ("div", w, [u])
    if isinstance(w, nn.ReciprocalOp):
        m = single_use(w.result)
        return ("mul", m, [u, w]) if isinstance(m, nn.MulOp) else None
    return None


def _norm_weight(y: SSAValue, n_norm: tuple[int, ...]) -> tuple[Operation, SSAValue] | None:
    """`mul(y, w)` (either order) with w of the normalized trailing shape (leading 1s allowed)."""
    m = single_use(y)
    if not isinstance(m, nn.MulOp):
        return None
    w = other_operand(m, y)
    if w is None or w.type.element_type != y.type.element_type:
        return None
    ws = nn.shape_of(w)
    if math.prod(ws) != math.prod(n_norm) or tuple(d for d in ws if d != 1) != tuple(d for d in n_norm if d != 1):
        return None
    if len(ws) > len(n_norm) and any(d != 1 for d in ws[: len(ws) - len(n_norm)]):
        return None
    return m, w


def _flat_param(w: SSAValue, n_norm: tuple[int, ...], anchor: Operation, new: list[Operation]) -> SSAValue:
    """w reshaped to exactly the normalized shape (a free view) when it is not already."""
    if nn.shape_of(w) == n_norm:
        return w
    r = nn.ReshapeOp(w, n_norm)
    new.append(r)
    return r.result


# ----------------------------------------------------------------------------------------------
# normalizations
# ----------------------------------------------------------------------------------------------
def _eps_add(ms: SSAValue, consts: Constants) -> tuple[Operation, float] | None:
    a = single_use(ms)
    if not isinstance(a, nn.AddOp):
        return None
    c = other_operand(a, ms)
    eps = consts.scalar(c) if c is not None else None
    return (a, eps) if eps is not None and 0 <= eps < 1 else None


def match_rms_norm(red: nn.ReduceMeanOp, consts: Constants) -> bool:
    """Rewrite the RMSNorm whose mean-of-squares is `red`; True if it matched."""
    sq = red.input.owner
    if not isinstance(sq, (nn.PowOp, nn.MulOp)) or single_use(sq.results[0]) is not red:
        return False
    x = sq.lhs
    if not _is_square_of(sq, x, consts) or single_use(red.result) is None:
        return False
    axis = _last_axes(x, red)
    ea = _eps_add(red.result, consts)
    if axis is None or ea is None:
        return False
    add, eps = ea
    inv = _inverse_sqrt_user(add.result, consts)
    if inv is None:
        return False
    how, apply, _ = inv
    if (how == "div" and apply.lhs != x) or (how == "mul" and x not in apply.operands):
        return False
    n_norm = nn.shape_of(x)[axis:]
    wm = _norm_weight(apply.results[0], n_norm)
    if wm is None:
        return False
    mul_w, w = wm
    new: list[Operation] = []
    w = _flat_param(w, n_norm, mul_w, new)
    rms = nn.RmsNormOp(
        operands=[x, w], result_types=[x.type],
        properties={"axis": IntegerAttr(axis, i64), "epsilon": FloatAttr(eps, 32)},
    )
    new.append(rms)
    _replace(mul_w, new, rms.result)
    return True


def match_layer_norm(mean: nn.ReduceMeanOp, consts: Constants) -> bool:
    """Rewrite the LayerNorm whose mean is `mean` (x - mean ...); True if it matched."""
    x = mean.input
    axis = _last_axes(x, mean)
    sub = single_use(mean.result)
    if axis is None or not isinstance(sub, nn.SubOp) or sub.lhs != x or sub.rhs != mean.result:
        return False
    d = sub.result
    users = [u.operation for u in d.uses]
    if len(users) not in (2, 3):
        return False
    sq = next((u for u in users if _is_square_of(u, d, consts)), None)
    if sq is None or (isinstance(sq, nn.MulOp) and len(users) != 3) or (isinstance(sq, nn.PowOp) and len(users) != 2):
        return False
    var = single_use(sq.results[0])
    if not isinstance(var, nn.ReduceMeanOp) or _last_axes(d, var) != axis:
        return False
    ea = _eps_add(var.result, consts)
    if ea is None:
        return False
    add, eps = ea
    inv = _inverse_sqrt_user(add.result, consts)
    if inv is None:
        return False
    how, apply, _ = inv
    if (how == "div" and apply.lhs != d) or (how == "mul" and d not in apply.operands) or apply not in users:
        return False
    n_norm = nn.shape_of(x)[axis:]
    wm = _norm_weight(apply.results[0], n_norm)
    if wm is None:
        return False
    mul_w, w = wm
    last, b = mul_w, None
    ba = single_use(mul_w.result)
    if isinstance(ba, nn.AddOp):
        cand = other_operand(ba, mul_w.result)
        if cand is not None and math.prod(nn.shape_of(cand)) == math.prod(n_norm) and nn.shape_of(cand)[-1:] == n_norm[-1:]:
            last, b = ba, cand
    new: list[Operation] = []
    w = _flat_param(w, n_norm, last, new)
    if b is not None:
        b = _flat_param(b, n_norm, last, new)
    ln = nn.LayerNormOp(x, w, b, axis, eps)
    new.append(ln)
    _replace(last, new, ln.result)
    return True


# ----------------------------------------------------------------------------------------------
# activations
# ----------------------------------------------------------------------------------------------
def _half_x_times(a: SSAValue, x: SSAValue, consts: Constants) -> Operation | None:
    """The op computing 0.5 · x · a from `a` in any association, or None."""
    u = single_use(a)
    if not isinstance(u, nn.MulOp):
        return None
    z = other_operand(u, a)
    if z == x:  # (x * a) * 0.5
        h = single_use(u.result)
        if isinstance(h, nn.MulOp) and consts.is_scalar(other_operand(h, u.result) or u.result, 0.5):
            return h
        return None
    if z is not None and isinstance(z.owner, nn.MulOp) and single_use(z) is u:  # (0.5 * x) * a
        if other_operand(z.owner, x) is not None and consts.is_scalar(other_operand(z.owner, x), 0.5):
            return u
        return None
    if z is not None and consts.is_scalar(z, 0.5):  # x * (a * 0.5)
        h = single_use(u.result)
        if isinstance(h, nn.MulOp) and other_operand(h, u.result) == x:
            return h
    return None


def _gelu_final(inner: Operation, x: SSAValue, consts: Constants) -> Operation | None:
    """From erf/tanh `inner`: its + 1, then 0.5 · x · (...)."""
    one = single_use(inner.results[0])
    if not isinstance(one, nn.AddOp) or not consts.is_scalar(other_operand(one, inner.results[0]) or inner.results[0], 1.0):
        return None
    return _half_x_times(one.result, x, consts)


def _scaled_input(v: SSAValue, factor: float, consts: Constants) -> SSAValue | None:
    """x when v = x · factor or x / (1 / factor), v used once."""
    op = v.owner
    if isinstance(op, nn.MulOp):
        for x, c in ((op.lhs, op.rhs), (op.rhs, op.lhs)):
            if consts.is_scalar(c, factor, 1e-5) and not consts.is_scalar(x, factor, 1e-5):
                return x
    if isinstance(op, nn.DivOp) and consts.is_scalar(op.rhs, 1.0 / factor, 1e-5):
        return op.lhs
    return None


def match_gelu_erf(erf: nn.ErfOp, consts: Constants) -> bool:
    x = _scaled_input(erf.input, 1.0 / SQRT2, consts)
    if x is None or single_use(erf.input) is not erf:
        return False
    last = _gelu_final(erf, x, consts)
    if last is None:
        return False
    g = nn.GeluOp(x, approximate="none")
    _replace(last, [g], g.result)
    return True


def _cube_of(v: SSAValue, consts: Constants) -> SSAValue | None:
    op = v.owner
    if isinstance(op, nn.PowOp) and consts.is_scalar(op.rhs, 3.0):
        return op.lhs
    if isinstance(op, nn.MulOp):
        for a, b in ((op.lhs, op.rhs), (op.rhs, op.lhs)):
            sq = b.owner
            if isinstance(sq, nn.MulOp) and sq.lhs == a and sq.rhs == a:
                return a
    return None


def match_gelu_tanh(th: nn.TanhOp, consts: Constants) -> bool:
    s = _scaled_input(th.input, GELU_TANH_C, consts)
    if s is None or not isinstance(s.owner, nn.AddOp):
        return False
    add = s.owner
    for x, q in ((add.lhs, add.rhs), (add.rhs, add.lhs)):
        cube = _scaled_input(q, 0.044715, consts)
        if cube is not None and _cube_of(cube, consts) == x:
            last = _gelu_final(th, x, consts)
            if last is None:
                return False
            g = nn.GeluOp(x, approximate="tanh")
            _replace(last, [g], g.result)
            return True
    return False


def match_silu(sig: nn.SigmoidOp) -> bool:
    x = sig.input
    m = single_use(sig.result)
    if not isinstance(m, nn.MulOp) or other_operand(m, sig.result) != x:
        return False
    s = nn.SiluOp(x)
    _replace(m, [s], s.result)
    return True


# ----------------------------------------------------------------------------------------------
# attention
# ----------------------------------------------------------------------------------------------
def _untranspose_key(kt: SSAValue, anchor: Operation, new: list[Operation]) -> SSAValue | None:
    """The [B, H, S, D] key whose last-two-dims transpose is `kt` ([B, H, D, S])."""
    op = kt.owner
    if isinstance(op, nn.TransposeOp):
        perm = list(op.perm.get_values())
        perm[-1], perm[-2] = perm[-2], perm[-1]
        if perm == list(range(len(perm))):
            return op.input
        t = nn.TransposeOp(op.input, perm)
        new.append(t)
        return t.result
    if len(nn.shape_of(kt)) != 4:
        return None
    t = nn.TransposeOp(kt, [0, 1, 3, 2])
    new.append(t)
    return t.result


def _unrepeat_kv(x: SSAValue) -> SSAValue:
    """kv [B, Hkv, S, D] if x = reshape(expand(reshape(kv))) is repeat_kv of it, else x."""
    r2 = x.owner
    if not isinstance(r2, nn.ReshapeOp):
        return x
    ex = r2.input.owner
    if not isinstance(ex, nn.ExpandOp):
        return x
    r1 = ex.input.owner
    if not isinstance(r1, nn.ReshapeOp):
        return x
    kv = r1.input
    ks, s1, se, s2 = nn.shape_of(kv), nn.shape_of(r1.result), nn.shape_of(ex.result), nn.shape_of(x)
    if len(ks) != 4 or len(s1) != 5:
        return x
    b, hkv, s, d = ks
    if s1 != (b, hkv, 1, s, d) or se[:2] != (b, hkv) or se[3:] != (s, d) or s2 != (b, hkv * se[2], s, d):
        return x
    return kv


def _causal_pattern(t: np.ndarray, sq: int, skv: int) -> str | None:
    """"causal" if boolean t broadcasts to a lower triangle over [sq, skv] aligned to the last
    query (key j visible from query i iff j <= i + skv - sq), "all" if all true, else None."""
    if t.ndim < 2 or any(d != 1 for d in t.shape[:-2]):
        return None
    t2 = np.broadcast_to(t.reshape(t.shape[-2:]), (sq, skv))
    if t2.all():
        return "all"
    tri = np.arange(skv)[None, :] <= np.arange(sq)[:, None] + (skv - sq)
    return "causal" if np.array_equal(t2, tri) else None


def _split_mask(mask: SSAValue, sq: int, skv: int, anchor: Operation, new: list[Operation],
                memo: dict, consts: Constants) -> tuple[bool, SSAValue | None]:
    """(causal, remaining additive mask) for an additive `mask` of scores [.., sq, skv]."""
    if mask in memo:
        return memo[mask]
    result: tuple[bool, SSAValue | None] = (False, mask)
    # a mask holds at most the scores' sq x skv elements (else it has batch / head dims and
    # is no causal triangle): read that much, however long the sequence (8192² > the default)
    arr = consts.array(mask, limit=sq * skv)
    if arr is not None and is_float(arr.dtype) and arr.ndim >= 2 and all(d == 1 for d in arr.shape[:-2]):
        masked = np.broadcast_to(arr.reshape(arr.shape[-2:]), (sq, skv)) <= MASKED_BELOW
        zero = np.broadcast_to(arr.reshape(arr.shape[-2:]), (sq, skv)) == 0
        if np.all(masked | zero):
            kind = _causal_pattern(~masked, sq, skv)
            if kind is not None:
                result = (kind == "causal", None)
    w = mask.owner
    if isinstance(w, nn.WhereOp) and consts.is_scalar(w.lhs, 0.0) and (consts.scalar(w.rhs) or 0.0) <= MASKED_BELOW:
        cond = w.cond
        parts = [cond]
        if isinstance(cond.owner, nn.AndOp):
            parts = [cond.owner.lhs, cond.owner.rhs]
        for i, part in enumerate(parts):
            t = consts.array(part, limit=sq * skv)
            kind = _causal_pattern(t, sq, skv) if t is not None and t.dtype == np.bool_ else None
            if kind is None:
                continue
            rest = parts[1 - i] if len(parts) == 2 else None
            if rest is None:
                result = (kind == "causal", None)
            else:
                if kind == "all" and nn.shape_of(rest) == nn.shape_of(mask):
                    break  # nothing to gain
                rest_arr = consts.array(rest, limit=sq * skv)
                if rest_arr is not None and rest_arr.all():
                    result = (kind == "causal", None)
                else:
                    nw = nn.WhereOp(rest, w.lhs, w.rhs)
                    new.append(nw)
                    result = (kind == "causal", nw.result)
            break
    memo[mask] = result
    return result


def match_attention(sm: nn.SoftmaxOp, memo: dict, consts: Constants) -> bool:
    """Rewrite the attention whose softmax is `sm`; True if it matched."""
    rank = len(nn.shape_of(sm.input))
    if rank != 4 or sm.axis.value.data % rank != rank - 1:
        return False
    pv = single_use(sm.result)
    if not isinstance(pv, nn.MatmulOp) or pv.lhs != sm.result or pv.rhs == sm.result:
        return False
    v = pv.rhs
    s = sm.input
    mask, scale = None, 1.0
    op = s.owner
    if isinstance(op, nn.AddOp) and single_use(s) is sm:
        for a, b in ((op.lhs, op.rhs), (op.rhs, op.lhs)):
            if isinstance(a.owner, (nn.MulOp, nn.DivOp, nn.MatmulOp)) and single_use(a) is op and nn.shape_of(a) == nn.shape_of(s):
                mask, s = b, a
                break
        else:
            return False
        op = s.owner
    if isinstance(op, (nn.MulOp, nn.DivOp)) and single_use(s) is not None:
        if isinstance(op, nn.MulOp):
            for a, c in ((op.lhs, op.rhs), (op.rhs, op.lhs)):
                if isinstance(a.owner, nn.MatmulOp) and consts.scalar(c) is not None:
                    s, scale = a, consts.scalar(c)
                    break
            else:
                return False
        elif isinstance(op.lhs.owner, nn.MatmulOp) and consts.scalar(op.rhs) not in (None, 0.0):
            s, scale = op.lhs, 1.0 / consts.scalar(op.rhs)
        else:
            return False
        if not math.isfinite(scale):  # scores of inf / nan: left to the unfused ops' IEEE semantics
            return False
        op = s.owner
    if not isinstance(op, nn.MatmulOp) or single_use(s) is None:
        return False
    q, kt = op.lhs, op.rhs
    qs, ks, vs = nn.shape_of(q), nn.shape_of(kt), nn.shape_of(v)
    if len(qs) != 4 or len(ks) != 4 or len(vs) != 4 or qs[:2] != ks[:2] or ks[:2] != vs[:2] or vs[2] != ks[3]:
        return False
    new: list[Operation] = []
    k = _untranspose_key(kt, pv, new)
    if k is None:
        return False
    k0, v0 = _unrepeat_kv(k), _unrepeat_kv(v)
    if nn.shape_of(k0)[1] != nn.shape_of(v0)[1]:
        k0, v0 = k, v
    causal = False
    if mask is not None:
        if q.type.element_type != mask.type.element_type:
            return False
        causal, mask = _split_mask(mask, qs[2], ks[3], pv, new, memo, consts)
    att = nn.AttentionOp(q, k0, v0, mask, causal=causal, scale=scale)
    new.append(att)
    _replace(pv, new, att.result)
    return True


@dataclass(frozen=True)
class RecomposeNN(ModulePass):
    """Rebuild nn.rms_norm, nn.layer_norm, nn.gelu, nn.silu and nn.attention from the op chains
    exporters decompose them into."""

    name = "recompose-nn"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        consts = Constants(session_of(ctx).weights)

        def each(cls):
            return [o for f in funcs(op) for o in list(f.body.block.ops) if isinstance(o, cls)]

        for red in each(nn.ReduceMeanOp):
            if red.parent is not None and not match_rms_norm(red, consts):
                if red.parent is not None:
                    match_layer_norm(red, consts)
        for e in each(nn.ErfOp):
            if e.parent is not None:
                match_gelu_erf(e, consts)
        for t in each(nn.TanhOp):
            if t.parent is not None:
                match_gelu_tanh(t, consts)
        for s in each(nn.SigmoidOp):
            if s.parent is not None:
                match_silu(s)
        memo: dict = {}
        for sm in each(nn.SoftmaxOp):
            if sm.parent is not None:
                match_attention(sm, memo, consts)
        # Masks and transposes the rewrites left without users.
        erase_dead([o for f in funcs(op) for o in f.body.block.ops if o.name.startswith("nn.")])
