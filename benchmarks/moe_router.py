"""MoE routers as the ONNX importer writes them, in nn IR text: what benchmarks/moe.py times
(fused by fuse-moe-gating, or op by op) and tests/test_moe_gating_groups.py checks.

    grouped_router(t_rows, e, g, kg, k, ty)   DeepSeek-V3's group-limited router (noaux_tc)
    softmax_router(t_rows, e, k, ty)          Mixtral's: softmax, top-k, renormalised

Logits [T, E] are the first argument (arg0), the correction bias [E] the second (arg1).
"""

from __future__ import annotations

# the masked_fill value: the exporters write -inf (0xFF800000), which xDSL's parser reads back as an
# integer; a finite lowest value means the same for these scores
FILL = {"f32": "-3.0e+38", "f16": "-6.5e+04", "bf16": "-3.0e+38"}


def grouped_router(t_rows: int, e: int, g: int, kg: int, k: int, ty: str = "f32", select: str = "top2_sum",
                   eps: bool = True, scale: bool = True, bias: bool = True, fix: bool = True) -> str:
    """DeepSeek-V3's group-limited router as the ONNX importer writes it (TopK within groups,
    ReduceSum, TopK over groups, ScatterElements of ones into zeros, the mask expanded to the
    experts, Where(Not(Cast)), TopK, GatherElements of the un-biased scores, renorm, scale);
    `select = "max"`: groups scored by their largest score (ReduceMax)."""
    m = e // g

    def T(*s: int, el: str = ty) -> str:
        return "tensor<" + "x".join(map(str, s)) + ("x" if s else "") + f"{el}>"

    lines = []
    a = lines.append
    args = [f"%x: {T(t_rows, e)}"] + ([f"%bias: {T(e)}"] if bias else [])
    a(f"func.func @main({', '.join(args)}) -> ({T(t_rows, k)}, {T(t_rows, k, el='i64')}) {{")
    a(f"  %p = nn.sigmoid %x : ({T(t_rows, e)}) -> {T(t_rows, e)}")
    b = "%p"
    if bias:
        a(f"  %b = nn.add %p, %bias : ({T(t_rows, e)}, {T(e)}) -> {T(t_rows, e)}")
        b = "%b"
    a(f"  %r = nn.reshape {b} : ({T(t_rows, e)}) -> {T(t_rows, g, m)}")
    if select == "top2_sum":
        a(f"  %tv, %ti = nn.topk %r {{k = 2 : i64, axis = 2 : i64, largest = true}} : ({T(t_rows, g, m)}) -> ({T(t_rows, g, 2)}, {T(t_rows, g, 2, el='i64')})")
        a(f"  %gs = nn.reduce_sum %tv {{axes = array<i64: 2>, keepdims = false}} : ({T(t_rows, g, 2)}) -> {T(t_rows, g)}")
    else:
        a(f"  %gs = nn.reduce_max %r {{axes = array<i64: 2>, keepdims = false}} : ({T(t_rows, g, m)}) -> {T(t_rows, g)}")
    a(f"  %gv, %gi = nn.topk %gs {{k = {kg} : i64, axis = 1 : i64, largest = true}} : ({T(t_rows, g)}) -> ({T(t_rows, kg)}, {T(t_rows, kg, el='i64')})")
    gi = "%gi"
    a("  %c0 = nn.constant dense<0> : tensor<i64>")
    if fix:
        a(f"  %cg = nn.constant dense<{g}> : tensor<i64>")
        a(f"  %gia = nn.add %gi, %cg : ({T(t_rows, kg, el='i64')}, tensor<i64>) -> {T(t_rows, kg, el='i64')}")
        a(f"  %gil = nn.less %gi, %c0 : ({T(t_rows, kg, el='i64')}, tensor<i64>) -> {T(t_rows, kg, el='i1')}")
        a(f"  %gif = nn.where %gil, %gia, %gi : ({T(t_rows, kg, el='i1')}, {T(t_rows, kg, el='i64')}, {T(t_rows, kg, el='i64')}) -> {T(t_rows, kg, el='i64')}")
        gi = "%gif"
    a(f"  %iota = nn.constant dense<[[{', '.join(map(str, range(g)))}]]> : {T(1, g, el='i64')}")
    a(f"  %zeros = nn.constant dense<0.0> : {T(t_rows, g)}")
    a(f"  %ones = nn.constant dense<1.0> : {T(t_rows, kg)}")
    acc = "%zeros"
    for j in range(kg):
        a(f"  %s{j} = nn.slice {gi} {{starts = array<i64: 0, {j}>, steps = array<i64: 1, 1>}} : ({T(t_rows, kg, el='i64')}) -> {T(t_rows, 1, el='i64')}")
        a(f"  %u{j} = nn.slice %ones {{starts = array<i64: 0, {j}>, steps = array<i64: 1, 1>}} : ({T(t_rows, kg)}) -> {T(t_rows, 1)}")
        a(f"  %q{j} = nn.equal %s{j}, %iota : ({T(t_rows, 1, el='i64')}, {T(1, g, el='i64')}) -> {T(t_rows, g, el='i1')}")
        a(f"  %a{j} = nn.where %q{j}, %u{j}, {acc} : ({T(t_rows, g, el='i1')}, {T(t_rows, 1)}, {T(t_rows, g)}) -> {T(t_rows, g)}")
        acc = f"%a{j}"
    a(f"  %m0 = nn.reshape {acc} : ({T(t_rows, g)}) -> {T(t_rows, g, 1)}")
    a(f"  %m1 = nn.expand %m0 : ({T(t_rows, g, 1)}) -> {T(t_rows, g, m)}")
    a(f"  %m2 = nn.reshape %m1 : ({T(t_rows, g, m)}) -> {T(t_rows, e)}")
    a(f"  %mb = nn.cast %m2 : ({T(t_rows, e)}) -> {T(t_rows, e, el='i1')}")
    a(f"  %mn = nn.not %mb : ({T(t_rows, e, el='i1')}) -> {T(t_rows, e, el='i1')}")
    a(f"  %ninf = nn.constant dense<{FILL[ty]}> : {T(el=ty)}")
    a(f"  %sc = nn.where %mn, %ninf, {b} : ({T(t_rows, e, el='i1')}, {T(el=ty)}, {T(t_rows, e)}) -> {T(t_rows, e)}")
    a(f"  %v, %ids = nn.topk %sc {{k = {k} : i64, axis = 1 : i64, largest = true}} : ({T(t_rows, e)}) -> ({T(t_rows, k)}, {T(t_rows, k, el='i64')})")
    a(f"  %flat = nn.reshape %p : ({T(t_rows, e)}) -> {T(t_rows * e)}")
    ids = "%ids"
    if fix:
        a(f"  %ce = nn.constant dense<{e}> : tensor<i64>")
        a(f"  %ia = nn.add %ids, %ce : ({T(t_rows, k, el='i64')}, tensor<i64>) -> {T(t_rows, k, el='i64')}")
        a(f"  %il = nn.less %ids, %c0 : ({T(t_rows, k, el='i64')}, tensor<i64>) -> {T(t_rows, k, el='i1')}")
        a(f"  %if = nn.where %il, %ia, %ids : ({T(t_rows, k, el='i1')}, {T(t_rows, k, el='i64')}, {T(t_rows, k, el='i64')}) -> {T(t_rows, k, el='i64')}")
        ids = "%if"
    rows = "[" + ", ".join("[" + ", ".join([str(r * e)] * k) + "]" for r in range(t_rows)) + "]"
    a(f"  %off = nn.constant dense<{rows}> : {T(t_rows, k, el='i64')}")
    a(f"  %fi = nn.add {ids}, %off : ({T(t_rows, k, el='i64')}, {T(t_rows, k, el='i64')}) -> {T(t_rows, k, el='i64')}")
    a(f"  %w = nn.gather %flat, %fi {{axis = 0 : i64}} : ({T(t_rows * e)}, {T(t_rows, k, el='i64')}) -> {T(t_rows, k)}")
    a(f"  %ws = nn.reduce_sum %w {{axes = array<i64: 1>, keepdims = true}} : ({T(t_rows, k)}) -> {T(t_rows, 1)}")
    den = "%ws"
    if eps:
        a(f"  %eps = nn.constant dense<1.0e-20> : {T(el=ty)}")
        a(f"  %wse = nn.add %ws, %eps : ({T(t_rows, 1)}, {T(el=ty)}) -> {T(t_rows, 1)}")
        den = "%wse"
    a(f"  %wn = nn.div %w, {den} : ({T(t_rows, k)}, {T(t_rows, 1)}) -> {T(t_rows, k)}")
    out = "%wn"
    if scale:
        a(f"  %scale = nn.constant dense<2.5> : {T(el=ty)}")
        a(f"  %wsc = nn.mul %wn, %scale : ({T(t_rows, k)}, {T(el=ty)}) -> {T(t_rows, k)}")
        out = "%wsc"
    a(f"  func.return {out}, %ids : {T(t_rows, k)}, {T(t_rows, k, el='i64')}")
    a("}")
    return "\n".join(lines)


def softmax_router(t_rows: int, e: int, k: int, ty: str = "f32") -> str:
    """Mixtral's router after its MatMul: softmax over the E experts, top-k, the k weights
    divided by their sum."""
    x, v, i = f"tensor<{t_rows}x{e}x{ty}>", f"tensor<{t_rows}x{k}x{ty}>", f"tensor<{t_rows}x{k}xi64>"
    s = f"tensor<{t_rows}x1x{ty}>"
    return f"""func.func @main(%x: {x}) -> ({v}, {i}) {{
  %p = nn.softmax %x {{axis = 1 : i64}} : ({x}) -> {x}
  %v, %i = nn.topk %p {{k = {k} : i64, axis = 1 : i64, largest = true}} : ({x}) -> ({v}, {i})
  %s = nn.reduce_sum %v {{axes = array<i64: 1>, keepdims = true}} : ({v}) -> {s}
  %w = nn.div %v, %s : ({v}, {s}) -> {v}
  func.return %w, %i : {v}, {i}
}}"""
