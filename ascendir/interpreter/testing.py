"""Hand-written ascend IR generators for tests and benchmarks (not used by the compiler).

`matmul_ir(...)` writes a tiled C = A @ B kernel in the style a lowering produces:
blocks stride over the (m, n) output tiles; per tile, a K loop loads A/B chunks GM→L1 (nd2nz,
MTE2), an inner loop moves L1→L0A/L0B slices (MTE1) and runs mmad into L0C (M, init on the first
K step), then FixPipe L0C→GM. Partial edge tiles use dynamic subview sizes (arith.minsi).
`nbuf=2` ping-pongs the L1 and L0A/L0B buffers (event ids 0/1) so MTE2, MTE1 and M overlap;
`nbuf=1` serialises them.
"""

from __future__ import annotations


def _gm(shape: tuple[int, ...], dt: str) -> str:
    return f"memref<{'x'.join(map(str, shape))}x{dt}, #ascend<space gm>>"


def _buf(shape: tuple[int, ...], dt: str, space: str) -> str:
    return f"memref<{'x'.join(map(str, shape))}x{dt}, #ascend<space {space}>>"


def _dyn_gm(dt: str, row_stride: int) -> str:
    return f"memref<?x?x{dt}, strided<[{row_stride}, 1], offset: ?>, #ascend<space gm>>"


def matmul_ir(
    m: int,
    n: int,
    k: int,
    tm: int = 128,
    tn: int = 128,
    tk: int = 128,
    block_dim: int = 24,
    nbuf: int = 2,
    in_dtype: str = "f16",
    out_dtype: str = "f32",
    arch: str = "dav-c220",
    relu: bool = False,
    l1_k: int | None = None,
) -> str:
    """IR text of a module with kernel @matmul and host @main(a, b) -> c (onnx names a, b, c).

    Output tiles are tm×tn; L0 tiles tm×tk / tk×tn; L1 holds `l1_k` (a multiple of tk, default
    tk) of K per load, consumed by an inner loop of L1→L0 steps. `nbuf` buffers at both levels.
    """
    assert nbuf in (1, 2)
    l1_k = l1_k or tk
    assert l1_k % tk == 0
    ntm, ntn = -(-m // tm), -(-n // tn)
    a_t, b_t, c_t = _gm((m, k), in_dtype), _gm((k, n), in_dtype), _gm((m, n), out_dtype)
    l1a, l1b = _buf((tm, l1_k), in_dtype, "l1"), _buf((l1_k, tn), in_dtype, "l1")
    l0a, l0b = _buf((tm, tk), in_dtype, "l0a"), _buf((tk, tn), in_dtype, "l0b")
    l1a_s = f"memref<{tm}x{tk}x{in_dtype}, strided<[{l1_k}, 1], offset: ?>, #ascend<space l1>>"
    l1b_s = f"memref<{tk}x{tn}x{in_dtype}, strided<[{tn}, 1], offset: ?>, #ascend<space l1>>"
    l0c = _buf((tm, tn), "f32", "l0c")
    relu_attr = " {relu = true}" if relu else ""

    def par(body, iv: str, ind: str, name: str) -> str:
        """`body(parity, indent)` for buffer 0/1 chosen by the parity of `iv`."""
        if nbuf == 1:
            return body(0, ind)
        return f"""
{ind}%{name}r = arith.remui {iv}, %c2 : index
{ind}%{name}e = arith.cmpi eq, %{name}r, %c0 : index
{ind}scf.if %{name}e {{{body(0, ind + "  ")}
{ind}}} else {{{body(1, ind + "  ")}
{ind}}}"""

    def l0step(p: int):
        def body(q: int, ind: str) -> str:
            return f"""
{ind}ascend.wait_flag M -> MTE1, {q}
{ind}%asl{p}{q} = memref.subview %l1a{p}[0, %kk] [{tm}, {tk}] [1, 1] : {l1a} to {l1a_s}
{ind}%bsl{p}{q} = memref.subview %l1b{p}[%kk, 0] [{tk}, {tn}] [1, 1] : {l1b} to {l1b_s}
{ind}ascend.copy %asl{p}{q}, %l0a{q} : {l1a_s}, {l0a}
{ind}ascend.copy %bsl{p}{q}, %l0b{q} : {l1b_s}, {l0b}
{ind}ascend.set_flag MTE1 -> M, {q}
{ind}ascend.wait_flag MTE1 -> M, {q}
{ind}scf.if %first{p} {{
{ind}  ascend.mmad %l0a{q}, %l0b{q}, %l0c {{init = true}} : {l0a}, {l0b}, {l0c}
{ind}}} else {{
{ind}  ascend.mmad %l0a{q}, %l0b{q}, %l0c {{init = false}} : {l0a}, {l0b}, {l0c}
{ind}}}
{ind}ascend.set_flag M -> MTE1, {q}"""

        return body

    def l1step(p: int, ind: str) -> str:
        return f"""
{ind}ascend.wait_flag MTE1 -> MTE2, {p}
{ind}%asub{p} = memref.subview %a[%m0, %k0] [%ms, %ks] [1, 1] : {a_t} to {_dyn_gm(in_dtype, k)}
{ind}%bsub{p} = memref.subview %b[%k0, %n0] [%ks, %ns] [1, 1] : {b_t} to {_dyn_gm(in_dtype, n)}
{ind}ascend.copy %asub{p}, %l1a{p} {{layout = #ascend.layout<nd2nz>}} : {_dyn_gm(in_dtype, k)}, {l1a}
{ind}ascend.copy %bsub{p}, %l1b{p} {{layout = #ascend.layout<nd2nz>}} : {_dyn_gm(in_dtype, n)}, {l1b}
{ind}ascend.set_flag MTE2 -> MTE1, {p}
{ind}ascend.wait_flag MTE2 -> MTE1, {p}
{ind}%nin{p} = arith.ceildivsi %ks, %cTK : index
{ind}scf.for %j = %c0 to %nin{p} step %c1 {{
{ind}  %kk = arith.muli %j, %cTK : index
{ind}  %j0{p} = arith.cmpi eq, %j, %c0 : index
{ind}  %first{p} = arith.andi %kt0, %j0{p} : i1{par(l0step(p), "%j", ind + "  ", f"q{p}")}
{ind}}}
{ind}ascend.set_flag MTE1 -> MTE2, {p}"""

    allocs = "\n".join(
        f"""    %l1a{p} = ascend.alloc : {l1a}
    %l1b{p} = ascend.alloc : {l1b}
    %l0a{p} = ascend.alloc : {l0a}
    %l0b{p} = ascend.alloc : {l0b}"""
        for p in range(nbuf)
    )
    prime = "\n".join(f"    ascend.set_flag MTE1 -> MTE2, {p}\n    ascend.set_flag M -> MTE1, {p}" for p in range(nbuf))
    drain = "\n".join(f"    ascend.wait_flag MTE1 -> MTE2, {p}\n    ascend.wait_flag M -> MTE1, {p}" for p in range(nbuf))
    nk = -(-k // l1_k)
    return f"""builtin.module attributes {{ascend.arch = #ascend.arch<"{arch}">}} {{
  ascend.kernel @matmul(%a: {a_t}, %b: {b_t}, %c: {c_t}) attributes {{block_dim = {block_dim} : i64, core_type = #ascend.core_type<aic>}} {{
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %cM = arith.constant {m} : index
    %cN = arith.constant {n} : index
    %cK = arith.constant {k} : index
    %cTM = arith.constant {tm} : index
    %cTN = arith.constant {tn} : index
    %cTK = arith.constant {tk} : index
    %cL1K = arith.constant {l1_k} : index
    %cNTN = arith.constant {ntn} : index
    %cNT = arith.constant {ntm * ntn} : index
    %cNK = arith.constant {nk} : index
    %cBD = arith.constant {block_dim} : index
    %bid = ascend.block_idx : index
{allocs}
    %l0c = ascend.alloc : {l0c}
{prime}
    ascend.set_flag FIX -> M, 0
    scf.for %t = %bid to %cNT step %cBD {{
      %mt = arith.divui %t, %cNTN : index
      %nt = arith.remui %t, %cNTN : index
      %m0 = arith.muli %mt, %cTM : index
      %n0 = arith.muli %nt, %cTN : index
      %mrem = arith.subi %cM, %m0 : index
      %nrem = arith.subi %cN, %n0 : index
      %ms = arith.minsi %mrem, %cTM : index
      %ns = arith.minsi %nrem, %cTN : index
      ascend.wait_flag FIX -> M, 0
      scf.for %kt = %c0 to %cNK step %c1 {{
        %k0 = arith.muli %kt, %cL1K : index
        %krem = arith.subi %cK, %k0 : index
        %ks = arith.minsi %krem, %cL1K : index
        %kt0 = arith.cmpi eq, %kt, %c0 : index{par(l1step, "%kt", "        ", "p")}
      }}
      ascend.set_flag M -> FIX, 0
      ascend.wait_flag M -> FIX, 0
      %csub = memref.subview %c[%m0, %n0] [%ms, %ns] [1, 1] : {c_t} to {_dyn_gm(out_dtype, n)}
      ascend.copy %l0c, %csub{relu_attr} : {l0c}, {_dyn_gm(out_dtype, n)}
      ascend.set_flag FIX -> M, 0
    }}
{drain}
    ascend.wait_flag FIX -> M, 0
    ascend.return
  }}
  func.func @main(%a: {a_t} {{onnx.name = "a"}}, %b: {b_t} {{onnx.name = "b"}}) -> ({c_t} {{onnx.name = "c"}}) {{
    %c = ascend.alloc : {c_t}
    ascend.launch @matmul(%a, %b, %c) : {a_t}, {b_t}, {c_t}
    func.return %c : {c_t}
  }}
}}
"""


def add_ir(rows: int, cols: int, tile_rows: int, block_dim: int = 48, dtype: str = "f16", nbuf: int = 2) -> str:
    """IR text of a streaming z = x + y kernel on AIV cores (@main(x, y) -> z), rows split in
    tiles of `tile_rows` × cols, blocks striding over tiles; `nbuf` UB buffer sets (MTE2 of tile
    i+1 overlaps V of tile i and MTE3 of tile i-1 when 2)."""
    t = _gm((rows, cols), dtype)
    u = _buf((tile_rows, cols), dtype, "ub")
    dyn = _dyn_gm(dtype, cols)
    ntiles = -(-rows // tile_rows)

    def step(p: int, ind: str) -> str:
        return f"""
{ind}ascend.wait_flag MTE3 -> MTE2, {p}
{ind}%xs{p} = memref.subview %x[%r0, 0] [%rs, {cols}] [1, 1] : {t} to {dyn}
{ind}%ys{p} = memref.subview %y[%r0, 0] [%rs, {cols}] [1, 1] : {t} to {dyn}
{ind}ascend.copy %xs{p}, %ux{p} : {dyn}, {u}
{ind}ascend.copy %ys{p}, %uy{p} : {dyn}, {u}
{ind}ascend.set_flag MTE2 -> V, {p}
{ind}ascend.wait_flag MTE2 -> V, {p}
{ind}ascend.vadd %ux{p}, %uy{p}, %uz{p} : {u}, {u}, {u}
{ind}ascend.set_flag V -> MTE3, {p}
{ind}ascend.wait_flag V -> MTE3, {p}
{ind}%zs{p} = memref.subview %z[%r0, 0] [%rs, {cols}] [1, 1] : {t} to {dyn}
{ind}ascend.copy %uz{p}, %zs{p} : {u}, {dyn}
{ind}ascend.set_flag MTE3 -> MTE2, {p}"""

    if nbuf == 1:
        body = step(0, "      ")
    else:
        body = f"""
      %it = arith.divui %t, %cBD : index
      %par = arith.remui %it, %c2 : index
      %even = arith.cmpi eq, %par, %c0 : index
      scf.if %even {{{step(0, "        ")}
      }} else {{{step(1, "        ")}
      }}"""
    allocs = "\n".join(f"    %ux{p} = ascend.alloc : {u}\n    %uy{p} = ascend.alloc : {u}\n    %uz{p} = ascend.alloc : {u}" for p in range(nbuf))
    prime = "\n".join(f"    ascend.set_flag MTE3 -> MTE2, {p}" for p in range(nbuf))
    drain = "\n".join(f"    ascend.wait_flag MTE3 -> MTE2, {p}" for p in range(nbuf))
    return f"""builtin.module {{
  ascend.kernel @add(%x: {t}, %y: {t}, %z: {t}) attributes {{block_dim = {block_dim} : i64, core_type = #ascend.core_type<aiv>}} {{
    %c0 = arith.constant 0 : index
    %c2 = arith.constant 2 : index
    %cR = arith.constant {rows} : index
    %cTR = arith.constant {tile_rows} : index
    %cNT = arith.constant {ntiles} : index
    %cBD = arith.constant {block_dim} : index
    %bid = ascend.block_idx : index
{allocs}
{prime}
    scf.for %t = %bid to %cNT step %cBD {{
      %r0 = arith.muli %t, %cTR : index
      %rrem = arith.subi %cR, %r0 : index
      %rs = arith.minsi %rrem, %cTR : index{body}
    }}
{drain}
    ascend.return
  }}
  func.func @main(%x: {t} {{onnx.name = "x"}}, %y: {t} {{onnx.name = "y"}}) -> ({t} {{onnx.name = "z"}}) {{
    %z = ascend.alloc : {t}
    ascend.launch @add(%x, %y, %z) : {t}, {t}, {t}
    func.return %z : {t}
  }}
}}
"""


def parse(text: str):
    """Parse ascend IR text with ascendir's context (verifies it)."""
    from xdsl.parser import Parser

    from ascendir.session import make_context

    module = Parser(make_context(), text).parse_module()
    module.verify()
    return module
