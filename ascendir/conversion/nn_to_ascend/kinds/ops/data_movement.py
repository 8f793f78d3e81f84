"""The data-movement op family (templates/data_movement.py): reshape, identity and
count-preserving expand as free GM views; slice, concat, gather and row-keeping transposes as
DMA kernels; other transposes through vtranspose; replicating expand as a vcopy kernel.
plan = the op; emit = its lowering, by op class."""

from __future__ import annotations

from ascendir.conversion.nn_to_ascend.templates import data_movement as dm
from ascendir.conversion.nn_to_ascend.templates.cache_append import lower_cache_append, lower_paged_cache_append
from ascendir.conversion.nn_to_ascend.kinds.ops.emitters import EmitterFamily
from ascendir.dialects import nn

DATA_MOVEMENT = EmitterFamily("data_movement", {
    nn.ReshapeOp: dm.lower_reshape,
    nn.IdentityOp: dm.lower_identity,
    nn.TransposeOp: dm.lower_transpose,
    nn.SliceOp: dm.lower_slice,
    nn.ConcatOp: dm.lower_concat,
    nn.ExpandOp: dm.lower_expand,
    nn.GatherOp: dm.lower_gather,
    nn.CacheAppendOp: lower_cache_append,  # in place: the KV cache (templates/cache_append.py)
    nn.PagedCacheAppendOp: lower_paged_cache_append,  # in place, through the block table
})
