// RUN: ascendir-opt %s -p convert-nn-to-ascend | ascendir-opt | filecheck %s
// RUN: ascendir-opt %s -p 'convert-nn-to-ascend{target=ascend910a}' | ascendir-opt | filecheck %s --check-prefix=C100

// A decode-shaped SwiGLU (one token, H 512, I 1376): the cost model picks the single fused
// kernel (lowering/ffn_fused.py) and records why on both kernels. The [1, 1376] intermediate is
// never a GM buffer: per item (I-range of one core) h lives in L1 (16 x 64 here).
// 910B: gate/up accumulators leave by FixPipe into a two-slot per-core ring (two primed
// AIV -> AIC credits on one flag), the AIV applies SiLU * up and writes the f16 h tile into a second
// ring, the AIC loads it back into L1 (nd2nz) and multiplies it by Wd; fp32 partials per split go
// to [nsplit, Ho], and a vector kernel folds them with one strided load per tile.
// 910A: no ring at all, h goes UB -> L1 (MTE3) on the coupled core.

// CHECK-LABEL: ascend.kernel @ffn_fused_0
// CHECK-SAME:    %[[PART:[0-9]+]]: memref<[[NS:[0-9]+]]x512xf32, #ascend<space gm>>, %[[WSACC:[0-9]+]]: memref<{{[0-9]+}}x128xf32, #ascend<space gm>>, %[[WSH:[0-9]+]]: memref<{{[0-9]+}}x64xf16, #ascend<space gm>>)
// CHECK-SAME:    core_type = #ascend.core_type<mix>, ffn_plan = "fused: est fused {{[0-9]+}} vs two-kernel {{[0-9]+}} cycles (bm=16 bi=64
// CHECK:         %[[H:.*]] = ascend.alloc : memref<16x64xf16, #ascend<space l1>>
// CHECK:         ascend.set_flag MTE2 -> FIX, [[EW:[0-9]]] {units = #ascend.flag_units<aiv -> aic>}
// CHECK-NEXT:    ascend.set_flag MTE2 -> FIX, [[EW]] {units = #ascend.flag_units<aiv -> aic>}
// CHECK:         scf.for
// CHECK:           ascend.wait_flag MTE2 -> FIX, [[EW]] {units = #ascend.flag_units<aiv -> aic>}
// CHECK:           ascend.copy %{{.*}}, %{{.*}} {layout = #ascend.layout<nz2nd>} : memref<16x64xf32, #ascend<space l0c>>, memref<16x64xf32, strided<[128, 1], offset: ?>, #ascend<space gm>>
// CHECK:           ascend.set_flag FIX -> MTE2, [[ER:[0-9]]] {units = #ascend.flag_units<aic -> aiv>}
// CHECK:           ascend.vsilu
// CHECK-NEXT:      ascend.vmul
// CHECK:           ascend.vcast %{{.*}}, %[[UBH:.*]] : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf16, #ascend<space ub>>
// CHECK:           ascend.copy %[[UBH]], %{{.*}} : memref<16x64xf16, #ascend<space ub>>, memref<16x64xf16, strided<[64, 1], offset: ?>, #ascend<space gm>>
// CHECK:           ascend.set_flag MTE3 -> MTE2, [[EH:[0-9]]] {units = #ascend.flag_units<aiv -> aic>}
// CHECK:           ascend.wait_flag MTE3 -> MTE2, [[EH]] {units = #ascend.flag_units<aiv -> aic>}
// CHECK:           %[[SLOT:.*]] = memref.subview %[[WSH]]
// CHECK:           %[[HV:.*]] = memref.subview %[[H]]
// CHECK-NEXT:      ascend.copy %[[SLOT]], %[[HV]] {layout = #ascend.layout<nd2nz>}
// CHECK:           ascend.mmad
// CHECK:           ascend.copy %{{.*}}, %{{.*}} {layout = #ascend.layout<nz2nd>} : memref<16x256xf32, #ascend<space l0c>>, memref<1x256xf32, strided<[512, 1], offset: ?>, #ascend<space gm>>
// CHECK-LABEL: ascend.kernel @ffn_reduce_0
// CHECK-SAME:    core_type = #ascend.core_type<aiv>, ffn_plan = "fused:
// CHECK:         ascend.copy %{{.*}}, %{{.*}} : memref<[[NS]]x256xf32, strided<[512, 1], offset: ?>, #ascend<space gm>>, memref<[[NS]]x256xf32, #ascend<space ub>>
// CHECK:         ascend.vadd
// CHECK:         ascend.vcast
// CHECK-NOT:   ascend.kernel
// CHECK:       func.func @main
// CHECK-NOT:     ascend.alloc : memref<1x1376xf16
// CHECK:         ascend.launch @ffn_fused_0
// CHECK:         ascend.launch @ffn_reduce_0

// C100-LABEL: ascend.kernel @ffn_fused_0
// C100-SAME:    core_type = #ascend.core_type<aic>, ffn_plan = "fused:
// C100:         %[[H:.*]] = ascend.alloc : memref<16x64xf16, #ascend<space l1>>
// C100:         ascend.vsilu
// C100:         %[[HV:.*]] = memref.subview %[[H]]
// C100-NEXT:    ascend.copy %{{.*}}, %[[HV]] : memref<16x64xf16, #ascend<space ub>>, memref<16x64xf16, strided<[64, 1], offset: ?>, #ascend<space l1>>
// C100-LABEL: ascend.kernel @ffn_reduce_0
// C100:       func.func @main
// C100-NOT:     ascend.alloc : memref<1x1376xf16

func.func @main(%x: tensor<1x1x512xf16>, %wg: tensor<512x1376xf16>, %wu: tensor<512x1376xf16>, %wd: tensor<1376x512xf16>) -> tensor<1x1x512xf16> {
  %y = nn.fused(%x, %wg, %wu, %wd) {kind = #nn.fused_kind<ffn>} : (tensor<1x1x512xf16>, tensor<512x1376xf16>, tensor<512x1376xf16>, tensor<1376x512xf16>) -> tensor<1x1x512xf16> {
  ^bb0(%a: tensor<1x1x512xf16>, %g: tensor<512x1376xf16>, %u: tensor<512x1376xf16>, %d: tensor<1376x512xf16>):
    %gt = nn.matmul %a, %g : (tensor<1x1x512xf16>, tensor<512x1376xf16>) -> tensor<1x1x1376xf16>
    %s = nn.silu %gt : (tensor<1x1x1376xf16>) -> tensor<1x1x1376xf16>
    %up = nn.matmul %a, %u : (tensor<1x1x512xf16>, tensor<512x1376xf16>) -> tensor<1x1x1376xf16>
    %m = nn.mul %s, %up : (tensor<1x1x1376xf16>, tensor<1x1x1376xf16>) -> tensor<1x1x1376xf16>
    %o = nn.matmul %m, %d : (tensor<1x1x1376xf16>, tensor<1376x512xf16>) -> tensor<1x1x512xf16>
    nn.yield %o : tensor<1x1x512xf16>
  }
  func.return %y : tensor<1x1x512xf16>
}
