"""RNN, GRU and LSTM, unrolled over their static sequence length into nn ops.

The input projection of every time step is one matmul, X [seq, batch, I] @ W^T [I, G·H] plus
both biases where they add (the cuDNN / CANN DynamicRNN split: the big GEMM runs on the cube
at full width, only the recurrent part H_{t-1} @ R^T stays per step). Each step then slices its
row of that product, adds H_{t-1} @ R^T and applies the gate functions, as the ONNX operator
definitions write them (gate order RNN i; GRU z, r, h; LSTM i, o, f, c). Directions run
independently and are stacked on the num_directions axis.

`sequence_lens` masks: a batch entry whose sequence has ended keeps its state and outputs zeros
(onnxruntime's rule); in the reverse direction its state stays the initial one until its last
valid step, so one mask per step serves both directions. An empty sequence (length 0) ends with
zero Y_h / Y_c, not its initial state, as onnxruntime gives (the ONNX text leaves it open).
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import FloatAttr
from xdsl.ir import SSAValue

from ascendir.dialects import nn
from ascendir.frontends.onnx.conversion import NodeContext
from ascendir.frontends.onnx.converters.registry import converts
from ascendir.frontends.onnx.values import Constant, Value

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
# The activations each op applies by default (f for gates, g for the candidate, h for the cell output).
DEFAULT_ACTIVATIONS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}


@converts("RNN", "GRU", "LSTM")
def convert_recurrent(node: NodeContext) -> list[Value | None]:
    """RNN / GRU / LSTM → per-direction unrolled nn ops: outputs Y [seq, dirs, batch, H]
    (layout 1: [batch, seq, dirs, H]), Y_h [dirs, batch, H] (layout 1: [batch, dirs, H]) and,
    for LSTM, Y_c like Y_h. Attributes as ONNX: direction, hidden_size, activations (Sigmoid,
    Tanh, Relu, HardSigmoid, LeakyRelu, Affine, ScaledTanh with their alpha / beta), clip,
    input_forget (LSTM), linear_before_reset (GRU), layout.

    Raises:
        AscendirError (naming the node): a non-float input, a shape that disagrees with
            hidden_size / direction, an activation the importer has no decomposition for.
    """
    op = node.op_type
    dtype = node.dtype(0)
    if not (dtype.kind == "f" or dtype.name == "bfloat16"):
        raise node.error(f"expects float inputs, got {dtype}")
    layout = int(node.attr("layout", 0))
    x = node.value(0)
    if len(node.shape(0)) != 3:
        raise node.error(f"X must be 3-D, got shape {list(node.shape(0))}")
    if layout:
        x = node.emit(nn.TransposeOp(x, [1, 0, 2]))
    seq, batch, isize = nn.shape_of(x)
    direction = node.attr("direction", "forward")
    direction = direction.decode() if isinstance(direction, bytes) else direction
    dirs = 2 if direction == "bidirectional" else 1
    hidden = int(node.attr("hidden_size", 0)) or node.shape(2)[-1]
    gates = GATES[op]
    for i, want in ((1, (dirs, gates * hidden, isize)), (2, (dirs, gates * hidden, hidden))):
        if node.shape(i) != want:
            raise node.error(f"{'WR'[i - 1]} has shape {list(node.shape(i))}, expected {list(want)} "
                             f"(direction {direction}, hidden_size {hidden})")
    if seq == 0 or batch == 0:
        raise node.error(f"X has zero size (shape {list(node.shape(0))})")
    acts = _activations(node, op, dirs)
    clip = node.attr("clip")
    rnn = _Unroll(node, op, dtype, hidden, gates, None if clip is None else float(clip))
    mask = _masks(node, seq, batch, dtype) if node.has_input(4) else None
    nonempty = _nonempty(node, batch) if mask is not None else None

    ys, hs, cs = [], [], []
    for d in range(dirs):
        reverse = direction == "reverse" or d == 1
        y, h, c = rnn.direction(x, d, reverse, acts[d], mask, layout)
        if nonempty is not None:
            zero = node.constant(np.zeros((1, 1, 1), dtype), "zero_state")
            h = node.emit(nn.WhereOp(nonempty, h, zero))
            c = node.emit(nn.WhereOp(nonempty, c, zero)) if c is not None else None
        ys.append(y)
        hs.append(h)
        cs.append(c)
    # Y: [seq, dirs, batch, H]; Y_h / Y_c: [dirs, batch, H]
    y = node.emit(nn.ConcatOp(ys, 1)) if dirs > 1 else ys[0]
    y_h = node.emit(nn.ConcatOp(hs, 0)) if dirs > 1 else hs[0]
    y_c = (node.emit(nn.ConcatOp(cs, 0)) if dirs > 1 else cs[0]) if op == "LSTM" else None
    if layout:
        y = node.emit(nn.TransposeOp(y, [2, 0, 1, 3]))
        y_h = node.emit(nn.TransposeOp(y_h, [1, 0, 2]))
        y_c = node.emit(nn.TransposeOp(y_c, [1, 0, 2])) if y_c is not None else None
    return [y, y_h, y_c][: len(node.node.output)]


def _activations(node: NodeContext, op: str, dirs: int) -> list[list[tuple[str, float | None, float | None]]]:
    """Per direction, the (name, alpha, beta) of each activation the op applies."""
    per = len(DEFAULT_ACTIVATIONS[op])
    names = [a.decode() if isinstance(a, bytes) else a for a in (node.attr("activations") or DEFAULT_ACTIVATIONS[op] * dirs)]
    if len(names) != per * dirs:
        raise node.error(f"activations lists {len(names)} functions, {op} with {dirs} direction(s) takes {per * dirs}")
    # Each function takes the next alpha / beta only when it has one (onnxruntime's reading of
    # "consumed in the order of the activation functions"): LSTM HardSigmoid, Tanh, Tanh takes
    # one alpha, not three.
    alphas = iter(node.attr("activation_alpha") or [])
    betas = iter(node.attr("activation_beta") or [])
    out = []
    for name in names:
        if name not in _ACTIVATIONS:
            raise node.error(f"activation {name} is not supported (supported: {', '.join(_ACTIVATIONS)})")
        out.append((name, next(alphas, None) if name in _HAS_ALPHA else None, next(betas, None) if name in _HAS_BETA else None))
    return [out[d * per:(d + 1) * per] for d in range(dirs)]


def _masks(node: NodeContext, seq: int, batch: int, dtype: np.dtype) -> list[SSAValue] | None:
    """Per step t, a [batch, 1] i1 mask `t < sequence_lens[b]`, or None when every sequence is
    known to be full length."""
    if node.shape(4) != (batch,):
        raise node.error(f"sequence_lens has shape {list(node.shape(4))}, expected [{batch}]")
    lens = node.const(4)
    if lens is not None:
        if np.any(lens < 0) or np.any(lens > seq):
            raise node.error(f"sequence_lens {lens.tolist()} out of range [0, {seq}]")
        if np.all(lens == seq):
            return None
        return [node.constant((t < lens).reshape(batch, 1), f"mask{t}") for t in range(seq)]
    lens = node.emit(nn.ReshapeOp(node.value(4), [batch, 1]))
    return [node.emit(nn.LessOp(node.constant(np.full((1, 1), t, node.dtype(4)), f"step{t}"), lens)) for t in range(seq)]


def _nonempty(node: NodeContext, batch: int) -> SSAValue | None:
    """A [1, batch, 1] i1 mask `sequence_lens[b] > 0`, or None when no sequence can be empty."""
    lens = node.const(4)
    if lens is not None:
        return node.constant((lens > 0).reshape(1, batch, 1), "nonempty") if np.any(lens == 0) else None
    lens = node.emit(nn.ReshapeOp(node.value(4), [1, batch, 1]))
    return node.emit(nn.GreaterOp(lens, node.constant(np.zeros((1, 1, 1), node.dtype(4)), "no_steps")))


class _Unroll:
    """Emits one direction of an RNN / GRU / LSTM node."""

    def __init__(self, node: NodeContext, op: str, dtype: np.dtype, hidden: int, gates: int, clip: float | None):
        self.node, self.op, self.dtype, self.hidden, self.gates, self.clip = node, op, dtype, hidden, gates, clip

    def _weight_t(self, i: int, d: int) -> SSAValue:
        """W[d]^T or R[d]^T: [in, gates·H]."""
        node = self.node
        rows, cols = node.shape(i)[1:]
        if isinstance(node.input(i), Constant):
            return node.derived(i, lambda a: np.ascontiguousarray(a[d].T), (cols, rows), f"d{d}T")
        w = node.emit(nn.SliceOp(node.value(i), [d, 0, 0], [1, 1, 1], [1, rows, cols]))
        w = node.emit(nn.ReshapeOp(w, [rows, cols]))
        return node.emit(nn.TransposeOp(w, [1, 0]))

    def _bias(self, d: int) -> tuple[SSAValue | None, SSAValue | None]:
        """(Wb[d], Rb[d]), each [gates·H], or (None, None) without B."""
        node = self.node
        if not node.has_input(3):
            return None, None
        g = self.gates * self.hidden
        if node.shape(3) != (node.shape(1)[0], 2 * g):
            raise node.error(f"B has shape {list(node.shape(3))}, expected {[node.shape(1)[0], 2 * g]}")
        b = node.value(3)
        parts = [node.emit(nn.ReshapeOp(node.emit(nn.SliceOp(b, [d, k * g], [1, 1], [1, g])), [g])) for k in (0, 1)]
        return parts[0], parts[1]

    def _state(self, i: int, d: int, layout: int, batch: int) -> SSAValue:
        """initial_h / initial_c of direction d ([batch, H]), zeros when absent."""
        node = self.node
        if not node.has_input(i):
            return node.constant(np.zeros((batch, self.hidden), self.dtype), f"zero_state{d}")
        dirs = node.shape(1)[0]
        want = (batch, dirs, self.hidden) if layout else (dirs, batch, self.hidden)
        if node.shape(i) != want:
            raise node.error(f"{'initial_h' if i == 5 else 'initial_c'} has shape {list(node.shape(i))}, expected {list(want)}")
        s = node.emit(nn.SliceOp(node.value(i), [0, d, 0] if layout else [d, 0, 0], [1, 1, 1],
                                 [batch, 1, self.hidden] if layout else [1, batch, self.hidden]))
        return node.emit(nn.ReshapeOp(s, [batch, self.hidden]))

    def _gate(self, v: SSAValue, k: int, rows: int) -> SSAValue:
        """Gate k of a [rows, gates·H] value."""
        return self.node.emit(nn.SliceOp(v, [0, k * self.hidden], [1, 1], [rows, self.hidden]))

    def _act(self, v: SSAValue, act: tuple[str, float | None, float | None]) -> SSAValue:
        node = self.node
        if self.clip is not None:
            v = node.emit(nn.ClipOp(v, min=FloatAttr(-self.clip, 32), max=FloatAttr(self.clip, 32)))
        return _ACTIVATIONS[act[0]](node, v, act[1], act[2], self.dtype)

    def direction(self, x: SSAValue, d: int, reverse: bool, acts, mask, layout: int):
        """(Y [seq, 1, batch, H], Y_h [1, batch, H], Y_c [1, batch, H] or None) of direction d."""
        node, h_size, op = self.node, self.hidden, self.op
        seq, batch, _ = nn.shape_of(x)
        g = self.gates * h_size
        wb, rb = self._bias(d)
        xw = node.emit(nn.MatmulOp(x, self._weight_t(1, d)))  # [seq, batch, G·H]: every step's input projection
        lbr = op == "GRU" and bool(node.attr("linear_before_reset", 0))
        if wb is not None:
            if op == "GRU":  # Rb_h is added with the recurrent term (inside r ⊙ (...) with linear_before_reset)
                zr_only = node.constant(np.concatenate([np.ones(2 * h_size), np.zeros(h_size)]).astype(self.dtype), f"zr{d}")
                rb_zr = node.emit(nn.MulOp(rb, zr_only))
            xw = node.emit(nn.AddOp(xw, node.emit(nn.AddOp(wb, rb_zr if op == "GRU" else rb))))
        r_t = self._weight_t(2, d)  # [H, G·H]
        h = self._state(5, d, layout, batch)
        c = self._state(6, d, layout, batch) if op == "LSTM" else None
        peep = self._peepholes(d) if op == "LSTM" else None
        zero = node.constant(np.zeros((1, 1), self.dtype), "zero")
        steps = range(seq - 1, -1, -1) if reverse else range(seq)
        ys: dict[int, SSAValue] = {}
        for t in steps:
            xt = node.emit(nn.ReshapeOp(node.emit(nn.SliceOp(xw, [t, 0, 0], [1, 1, 1], [1, batch, g])), [batch, g]))
            if op == "GRU":
                new_h, new_c = self._gru_step(xt, h, r_t, acts, rb, lbr), None
            else:
                pre = node.emit(nn.AddOp(xt, node.emit(nn.MatmulOp(h, r_t))))
                if op == "RNN":
                    new_h, new_c = self._act(pre, acts[0]), None
                else:
                    new_h, new_c = self._lstm_step(pre, c, acts, peep, batch)
            if mask is not None:
                ys[t] = node.emit(nn.WhereOp(mask[t], new_h, zero))
                new_h = node.emit(nn.WhereOp(mask[t], new_h, h))
                new_c = node.emit(nn.WhereOp(mask[t], new_c, c)) if new_c is not None else None
            else:
                ys[t] = new_h
            h, c = new_h, new_c
        y = node.emit(nn.ConcatOp([node.emit(nn.ReshapeOp(ys[t], [1, 1, batch, h_size])) for t in range(seq)], 0)) \
            if seq > 1 else node.emit(nn.ReshapeOp(ys[0], [1, 1, batch, h_size]))
        y_h = node.emit(nn.ReshapeOp(h, [1, batch, h_size]))
        y_c = node.emit(nn.ReshapeOp(c, [1, batch, h_size])) if c is not None else None
        return y, y_h, y_c

    def _peepholes(self, d: int) -> list[SSAValue] | None:
        """P[d] split into (p_i, p_o, p_f), each [H], or None."""
        node, h = self.node, self.hidden
        if not node.has_input(7):
            return None
        if node.shape(7) != (node.shape(1)[0], 3 * h):
            raise node.error(f"P has shape {list(node.shape(7))}, expected {[node.shape(1)[0], 3 * h]}")
        return [node.emit(nn.ReshapeOp(node.emit(nn.SliceOp(node.value(7), [d, k * h], [1, 1], [1, h])), [h]))
                for k in range(3)]

    def _lstm_step(self, pre: SSAValue, c: SSAValue, acts, peep, batch: int) -> tuple[SSAValue, SSAValue]:
        """it = f(pre_i + Pi ⊙ C), ft = f(pre_f + Pf ⊙ C) (1 - it with input_forget), ct = g(pre_c),
        C' = ft ⊙ C + it ⊙ ct, ot = f(pre_o + Po ⊙ C'), H' = ot ⊙ h(C')."""
        node = self.node
        f, g, h_act = acts
        pi, po, pf, pc = (self._gate(pre, k, batch) for k in range(4))
        if peep is not None:
            pi = node.emit(nn.AddOp(pi, node.emit(nn.MulOp(peep[0], c))))
            pf = node.emit(nn.AddOp(pf, node.emit(nn.MulOp(peep[2], c))))
        it = self._act(pi, f)
        if node.attr("input_forget", 0):
            ft = node.emit(nn.SubOp(node.scalar(1.0, self.dtype), it))
        else:
            ft = self._act(pf, f)
        ct = self._act(pc, g)
        c_new = node.emit(nn.AddOp(node.emit(nn.MulOp(ft, c)), node.emit(nn.MulOp(it, ct))))
        if peep is not None:
            po = node.emit(nn.AddOp(po, node.emit(nn.MulOp(peep[1], c_new))))
        ot = self._act(po, f)
        # h() is applied without clip: ONNX clips the gate inputs only
        h_new = node.emit(nn.MulOp(ot, _ACTIVATIONS[h_act[0]](node, c_new, h_act[1], h_act[2], self.dtype)))
        return h_new, c_new

    def _gru_step(self, xt: SSAValue, h: SSAValue, r_t: SSAValue, acts, rb: SSAValue | None, lbr: bool) -> SSAValue:
        """zt = f(x_z + H Rz^T), rt = f(x_r + H Rr^T); ht = g(x_h + (rt ⊙ H) Rh^T + Rbh), or with
        linear_before_reset g(x_h + rt ⊙ (H Rh^T + Rbh)); H' = (1 - zt) ⊙ ht + zt ⊙ H."""
        node, hs = self.node, self.hidden
        batch = nn.shape_of(h)[0]
        f, g = acts
        rz = node.emit(nn.SliceOp(r_t, [0, 0], [1, 1], [hs, 2 * hs]))
        rh = node.emit(nn.SliceOp(r_t, [0, 2 * hs], [1, 1], [hs, hs]))
        hr = node.emit(nn.MatmulOp(h, rz))
        zt = self._act(node.emit(nn.AddOp(self._gate(xt, 0, batch), self._gate(hr, 0, batch))), f)
        rt = self._act(node.emit(nn.AddOp(self._gate(xt, 1, batch), self._gate(hr, 1, batch))), f)
        rbh = node.emit(nn.SliceOp(rb, [2 * hs], [1], [hs])) if rb is not None else None
        if lbr:
            rec = node.emit(nn.MatmulOp(h, rh))
            if rbh is not None:
                rec = node.emit(nn.AddOp(rec, rbh))
            rec = node.emit(nn.MulOp(rt, rec))
        else:
            rec = node.emit(nn.MatmulOp(node.emit(nn.MulOp(rt, h)), rh))
            if rbh is not None:
                rec = node.emit(nn.AddOp(rec, rbh))
        ht = self._act(node.emit(nn.AddOp(self._gate(xt, 2, batch), rec)), g)
        one = node.scalar(1.0, self.dtype)
        return node.emit(nn.AddOp(node.emit(nn.MulOp(node.emit(nn.SubOp(one, zt)), ht)), node.emit(nn.MulOp(zt, h))))


def _scaled(node: NodeContext, v: SSAValue, alpha: float, beta: float, dtype: np.dtype) -> SSAValue:
    return node.emit(nn.AddOp(node.emit(nn.MulOp(v, node.scalar(alpha, dtype))), node.scalar(beta, dtype)))


def _hard_sigmoid(node, v, alpha, beta, dtype):
    t = _scaled(node, v, 0.2 if alpha is None else alpha, 0.5 if beta is None else beta, dtype)
    return node.emit(nn.ClipOp(t, min=FloatAttr(0.0, 32), max=FloatAttr(1.0, 32)))


def _scaled_tanh(node, v, alpha, beta, dtype):
    inner = node.emit(nn.TanhOp(node.emit(nn.MulOp(v, node.scalar(1.0 if beta is None else beta, dtype)))))
    return node.emit(nn.MulOp(inner, node.scalar(1.0 if alpha is None else alpha, dtype)))


_HAS_ALPHA = ("HardSigmoid", "LeakyRelu", "Affine", "ScaledTanh")
_HAS_BETA = ("HardSigmoid", "Affine", "ScaledTanh")
# name → emit(node, value, alpha, beta, dtype): the activation functions of the ONNX RNN family
# (alpha / beta defaults as the operator definitions give them).
_ACTIVATIONS = {
    "Sigmoid": lambda node, v, a, b, dt: node.emit(nn.SigmoidOp(v)),
    "Tanh": lambda node, v, a, b, dt: node.emit(nn.TanhOp(v)),
    "Relu": lambda node, v, a, b, dt: node.emit(nn.ReluOp(v)),
    "HardSigmoid": _hard_sigmoid,
    "LeakyRelu": lambda node, v, a, b, dt: node.emit(nn.LeakyReluOp(v, alpha=FloatAttr(0.01 if a is None else a, 32))),
    "Affine": lambda node, v, a, b, dt: _scaled(node, v, 1.0 if a is None else a, 0.0 if b is None else b, dt),
    "ScaledTanh": _scaled_tanh,
}
