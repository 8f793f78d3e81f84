"""MoE routing as the cost of a MoE layer sees it: which experts each token's top-k picks, and
what follows (tokens per expert, experts touched, expert-weight bytes read).

A routing is an int array `indices` [T, k] of expert ids (what a router's TopK yields: each
token's k distinct experts). The cost of a grouped MatMul (ops-transformer's GroupedMatmul)
depends on it only through `tokens_per_expert` (MoeInitRouting's per-expert counts): an expert
with no token is never read. When no real routing is at hand (a timing-only run without
inputs, a benchmark), an assumption makes one, named so a report can state it:

* ``uniform``: every token picks k distinct experts uniformly at random (seeded);
* ``skew=A``: expert e (e = 0 … E-1) is picked with probability ∝ (e + 1)^-A without
  replacement within a token (a Zipf law; A = 0 is uniform; A ≈ 1 concentrates on a few
  experts, as untrained or collapsed routers do);
* a file: an .npz holding ``indices`` [T, k] (e.g. a router's TopK indices saved from a run).

Errors: `parse_routing` and `make_routing` raise AscendirError (one line) on a bad spec, a file
that cannot be read, or indices that do not fit (shape, range, duplicates within a token).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ascendir.errors import AscendirError

SEED = 0


@dataclass(frozen=True)
class RoutingSpec:
    """How a routing is obtained: kind "uniform", "skew" (with `alpha`) or "file" (with `path`)."""

    kind: str
    alpha: float = 0.0
    path: str = ""

    def text(self) -> str:
        """The spec as the user writes it (`--moe-routing`), for reports."""
        return {"uniform": "uniform", "skew": f"skew={self.alpha:g}", "file": self.path}[self.kind]


def parse_routing(spec: str) -> RoutingSpec:
    """`uniform`, `skew=A` (A >= 0) or a path to an .npz with `indices` [T, k].

    Raises: AscendirError on an A that is not a non-negative number, or a missing file."""
    if spec == "uniform":
        return RoutingSpec("uniform")
    if spec.startswith("skew="):
        try:
            alpha = float(spec[5:])
        except ValueError:
            alpha = -1.0
        if not (alpha >= 0 and np.isfinite(alpha)):
            raise AscendirError(f"--moe-routing {spec}: skew needs a non-negative number, e.g. skew=1.2")
        return RoutingSpec("skew", alpha=alpha)
    if not Path(spec).is_file():
        raise AscendirError(f"--moe-routing {spec}: not uniform, skew=A or an existing .npz file")
    return RoutingSpec("file", path=spec)


def check_indices(indices: np.ndarray, experts: int, what: str = "routing") -> np.ndarray:
    """`indices` as int64 [T, k], checked: ids in [0, experts), k distinct ids per token.

    Raises: AscendirError naming `what` otherwise."""
    a = np.asarray(indices)
    if a.ndim != 2 or a.dtype.kind not in "iu":
        raise AscendirError(f"{what}: indices must be integers [tokens, k], got {a.dtype} {list(a.shape)}")
    a = a.astype(np.int64)
    if a.size and (a.min() < 0 or a.max() >= experts):
        raise AscendirError(f"{what}: expert ids must lie in [0, {experts}), got [{a.min()}, {a.max()}]")
    if a.shape[1] > 1 and (np.diff(np.sort(a, axis=1), axis=1) == 0).any():
        raise AscendirError(f"{what}: a token picks the same expert twice")
    return a


def make_routing(spec: RoutingSpec, tokens: int, k: int, experts: int, seed: int = SEED) -> np.ndarray:
    """indices [tokens, k] (int64) for `spec`; uniform / skew are seeded, so reproducible.

    Raises: AscendirError when k > experts, or the file's indices do not fit [tokens, k]."""
    if not 1 <= k <= experts:
        raise AscendirError(f"routing: top-{k} of {experts} experts")
    if spec.kind == "file":
        try:
            with np.load(spec.path) as f:
                a = f["indices"]
        except (OSError, KeyError, ValueError) as e:
            raise AscendirError(f"--moe-routing {spec.path}: no readable 'indices' array ({type(e).__name__})") from None
        a = check_indices(a, experts, f"--moe-routing {spec.path}")
        if a.shape != (tokens, k):
            raise AscendirError(f"--moe-routing {spec.path}: indices {list(a.shape)}, the layer routes [{tokens}, {k}]")
        return a
    rng = np.random.default_rng(seed)
    # log p, p ∝ (e + 1)^-alpha, taken in logs: (e + 1)^-alpha underflows to 0 for a large alpha
    # (log 0 = -inf, a RuntimeWarning and ties among the experts it zeroes)
    logp = -(spec.alpha if spec.kind == "skew" else 0.0) * np.log(np.arange(experts) + 1.0)
    # k distinct draws per token ∝ p: Gumbel top-k (sampling without replacement); the
    # normalisation shifts every key alike, so it is left out
    keys = logp[None, :] + rng.gumbel(size=(tokens, experts))
    return np.argsort(-keys, axis=1, kind="stable")[:, :k].astype(np.int64)


def tokens_per_expert(indices: np.ndarray, experts: int) -> np.ndarray:
    """[experts] int64: how many (token, k) pairs each expert receives (MoeInitRouting's counts)."""
    return np.bincount(np.asarray(indices, np.int64).reshape(-1), minlength=experts).astype(np.int64)


def init_routing(indices: np.ndarray, experts: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """MoeInitRouting's outputs for a routing: (sorted_rows [R], dest [R], group_list [E+1]),
    int64, R = indices.size in (token, k) order: the pairs stably sorted by expert, each pair's
    sorted position, and the cumulative per-expert counts (what the moe_init_routing kernel
    computes; a timing-only run fills its outputs with these)."""
    ids = np.asarray(indices, np.int64).reshape(-1)
    order = np.argsort(ids, kind="stable").astype(np.int64)
    dest = np.empty_like(order)
    dest[order] = np.arange(order.size, dtype=np.int64)
    group_list = np.concatenate([[0], np.cumsum(tokens_per_expert(ids, experts))]).astype(np.int64)
    return order, dest, group_list


@dataclass(frozen=True)
class RoutingStats:
    """What a report shows of a routing: tokens per expert, experts touched, and the expert-weight
    bytes a grouped MatMul reads (touched experts x bytes of one expert's weights, times the row
    tiles of each group when they are given)."""

    tokens_per_expert: tuple[int, ...]
    experts_touched: int
    expert_weight_bytes: int

    @staticmethod
    def of(indices: np.ndarray, experts: int, bytes_per_expert: int, row_tile: int = 0) -> RoutingStats:
        """`row_tile` > 0: the grouped MatMul reads an expert's weights once per tile of that many
        of its rows (ceil(count / row_tile) times); 0: once per touched expert."""
        counts = tokens_per_expert(indices, experts)
        touched = int((counts > 0).sum())
        reads = int((-(-counts // row_tile)).sum()) if row_tile > 0 else touched
        return RoutingStats(tuple(int(c) for c in counts), touched, reads * bytes_per_expert)


EP_ROLES = ("send", "offsets", "recv")
"""What a timing-only expert-parallel launch takes from the routing (templates/moe_distribute.py):
`send` the device's own pairs' MoeInitRouting over all E experts; `offsets` the group-list
entries each device received from its peers (ep_recv_offsets); `recv` the MoeInitRouting of the
rows it received, over its El experts (the unused rows' id El left out of the group list)."""


def ep_block(block: str, n: int, experts: int, role: str) -> str:
    """The moe_block name of an expert-parallel launch: block `block` over `n` devices and
    `experts` experts in all, `role` one of EP_ROLES."""
    return f"{block}#ep{n}x{experts}-{role}"


def parse_ep_block(name: str) -> tuple[str, int, int, str] | None:
    """(block, n, experts, role) of an `ep_block` name; None for a plain block name."""
    block, sep, rest = name.rpartition("#ep")
    if not sep:
        return None
    size, _, role = rest.partition("-")
    n, _, experts = size.partition("x")
    if role not in EP_ROLES or not n.isdigit() or not experts.isdigit():
        return None
    return block, int(n), int(experts), role


def ep_routed(indices: np.ndarray, n: int, experts: int, rank: int, role: str) -> tuple[np.ndarray, ...]:
    """What device `rank` of an expert-parallel group of `n` computes from the routing `indices`
    (all R (token, k) pairs; device r brings pairs r·P .. (r+1)·P - 1, P = R / n) for `role`
    (EP_ROLES): `send` (sorted_rows, dest, group_list [E+1]) of its own pairs; `offsets`
    (ep_recv_offsets [n, El+1],); `recv` (sorted_rows, dest, group_list [El+1]) of its receive
    buffer [n·P] (slot s: s's pairs for this device's experts in sorted order, then unused rows).

    Raises: AscendirError when the pairs or experts do not split n ways."""
    ids = np.asarray(indices, np.int64).reshape(-1)
    if ids.size % n or experts % n:
        raise AscendirError(f"routing: {ids.size} pairs over {experts} experts do not split over {n} devices")
    p, local = ids.size // n, experts // n
    shards = [ids[s * p : (s + 1) * p] for s in range(n)]
    if role == "send":
        return init_routing(shards[rank], experts)
    sends = [init_routing(sh, experts) for sh in shards]
    offs = np.stack([g[rank * local : (rank + 1) * local + 1] for _, _, g in sends])
    if role == "offsets":
        return (offs,)
    eids = np.full(n * p, local, np.int64)
    for s, (order, _, _) in enumerate(sends):
        lo, hi = offs[s, 0], offs[s, -1]
        eids[s * p : s * p + hi - lo] = shards[s][order[lo:hi]] - rank * local
    order, dest, group = init_routing(eids, local + 1)
    return order, dest, group[: local + 1]
