// RUN: ascendir-opt %s -p convert-nn-to-ascend | ascendir-opt | filecheck %s
// RUN: ascendir-opt %s -p 'convert-nn-to-ascend{target=ascend910a}' | ascendir-opt | filecheck %s --check-prefix=C100

// A decode-shaped W4A16 GEMV (templates/antiquant.py): the int4 weight is read narrow into UB by
// both AIVs of a group (half a chunk each), cast, offset and scaled per group of 32 rows, stored to
// the per-core workspace (two slots) and handed to the AIC, which multiplies in fp16.
// 910A (coupled core): one AIC-typed kernel, the AIV work on its vector unit, the output through UB.

// CHECK-LABEL: ascend.kernel @weight_quant_matmul_0
// CHECK-SAME:    memref<256x512xi4, #ascend<space gm>>
// CHECK-SAME:    core_type = #ascend.core_type<mix>
// CHECK:         ascend.copy %{{.*}}, %{{.*}} : memref<128x16xi4, strided<[512, 1], offset: ?>, #ascend<space gm>>, memref<128x16xi4, #ascend<space ub>>
// CHECK:         ascend.vcast %{{.*}}, %{{.*}} : memref<128x16xi4, #ascend<space ub>>, memref<128x16xf16, #ascend<space ub>>
// CHECK-NEXT:    memref.subview
// CHECK-NEXT:    memref.subview
// CHECK-NEXT:    ascend.vadd %{{.*}} : memref<32x16xf16, strided<[16, 1]>, #ascend<space ub>>, memref<1x16xf16, strided<[16, 1]>, #ascend<space ub>>
// CHECK-NEXT:    memref.subview
// CHECK-NEXT:    ascend.vmul
// CHECK:         ascend.set_flag MTE3 -> MTE2, {{[0-9]+}} {units = #ascend.flag_units<aiv -> aic>}
// CHECK:         ascend.copy %{{.*}}, %{{.*}} {subblock = 1 : i64} : memref<128x16xi4, strided<[512, 1], offset: ?>, #ascend<space gm>>, memref<128x16xi4, #ascend<space ub>>
// CHECK:         ascend.set_flag MTE3 -> MTE2, {{[0-9]+}} {units = #ascend.flag_units<aiv1 -> aic>, subblock = 1 : i64}
// CHECK:         ascend.wait_flag MTE3 -> MTE2, {{[0-9]+}} {units = #ascend.flag_units<aiv -> aic>}
// CHECK:         ascend.mmad
// CHECK:         ascend.copy %{{.*}}, %{{.*}} {layout = #ascend.layout<nz2nd>}

// C100-LABEL: ascend.kernel @weight_quant_matmul_0
// C100-SAME:    core_type = #ascend.core_type<aic>
// C100:         ascend.vcast
// C100:         ascend.mmad
// C100:         ascend.copy %{{.*}}, %{{.*}} : memref<16x{{[0-9]+}}xf32, #ascend<space l0c>>, memref<16x{{[0-9]+}}xf16, #ascend<space ub>>
func.func @main(%x: tensor<1x256xf16>, %w: tensor<256x512xi4>, %s: tensor<8x512xf16>, %o: tensor<8x512xf16>) -> tensor<1x512xf16> {
  %y = nn.weight_quant_matmul %x, %w, %s, %o {group_size = 32 : i64} : (tensor<1x256xf16>, tensor<256x512xi4>, tensor<8x512xf16>, tensor<8x512xf16>) -> tensor<1x512xf16>
  func.return %y : tensor<1x512xf16>
}
