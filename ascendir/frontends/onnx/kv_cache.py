"""The KV-cache signature of a decoder exported with its cache as graph inputs and outputs.

Both exporters write a decoder that serves prefill and decode as one graph: `input_ids`
[batch, seq] int64, optionally `attention_mask` [batch, past + seq] and `position_ids`
[batch, seq], one `past…` input per layer and K/V ([batch, kv_heads, past, head_dim], the
transformers layout), and one `present…` output for each ([batch, kv_heads, past + seq,
head_dim]), plus the logits [batch, seq, vocab]. Names vary by exporter and wrapper
(`past_key.0`, `past_key_values.0.key`, `past_key_values_0_key`), so inputs are paired with
outputs by order, as every exporter writes both in layer order.

`generate` feeds the prompt, then one token at a time with the cache growing along its cache
axis: that axis and the sequence axis of `input_ids` must be free (a `dim_param` or unknown
dim). A model exported with them fixed (transformers' StaticCache form, or an export without
dynamic axes) cannot be fed that way; `kv_signature` says which axis of which input it needs free.
"""

from __future__ import annotations

from dataclasses import dataclass

import onnx

from ascendir.errors import AscendirError

_FEEDABLE = {"input_ids", "attention_mask", "position_ids", "cache_position"}


@dataclass(frozen=True)
class CacheEntry:
    """One cache tensor: `past` (a graph input) grows into `present` (a graph output) along `axis`.

    `shape` is the input's shape with None at the batch axis (0) and at `axis`; `elem` the ONNX
    element type (TensorProto.FLOAT, FLOAT16, ...)."""

    past: str
    present: str
    axis: int
    shape: tuple[int | None, ...]
    elem: int

    def dims(self, batch: int, length: int) -> tuple[int, ...]:
        """The static shape of this cache at `batch` sequences of `length` positions."""
        out = list(self.shape)
        out[0], out[self.axis] = batch, length
        return tuple(out)


@dataclass(frozen=True)
class KVSignature:
    """What `generate` feeds and reads: the input names it fills and the cache pairs."""

    input_ids: str
    attention_mask: str | None
    position_ids: str | None
    cache_position: str | None
    logits: str
    cache: tuple[CacheEntry, ...]
    fixed_batch: int | None  # the batch the model was exported for, when its batch axis is static

    def shapes(self, batch: int, seq: int, past: int) -> dict[str, tuple[int, ...]]:
        """The static shape of every input of one step: `seq` new tokens after `past` cached ones."""
        out = {self.input_ids: (batch, seq)}
        if self.attention_mask:
            out[self.attention_mask] = (batch, past + seq)
        if self.position_ids:
            out[self.position_ids] = (batch, seq)
        if self.cache_position:
            out[self.cache_position] = (seq,)
        for c in self.cache:
            out[c.past] = c.dims(batch, past)
        return out


def _dims(vi: onnx.ValueInfoProto) -> list[int | None]:
    return [d.dim_value if d.HasField("dim_value") else None for d in vi.type.tensor_type.shape.dim]


def kv_signature(proto: onnx.ModelProto) -> KVSignature:
    """Read the KV-cache signature of a decoder model (see the module docstring).

    Raises:
        AscendirError: no input_ids or no cache inputs; past inputs and present outputs that do
            not pair up; a static sequence axis of input_ids or a static cache axis (the message
            names the input and the axis `generate` needs free); an input generate cannot fill.
    """
    init = {t.name for t in proto.graph.initializer}
    inputs = [i for i in proto.graph.input if i.name not in init]
    by_name = {i.name: i for i in inputs}
    if "input_ids" not in by_name:
        raise AscendirError("generate: the model has no input 'input_ids' (a decoder's token ids [batch, seq])")
    past = [i for i in inputs if i.name.startswith("past")]
    present = [o for o in proto.graph.output if o.name.startswith("present")]
    if not past:
        raise AscendirError("generate: the model has no KV-cache inputs (past_*): export it with its cache "
                            "(use_cache=True, past_key_values as inputs, present as outputs)")
    if len(past) != len(present):
        raise AscendirError(f"generate: {len(past)} past inputs but {len(present)} present outputs; they must pair up")
    entries = []
    for p, q in zip(past, present):
        d = _dims(p)
        if len(d) < 3:
            raise AscendirError(f"generate: cache input '{p.name}' has rank {len(d)}, expected [batch, heads, past, head_dim]")
        free = [a for a in range(1, len(d)) if d[a] is None]
        axis = len(d) - 2  # transformers' layout, when the export says nothing
        if len(free) > 1:
            raise AscendirError(f"generate: cache input '{p.name}' has {len(free)} free axes besides the batch "
                                f"({', '.join(map(str, free))}); only the cache length may be free")
        if not free:
            raise AscendirError(f"generate: cache input '{p.name}' axis {axis} (the cache length) is static ({d[axis]}); "
                                "generate needs it free to grow the cache step by step (a static-cache export: "
                                "export with a dynamic past length, dynamic_axes / dynamic_shapes)")
        axis = free[0]
        qd = _dims(q)
        if len(qd) != len(d):
            raise AscendirError(f"generate: '{p.name}' has rank {len(d)} but its present '{q.name}' has rank {len(qd)}")
        shape = tuple(None if a in (0, axis) else d[a] for a in range(len(d)))
        entries.append(CacheEntry(p.name, q.name, axis, shape, p.type.tensor_type.elem_type))
    ids = _dims(by_name["input_ids"])
    if len(ids) != 2:
        raise AscendirError(f"generate: input_ids has rank {len(ids)}, expected [batch, seq]")
    if ids[1] is not None:
        raise AscendirError(f"generate: input_ids axis 1 (the sequence) is static ({ids[1]}); generate needs it free "
                            "to feed the prompt and then one token per step (export with a dynamic sequence axis)")
    others = [i.name for i in inputs if i.name not in _FEEDABLE and not i.name.startswith("past")]
    if others:
        raise AscendirError(f"generate: input '{others[0]}' is neither input_ids, attention_mask, position_ids, cache_position nor a "
                            "past_* cache input: generate cannot fill it")
    rest = [o.name for o in proto.graph.output if not o.name.startswith("present")]
    if not rest:
        raise AscendirError("generate: the model has no logits output (only present_* cache outputs)")
    logits = "logits" if "logits" in rest else rest[0]
    return KVSignature("input_ids", "attention_mask" if "attention_mask" in by_name else None,
                       "position_ids" if "position_ids" in by_name else None,
                       "cache_position" if "cache_position" in by_name else None, logits, tuple(entries),
                       ids[0])
