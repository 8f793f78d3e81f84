"""Sliding-window geometry shared by the conv and pooling templates.

A window op (nn.conv2d, nn.pool2d) reads, for kernel offset (i, j), the input element
`x[n, c, oh*sh + i*dh - pad_top, ow*sw + j*dw - pad_left]` for output position (oh, ow). For a
fixed kernel offset, the output positions whose input element lies inside the input form a
rectangle; the input elements they read form a strided rectangle of the input (a
`memref.subview` with strides (sh, sw)). That is what Ascend's load3d / img2col reads, one
"slab" per kernel offset; positions outside the rectangle read padding.
"""

from __future__ import annotations

from dataclasses import dataclass


def valid_range(out_size: int, offset: int, stride: int, lo: int, hi: int) -> tuple[int, int]:
    """Output positions o in [0, out_size) with lo <= o*stride + offset < hi, as [start, stop)
    (start == stop when none). `offset` = kernel offset * dilation - pad_begin."""
    start = max(0, -(-(lo - offset) // stride))
    stop = min(out_size, (hi - 1 - offset) // stride + 1)
    return start, max(start, stop)


@dataclass(frozen=True)
class Slab:
    """What one kernel offset (i, j) contributes to a tile of output rows [row0, row0 + rows).

    Attributes:
        ij: flat kernel offset i * kw + j.
        out_rows, out_cols: [start, stop) of the output rows (relative to row0) and columns
            whose input element is inside the input.
        in_row, in_col: input coordinates of the first of them.
        partial: the rectangle does not cover the whole tile (the rest reads padding).
    """

    ij: int
    out_rows: tuple[int, int]
    out_cols: tuple[int, int]
    in_row: int
    in_col: int
    partial: bool

    @property
    def empty(self) -> bool:
        return self.out_rows[0] == self.out_rows[1] or self.out_cols[0] == self.out_cols[1]


@dataclass(frozen=True)
class Window:
    """Static geometry of a 2-D window op on an [.., H, W] input giving [.., Ho, Wo]."""

    h: int
    w: int
    ho: int
    wo: int
    kernel: tuple[int, int]
    strides: tuple[int, int]
    pads: tuple[int, int, int, int]  # top, left, bottom, right
    dilations: tuple[int, int]

    def slabs(self, row0: int, rows: int, inside_pads: bool = False) -> list[Slab]:
        """The slab of every kernel offset for output rows [row0, row0 + rows).

        With `inside_pads`, "inside" means inside the padded input (ONNX count_include_pad:
        explicit pads count, positions past them do not)."""
        kh, kw = self.kernel
        (sh, sw), (dh, dw) = self.strides, self.dilations
        top, left, bottom, right = self.pads
        lo_h, hi_h = (-top, self.h + bottom) if inside_pads else (0, self.h)
        lo_w, hi_w = (-left, self.w + right) if inside_pads else (0, self.w)
        out = []
        for i in range(kh):
            oh0, oh1 = valid_range(self.ho, i * dh - top, sh, lo_h, hi_h)
            oh0, oh1 = max(oh0, row0), min(oh1, row0 + rows)
            oh1 = max(oh0, oh1)
            for j in range(kw):
                ow0, ow1 = valid_range(self.wo, j * dw - left, sw, lo_w, hi_w)
                partial = (oh0, oh1) != (row0, row0 + rows) or (ow0, ow1) != (0, self.wo)
                out.append(
                    Slab(i * kw + j, (oh0 - row0, oh1 - row0), (ow0, ow1), oh0 * sh + i * dh - top,
                         ow0 * sw + j * dw - left, partial)
                )
        return out


def largest_divisor(n: int, cap: int) -> int:
    """The largest divisor of n that is <= cap (at least 1)."""
    best = 1
    for d in range(1, min(n, max(cap, 1)) + 1):
        if n % d == 0:
            best = d
    return best
