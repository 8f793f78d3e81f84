// RUN: ascendir-opt %s -p convert-nn-to-ascend | ascendir-opt | filecheck %s

// Data movement: a head-split transpose (rows of 64 B: permuted in UB by vtranspose), a slice
// (a strided GM subview per tile, DMA only), a concat (one loop per input into its column range),
// an embedding gather (index tile to UB, then gather_rows), and reshapes as free views.

// CHECK-LABEL: ascend.kernel @transpose_0
// CHECK-SAME:    core_type = #ascend.core_type<aiv>
// CHECK:         ascend.copy %{{.*}}, %[[IN:.*]] : memref<2x[[S:[0-9]+]]x4x16xf32, strided<[2048, 64, 16, 1], offset: ?>, #ascend<space gm>>, memref<2x[[S]]x4x16xf32, #ascend<space ub>>
// CHECK:         ascend.vtranspose %[[IN]], %[[OUT:.*]] {perm = [0 : i64, 2 : i64, 1 : i64, 3 : i64]} : memref<2x[[S]]x4x16xf32, #ascend<space ub>>, memref<2x4x[[S]]x16xf32, #ascend<space ub>>
// CHECK:         ascend.copy %[[OUT]], %{{.*}} : memref<2x4x[[S]]x16xf32, #ascend<space ub>>, memref<2x4x[[S]]x16xf32, strided<[2048, 512, 16, 1], offset: ?>, #ascend<space gm>>

// CHECK-LABEL: ascend.kernel @slice_0
// CHECK:         %[[UB:.*]] = ascend.alloc : memref<1x1x32x8xf32, #ascend<space ub>>
// CHECK:         ascend.set_flag MTE3 -> MTE2, 0
// CHECK:         scf.for
// CHECK:           ascend.wait_flag MTE3 -> MTE2, 0
// CHECK-NEXT:      %[[SRC:.*]] = memref.subview %{{.*}}[%{{.*}}, %{{.*}}, 0, 8] [1, 1, 32, 8] [1, 1, 1, 1]
// CHECK-NEXT:      ascend.copy %[[SRC]], %[[UB]]
// CHECK-NEXT:      ascend.set_flag MTE2 -> MTE3, 0
// CHECK-NEXT:      ascend.wait_flag MTE2 -> MTE3, 0
// CHECK-NEXT:      %[[DST:.*]] = memref.subview
// CHECK-NEXT:      ascend.copy %[[UB]], %[[DST]]
// CHECK-NEXT:      ascend.set_flag MTE3 -> MTE2, 0
// CHECK-NOT:     ascend.v

// CHECK-LABEL: ascend.kernel @concat_0
// CHECK-SAME:    (%[[P0:.*]]: memref<256x8xf32, #ascend<space gm>>, %[[P1:.*]]: memref<256x16xf32, #ascend<space gm>>, %[[Y:.*]]: memref<256x24xf32, #ascend<space gm>>)
// CHECK:         scf.for
// CHECK:           memref.subview %[[Y]][%{{.*}}, 0] [{{[0-9]+}}, 8] [1, 1]
// CHECK:         scf.for
// CHECK:           memref.subview %[[Y]][%{{.*}}, 8] [{{[0-9]+}}, 16] [1, 1]

// CHECK-LABEL: ascend.kernel @gather_0
// CHECK-SAME:    (%[[T:.*]]: memref<50x24xf16, #ascend<space gm>>, %[[I:.*]]: memref<14x1xi64, #ascend<space gm>>, %{{.*}}: memref<14x24xf16, #ascend<space gm>>)
// CHECK:         ascend.copy %[[I]], %[[IUB:.*]] : memref<14x1xi64, #ascend<space gm>>, memref<14x1xi64, #ascend<space ub>>
// CHECK-NEXT:    ascend.gather_rows %[[T]], %[[IUB]], %{{.*}} : memref<50x24xf16, #ascend<space gm>>, memref<14x1xi64, #ascend<space ub>>, memref<14x24xf16, #ascend<space ub>>

// CHECK-LABEL: func.func @main
// CHECK:         ascend.launch @transpose_0
// CHECK:         ascend.launch @slice_0
// CHECK:         %[[V0:.*]] = ascend.view %{{.*}} : memref<2x4x32x8xf32, #ascend<space gm>> to memref<256x8xf32, #ascend<space gm>>
// CHECK:         ascend.launch @concat_0(%[[V0]],
// CHECK:         %[[IDX:.*]] = ascend.view %{{.*}} : memref<2x7xi64, #ascend<space gm>> to memref<14x1xi64, #ascend<space gm>>
// CHECK:         ascend.launch @gather_0(%{{.*}}, %[[IDX]], %[[G:.*]])
// CHECK:         %[[GV:.*]] = ascend.view %[[G]] : memref<14x24xf16, #ascend<space gm>> to memref<2x7x24xf16, #ascend<space gm>>
// CHECK:         func.return %{{.*}}, %{{.*}}, %{{.*}}, %[[GV]]
func.func @main(%x: tensor<2x32x4x16xf32> {onnx.name = "x"}, %t: tensor<50x24xf16> {onnx.name = "t"}, %i: tensor<2x7xi64> {onnx.name = "i"}) -> (tensor<2x4x32x16xf32> {onnx.name = "y"}, tensor<2x4x32x8xf32> {onnx.name = "s"}, tensor<2x4x32x24xf32> {onnx.name = "c"}, tensor<2x7x24xf16> {onnx.name = "g"}) {
  %y = nn.transpose %x {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x32x4x16xf32>) -> tensor<2x4x32x16xf32>
  %s = nn.slice %y {starts = array<i64: 0, 0, 0, 8>, steps = array<i64: 1, 1, 1, 1>} : (tensor<2x4x32x16xf32>) -> tensor<2x4x32x8xf32>
  %c = nn.concat %s, %y {axis = 3 : i64} : (tensor<2x4x32x8xf32>, tensor<2x4x32x16xf32>) -> tensor<2x4x32x24xf32>
  %g = nn.gather %t, %i {axis = 0 : i64} : (tensor<50x24xf16>, tensor<2x7xi64>) -> tensor<2x7x24xf16>
  func.return %y, %s, %c, %g : tensor<2x4x32x16xf32>, tensor<2x4x32x8xf32>, tensor<2x4x32x24xf32>, tensor<2x7x24xf16>
}
