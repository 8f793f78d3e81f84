// RUN: ascendir-opt %s -p convert-nn-to-ascend | ascendir-opt | filecheck %s

// Row-wise vector kernels on f16 rows of 96: softmax and layer_norm compute in f32 (vcast in and
// out), whole rows in UB; the layer_norm scale/bias rows are loaded once before the tile loop;
// reduce_mean over a middle axis transposes [1, 33, I] tiles in UB to rows.

// CHECK-LABEL: ascend.kernel @softmax_0
// CHECK-SAME:    (%{{.*}}: memref<132x96xf16, #ascend<space gm>>, %{{.*}}: memref<132x96xf16, #ascend<space gm>>) attributes {block_dim = {{[0-9]+}} : i64, core_type = #ascend.core_type<aiv>}
// CHECK:         ascend.wait_flag MTE2 -> V, 0
// CHECK-NEXT:    ascend.wait_flag MTE3 -> V, 0
// CHECK-NEXT:    ascend.vcast %[[X:.*]], %[[W:.*]] : memref<[[R:[0-9]+]]x96xf16, #ascend<space ub>>, memref<[[R]]x96xf32, #ascend<space ub>>
// CHECK-NEXT:    ascend.vreduce_max %[[W]], %[[MX:.*]] : memref<[[R]]x96xf32, #ascend<space ub>>, memref<[[R]]x1xf32, #ascend<space ub>>
// CHECK-NEXT:    ascend.vsub %[[W]], %[[MX]], %[[W]]
// CHECK-NEXT:    ascend.vexp %[[W]], %[[W]]
// CHECK-NEXT:    ascend.vreduce_sum %[[W]], %[[S:.*]] :
// CHECK-NEXT:    ascend.vdiv %[[W]], %[[S]], %[[W]]
// CHECK-NEXT:    ascend.vcast %[[W]], %{{.*}} : memref<[[R]]x96xf32, #ascend<space ub>>, memref<[[R]]x96xf16, #ascend<space ub>>
// CHECK-NEXT:    ascend.set_flag V -> MTE2, 0
// CHECK-NEXT:    ascend.set_flag V -> MTE3, 0

// CHECK-LABEL: ascend.kernel @layer_norm_0
// CHECK:         %[[BID:.*]] = ascend.block_idx
// CHECK-NEXT:    ascend.copy %{{.*}}, %[[SC:.*]] : memref<1x96xf16, #ascend<space gm>>, memref<1x96xf16, #ascend<space ub>>
// CHECK-NEXT:    ascend.copy %{{.*}}, %[[BI:.*]] : memref<1x96xf16, #ascend<space gm>>, memref<1x96xf16, #ascend<space ub>>
// CHECK-NEXT:    ascend.set_flag MTE2 -> V, 0
// CHECK-NEXT:    ascend.wait_flag MTE2 -> V, 0
// CHECK-NEXT:    ascend.vcast %[[SC]], %[[SC32:.*]] :
// CHECK-NEXT:    ascend.vcast %[[BI]], %[[BI32:.*]] :
// CHECK:         scf.for
// CHECK:           ascend.vreduce_sum
// CHECK:           ascend.vrsqrt
// CHECK:           ascend.vmul %{{.*}}, %[[SC32]], %{{.*}}
// CHECK-NEXT:      ascend.vadd %{{.*}}, %[[BI32]], %{{.*}}

// CHECK-LABEL: ascend.kernel @reduce_mean_0
// CHECK-SAME:    (%{{.*}}: memref<4x33x96xf32, #ascend<space gm>>, %{{.*}}: memref<4x1x96xf32, #ascend<space gm>>)
// CHECK:         ascend.vtranspose %{{.*}}, %[[T:.*]] {perm = [0 : i64, 2 : i64, 1 : i64]} : memref<1x33x[[I:[0-9]+]]xf32, #ascend<space ub>>, memref<1x[[I]]x33xf32, #ascend<space ub>>
// CHECK-NEXT:    ascend.vreduce_sum %[[T]], %[[R:.*]] : memref<1x[[I]]x33xf32, #ascend<space ub>>, memref<1x[[I]]x1xf32, #ascend<space ub>>
// CHECK-NEXT:    ascend.vmuls %[[R]], %[[R]] {scalar = 0.030303030303030304 : f64}
// CHECK-NEXT:    ascend.vtranspose %[[R]], %{{.*}} {perm = [0 : i64, 2 : i64, 1 : i64]} : memref<1x[[I]]x1xf32, #ascend<space ub>>, memref<1x1x[[I]]xf32, #ascend<space ub>>

// CHECK-LABEL: func.func @main
// CHECK:         ascend.launch @softmax_0
// CHECK:         ascend.launch @layer_norm_0
// CHECK:         ascend.launch @cast_0
// CHECK:         ascend.launch @reduce_mean_0
func.func @main(%x: tensor<4x33x96xf16> {onnx.name = "x"}, %s: tensor<96xf16> {onnx.name = "s"}, %b: tensor<96xf16> {onnx.name = "b"}) -> (tensor<4x33x96xf16> {onnx.name = "y"}, tensor<4x1x96xf32> {onnx.name = "r"}) {
  %y = nn.softmax %x {axis = -1 : i64} : (tensor<4x33x96xf16>) -> tensor<4x33x96xf16>
  %n = nn.layer_norm %y, %s, %b {axis = 2 : i64, epsilon = 1.0e-05 : f32} : (tensor<4x33x96xf16>, tensor<96xf16>, tensor<96xf16>) -> tensor<4x33x96xf16>
  %c = nn.cast %n : (tensor<4x33x96xf16>) -> tensor<4x33x96xf32>
  %r = nn.reduce_mean %c {axes = array<i64: 1>, keepdims = true} : (tensor<4x33x96xf32>) -> tensor<4x1x96xf32>
  func.return %n, %r : tensor<4x33x96xf16>, tensor<4x1x96xf32>
}
