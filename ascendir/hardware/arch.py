"""What an Ascend architecture can do: one `ChipArch` per Da Vinci generation.

A chip TOML (hardware/chips/*.toml) gives a chip's figures (cores, clocks, buffer sizes, rates);
its `chip.arch` names one of the architectures below, which says what the chip *can* do. Templates
and passes ask these capability questions (`target.arch.split_cores`, `target.arch.fixpipe`,
`target.arch.cube_has("bf16")`) and never compare an architecture or chip name: a new chip of a
known architecture is one TOML file, a new architecture is one more `ChipArch` here (and its name
in the `ascend` dialect's `Arch` enum, which lowered modules carry as `#ascend.arch<"...">`, and
its copy paths in the dialect's placement table, which the verifier needs without the hardware
layer). The facts and their sources: docs/hardware-reference.md §Architectures.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class L0COut(StrEnum):
    """Where a cube result goes when it leaves L0C (the accumulator buffer)."""

    FIXPIPE = "fixpipe"  # L0C -> GM or L1 by FixPipe (FIX pipe), cast / ReLU / NZ->ND on the way; no L0C -> UB
    UB = "ub"  # L0C -> UB by the vector pipe; the vector unit casts and activates, MTE3 stores


@dataclass(frozen=True)
class ChipArch:
    """One architecture (compiler target, as `ascend.arch` names it in a lowered module).

    name: "dav-c220", ...; `str(arch)` is the name, so messages read "ascend910a (dav-c100)".
    products: the chips of this architecture, for messages and docs.
    split_cores: cube cores (AIC: cube, L1/L0, MTE1, FixPipe) and vector cores (AIV: vector unit,
        UB) are separate cores. A kernel using both is a `mix` kernel of 1 AIC + `aiv_per_aic`
        AIVs (the chip TOML's figure) whose halves exchange data only through GM/L2 and cross-core
        flags. False: one AI Core holds cube, vector unit, L1/L0 and UB (a "coupled" core).
    l0c_out: how cube results leave L0C (L0COut).
    bias_table: the cube can start an accumulation from a bias row in BT (L1 -> BT by MTE1;
        Mmad with the bias table as the initial C). False: a bias is added by the vector unit.
    cube_dtypes: operand dtype keys ("f16", "bf16", "f32", "hf32", "s8", "u8", "s4") the cube has
        an mmad for (the chip TOML's cube.k_per_cycle gives the rates of those it models).
    """

    name: str
    products: str
    split_cores: bool
    l0c_out: L0COut
    bias_table: bool
    cube_dtypes: frozenset[str]

    def __post_init__(self) -> None:
        # an AIC has no UB (it is on the AIV), so a split core's results can only leave by FixPipe
        if self.split_cores and self.l0c_out is not L0COut.FIXPIPE:
            raise ValueError(f"{self.name}: split cube/vector cores need L0C out by FixPipe")
        # the matmul template adds a row bias from BT on the FixPipe path and in UB on the UB path
        # (templates/matmul.py _BiasStage); FixPipe without BT would need a third way
        if self.fixpipe and not self.bias_table:
            raise ValueError(f"{self.name}: the templates add a bias on the FixPipe path from BT: needs bias_table")

    def __str__(self) -> str:
        return self.name

    @property
    def fixpipe(self) -> bool:
        """L0C leaves by FixPipe (to GM or L1) and FixPipe can apply a ReLU on the way."""
        return self.l0c_out is L0COut.FIXPIPE

    def cube_has(self, dtype: str) -> bool:
        """True when the cube has an mmad for operands of `dtype` (a key such as "f16", "f32";
        an xDSL float type's str() is its key, and i8 means s8)."""
        return {"i8": "s8"}.get(dtype, dtype) in self.cube_dtypes

    def no_mmad(self, dtype: str) -> str | None:
        """Why `dtype` operands cannot go to the cube ("has no f32 mmad (only f16/int8 on its
        cube, S1)"), or None when they can."""
        if self.cube_has(dtype):
            return None
        floats = [d for d in ("f16", "bf16", "f32") if d in self.cube_dtypes]
        ints = ["int8"] if "s8" in self.cube_dtypes else []
        return f"has no {dtype} mmad (only {'/'.join(floats + ints)} on its cube, S1)"


# The architectures, in the order messages list them. Facts: docs/hardware-reference.md
# §Architectures (S1 platform configs and intrinsic maps, S2 architecture page).
ARCHS: dict[str, ChipArch] = {
    a.name: a
    for a in (
        ChipArch(
            name="dav-c220",
            products="Ascend 910B (Atlas A2) and the dies of the Atlas A3",
            split_cores=True,
            l0c_out=L0COut.FIXPIPE,
            bias_table=True,
            cube_dtypes=frozenset({"f16", "bf16", "f32", "hf32", "s8", "u8", "s4"}),
        ),
        ChipArch(
            name="dav-c100",
            products="Ascend 910 first generation (910A)",
            split_cores=False,
            l0c_out=L0COut.UB,
            bias_table=False,
            cube_dtypes=frozenset({"f16", "s8", "u8"}),
        ),
        ChipArch(
            name="dav-m200",
            products="Ascend 310P",
            split_cores=False,
            l0c_out=L0COut.UB,
            bias_table=False,
            cube_dtypes=frozenset({"f16", "s8", "u8", "s4"}),
        ),
    )
}
