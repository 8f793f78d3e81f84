// RUN: ascendir-opt %s -p convert-nn-to-ascend | ascendir-opt | filecheck %s
// RUN: ascendir-opt %s -p 'convert-nn-to-ascend{target=ascend910a}' | ascendir-opt | filecheck %s --check-prefix=C100

// nn.fused flash_attention (as fuse-attention builds it): causal GQA (2 query heads over 1 K/V
// head, 40 tokens, f16). 910B: one mix kernel on 3 cores (row blocks of 16, chosen by
// estimate_cycles over the largest tile's 1 core); the two heads are stacked along M (32 = 2 x 16
// rows) so K and V are loaded once for both; K^T comes
// from a transposing L1 -> L0B load; S, P and O cross AIC <-> AIV through a per-core GM
// workspace with unit-tagged flags; the group's two AIVs take 16 rows (one head) each, AIV 1's
// ops tagged subblock = 1; the diagonal block is masked with varange / vcmp / vsel.
// The [S, S] scores never get a GM buffer.
// CHECK:       ascend.kernel @flash_attention_0({{.*}}) attributes {block_dim = 3 : i64, core_type = #ascend.core_type<mix>}
// CHECK:         ascend.varange
// CHECK:         ascend.vtranspose
// CHECK:         ascend.copy %{{.*}}, %{{.*}} {transpose = true} : memref<48x32xf16, #ascend<space l1>>, memref<32x48xf16, #ascend<space l0b>>
// CHECK:         ascend.mmad %{{.*}}, %{{.*}}, %{{.*}} {init = true} : memref<32x32xf16, #ascend<space l0a>>, memref<32x48xf16, #ascend<space l0b>>, memref<32x48xf32, #ascend<space l0c>>
// CHECK:         ascend.copy %{{.*}}, %{{.*}} {layout = #ascend.layout<nz2nd>} : memref<32x48xf32, #ascend<space l0c>>, memref<32x48xf32, {{.*}}#ascend<space gm>>
// CHECK-NEXT:    ascend.set_flag FIX -> M
// CHECK-NEXT:    ascend.set_flag MTE1 -> MTE2, {{[0-9]}} {units = #ascend.flag_units<aic -> aic>}
// CHECK-NEXT:    ascend.set_flag FIX -> MTE2, {{[0-9]}} {units = #ascend.flag_units<aic -> aiv>}
// CHECK-NEXT:    ascend.set_flag FIX -> MTE2, {{[0-9]}} {units = #ascend.flag_units<aic -> aiv1>
// CHECK:         ascend.vcmp gt
// CHECK:         ascend.vsel
// CHECK:         ascend.vreduce_max
// CHECK:         ascend.vexp
// CHECK:         ascend.set_flag MTE3 -> MTE2, {{[0-9]}} {units = #ascend.flag_units<aiv -> aic>}
// CHECK:         ascend.vcmp gt{{.*}}subblock = 1
// CHECK:         ascend.vsel{{.*}}subblock = 1
// CHECK:         ascend.vreduce_max{{.*}}subblock = 1
// CHECK:         ascend.vexp{{.*}}subblock = 1
// CHECK:         ascend.set_flag MTE3 -> MTE2, {{[0-9]}} {units = #ascend.flag_units<aiv1 -> aic>, subblock = 1 : i64}
// CHECK:         ascend.mmad %{{.*}}, %{{.*}}, %{{.*}} {init = true} : memref<32x48xf16, #ascend<space l0a>>, memref<48x32xf16, #ascend<space l0b>>, memref<32x32xf32, #ascend<space l0c>>
// CHECK:         ascend.vdiv
// CHECK:       func.func @main
// CHECK-NOT:     memref<{{.*}}40x40
// CHECK:         ascend.launch @flash_attention_0

// 910A (coupled core): no workspace; L0C -> UB by the vector pipe, P back to L1 through UB.
// C100:        ascend.kernel @flash_attention_0({{.*}}) attributes {block_dim = 3 : i64, core_type = #ascend.core_type<aic>}
// C100-NOT:      units
// C100:          ascend.copy %{{.*}}, %{{.*}} : memref<32x48xf32, #ascend<space l0c>>, memref<32x48xf32, #ascend<space ub>>
// C100:          ascend.copy %{{.*}}, %{{.*}} : memref<32x48xf16, #ascend<space ub>>, memref<32x48xf16, #ascend<space l1>>
// C100:          ascend.copy %{{.*}}, %{{.*}} : memref<32x32xf32, #ascend<space l0c>>, memref<32x32xf32, #ascend<space ub>>
func.func @main(%q: tensor<1x2x40x32xf16>, %k: tensor<1x1x40x32xf16>, %v: tensor<1x1x40x32xf16>) -> tensor<1x2x40x32xf16> {
  %o = nn.fused(%q, %k, %v) {kind = #nn.fused_kind<flash_attention>} : (tensor<1x2x40x32xf16>, tensor<1x1x40x32xf16>, tensor<1x1x40x32xf16>) -> tensor<1x2x40x32xf16> {
  ^bb0(%a: tensor<1x2x40x32xf16>, %b: tensor<1x1x40x32xf16>, %c: tensor<1x1x40x32xf16>):
    %r = nn.attention %a, %b, %c {num_heads = 2 : i64, num_kv_heads = 1 : i64, causal = true, scale = 0.176776695 : f32} : (tensor<1x2x40x32xf16>, tensor<1x1x40x32xf16>, tensor<1x1x40x32xf16>) -> tensor<1x2x40x32xf16>
    nn.yield %r : tensor<1x2x40x32xf16>
  }
  func.return %o : tensor<1x2x40x32xf16>
}
