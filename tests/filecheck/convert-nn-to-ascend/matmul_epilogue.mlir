// RUN: ascendir-opt %s -p convert-nn-to-ascend | ascendir-opt | filecheck %s
// RUN: ascendir-opt %s -p 'convert-nn-to-ascend{target=ascend910a}' | ascendir-opt | filecheck %s --check-prefix=C100

// nn.fused matmul_epilogue regions. 910B: the bias row goes GM -> L1 -> BT and seeds L0C on the
// first mmad; ReLU is applied by FixPipe; GELU needs the AIV, so that kernel is a mix kernel
// whose AIV loop picks up each finished tile (FIX -> MTE2 flag) and applies vgelu in place.
// 910A: L0C -> UB in f32, vadd of the bias row, activation, vcast, UB -> GM.

// CHECK-LABEL: ascend.kernel @matmul_epilogue_0
// CHECK-SAME:    core_type = #ascend.core_type<aic>
// CHECK:         %[[L0C:.*]] = ascend.alloc : memref<[[BM:[0-9]+]]x[[BN:[0-9]+]]xf32, #ascend<space l0c>>
// CHECK-NEXT:    %[[L1BIAS:.*]] = ascend.alloc : memref<1x[[BN]]xf16, #ascend<space l1>>
// CHECK-NEXT:    %[[BT:.*]] = ascend.alloc : memref<1x[[BN]]xf16, #ascend<space bt>>
// CHECK:         scf.for
// CHECK:           ascend.copy %{{.*}}, %[[L1BIAS]] : memref<1x?xf16, {{.*}}, memref<1x[[BN]]xf16, #ascend<space l1>>
// CHECK-NEXT:      ascend.set_flag MTE2 -> MTE1, [[EB:[0-9]]]
// CHECK-NEXT:      ascend.wait_flag MTE2 -> MTE1, [[EB]]
// CHECK-NEXT:      ascend.wait_flag M -> MTE1, [[EBT:[0-9]]]
// CHECK-NEXT:      ascend.copy %[[L1BIAS]], %[[BT]]
// CHECK-NEXT:      ascend.set_flag MTE1 -> M, [[EBT]]
// CHECK:           ascend.wait_flag MTE1 -> M, [[EBT]]
// CHECK:           ascend.mmad %{{.*}}, %{{.*}}, %{{.*}} bias(%[[BT]] : memref<1x[[BN]]xf16, #ascend<space bt>>) {init = true}
// CHECK:           ascend.set_flag M -> MTE1, [[EBT]]
// CHECK:           ascend.copy %{{.*}}, %{{.*}} {layout = #ascend.layout<nz2nd>, relu = true} : memref<[[BM]]x[[BN]]xf32, #ascend<space l0c>>, memref<?x?xf16,

// CHECK-LABEL: ascend.kernel @matmul_epilogue_1
// CHECK-SAME:    (%{{.*}}: memref<90x70xf16, #ascend<space gm>>, %{{.*}}: memref<70x150xf16, #ascend<space gm>>, %[[OUT:.*]]: memref<90x150xf16, #ascend<space gm>>, %{{.*}}: memref<1x150xf16, #ascend<space gm>>)
// CHECK-SAME:    core_type = #ascend.core_type<mix>
// CHECK:         scf.for
// CHECK:           ascend.mmad {{.*}} bias(
// CHECK:           ascend.copy %{{.*}}, %[[PRE:.*]] {layout = #ascend.layout<nz2nd>} : memref<[[BM2:[0-9]+]]x[[BN2:[0-9]+]]xf32, #ascend<space l0c>>
// CHECK-NEXT:      ascend.set_flag FIX -> M, 0
// CHECK-NEXT:      ascend.set_flag FIX -> MTE2, 0
// CHECK-NEXT:    }
// CHECK-NEXT:    ascend.set_flag V -> MTE2, 0
// CHECK-NEXT:    ascend.set_flag MTE3 -> V, 0
// CHECK-NEXT:    scf.for
// CHECK:           %[[TILE:.*]] = memref.subview %[[OUT]]
// CHECK-NEXT:      ascend.wait_flag FIX -> MTE2, 0
// CHECK-NEXT:      ascend.wait_flag V -> MTE2, 0
// CHECK-NEXT:      ascend.copy %[[TILE]], %[[UIN:.*]] : memref<?x?xf16, {{.*}}, memref<[[BM2]]x[[BN2]]xf16, #ascend<space ub>>
// CHECK:           ascend.vgelu %[[UIN]], %[[UOUT:.*]] : memref<[[BM2]]x[[BN2]]xf16, #ascend<space ub>>
// CHECK:           ascend.copy %[[UOUT]], %[[TILE]]

// C100-LABEL: ascend.kernel @matmul_epilogue_1
// C100-SAME:    core_type = #ascend.core_type<aic>
// C100-NOT:     space bt
// C100:         ascend.copy %{{.*}}, %[[ACC:.*]] : memref<[[CM:[0-9]+]]x[[CN:[0-9]+]]xf32, #ascend<space l0c>>, memref<[[CM]]x[[CN]]xf32, #ascend<space ub>>
// C100-NEXT:    ascend.set_flag V -> M, 0
// C100-NEXT:    ascend.wait_flag MTE2 -> V, 0
// C100-NEXT:    ascend.vcast %[[B16:.*]], %[[B32:.*]] : memref<1x[[CN]]xf16, #ascend<space ub>>, memref<1x[[CN]]xf32, #ascend<space ub>>
// C100-NEXT:    ascend.vadd %[[ACC]], %[[B32]], %[[ACC]]
// C100-NEXT:    ascend.set_flag V -> MTE2, 0
// C100-NEXT:    ascend.vgelu %[[ACC]], %[[ACC]]
// C100-NEXT:    ascend.vcast %[[ACC]], %[[OUT16:.*]] : memref<[[CM]]x[[CN]]xf32, #ascend<space ub>>, memref<[[CM]]x[[CN]]xf16, #ascend<space ub>>
// C100-NEXT:    ascend.set_flag V -> MTE3, 0
// C100-NEXT:    ascend.wait_flag V -> MTE3, 0
// C100-NEXT:    ascend.copy %[[OUT16]]
func.func @main(%a: tensor<2x45x70xf16> {onnx.name = "a"}, %b: tensor<70x150xf16> {onnx.name = "b"}, %c: tensor<150xf16> {onnx.name = "c"}) -> (tensor<2x45x150xf16> {onnx.name = "r"}, tensor<2x45x150xf16> {onnx.name = "g"}) {
  %r = nn.fused(%a, %b, %c) {kind = #nn.fused_kind<matmul_epilogue>} : (tensor<2x45x70xf16>, tensor<70x150xf16>, tensor<150xf16>) -> tensor<2x45x150xf16> {
  ^bb0(%x: tensor<2x45x70xf16>, %w: tensor<70x150xf16>, %bias: tensor<150xf16>):
    %m = nn.matmul %x, %w : (tensor<2x45x70xf16>, tensor<70x150xf16>) -> tensor<2x45x150xf16>
    %y = nn.add %m, %bias : (tensor<2x45x150xf16>, tensor<150xf16>) -> tensor<2x45x150xf16>
    %z = nn.relu %y : (tensor<2x45x150xf16>) -> tensor<2x45x150xf16>
    nn.yield %z : tensor<2x45x150xf16>
  }
  %g = nn.fused(%a, %b, %c) {kind = #nn.fused_kind<matmul_epilogue>} : (tensor<2x45x70xf16>, tensor<70x150xf16>, tensor<150xf16>) -> tensor<2x45x150xf16> {
  ^bb0(%x: tensor<2x45x70xf16>, %w: tensor<70x150xf16>, %bias: tensor<150xf16>):
    %m = nn.matmul %x, %w : (tensor<2x45x70xf16>, tensor<70x150xf16>) -> tensor<2x45x150xf16>
    %y = nn.add %bias, %m : (tensor<150xf16>, tensor<2x45x150xf16>) -> tensor<2x45x150xf16>
    %z = nn.gelu %y : (tensor<2x45x150xf16>) -> tensor<2x45x150xf16>
    nn.yield %z : tensor<2x45x150xf16>
  }
  func.return %r, %g : tensor<2x45x150xf16>, tensor<2x45x150xf16>
}
