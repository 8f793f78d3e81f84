// RUN: ascendir-opt %s -p convert-nn-to-ascend | ascendir-opt | filecheck %s

// Elementwise kernels on the AIVs. Shapes are canonicalized by free views: [2,3,40] + [40]
// becomes [6,40] + [1,40]; a broadcast operand loads only its real extent and the vector op
// broadcasts it. Large rows are split into 32-B aligned column tiles over 48 AIVs, the last
// one partial (arith.minsi boundary size; the UB tile stays full size).

// CHECK-LABEL: ascend.kernel @add_0
// CHECK-SAME:    (%[[X:.*]]: memref<6x40xf16, #ascend<space gm>>, %[[B:.*]]: memref<1x40xf16, #ascend<space gm>>, %[[Y:.*]]: memref<6x40xf16, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>}
// CHECK-DAG:     %[[UX:.*]] = ascend.alloc : memref<6x40xf16, #ascend<space ub>>
// CHECK-DAG:     %[[UB:.*]] = ascend.alloc : memref<1x40xf16, #ascend<space ub>>
// CHECK-DAG:     %[[UY:.*]] = ascend.alloc : memref<6x40xf16, #ascend<space ub>>
// CHECK:         ascend.set_flag V -> MTE2, 0
// CHECK-NEXT:    ascend.set_flag MTE3 -> V, 0
// CHECK-NEXT:    scf.for
// CHECK-NEXT:      ascend.wait_flag V -> MTE2, 0
// CHECK-NEXT:      ascend.copy %[[X]], %[[UX]]
// CHECK-NEXT:      ascend.copy %[[B]], %[[UB]]
// CHECK-NEXT:      ascend.set_flag MTE2 -> V, 0
// CHECK-NEXT:      ascend.wait_flag MTE2 -> V, 0
// CHECK-NEXT:      ascend.wait_flag MTE3 -> V, 0
// CHECK-NEXT:      ascend.vadd %[[UX]], %[[UB]], %[[UY]] : memref<6x40xf16, #ascend<space ub>>, memref<1x40xf16, #ascend<space ub>>, memref<6x40xf16, #ascend<space ub>>
// CHECK-NEXT:      ascend.set_flag V -> MTE2, 0
// CHECK-NEXT:      ascend.set_flag V -> MTE3, 0
// CHECK-NEXT:      ascend.wait_flag V -> MTE3, 0
// CHECK-NEXT:      ascend.copy %[[UY]], %[[Y]]
// CHECK-NEXT:      ascend.set_flag MTE3 -> V, 0
// CHECK-NEXT:    }
// CHECK-NEXT:    ascend.wait_flag MTE3 -> V, 0
// CHECK-NEXT:    ascend.wait_flag V -> MTE2, 0
// CHECK-NEXT:    ascend.return

// CHECK-LABEL: ascend.kernel @gelu_0
// CHECK:         ascend.vgelu_tanh %{{.*}}, %{{.*}} : memref<1x240xf16, #ascend<space ub>>, memref<1x240xf16, #ascend<space ub>>

// CHECK-LABEL: ascend.kernel @where_0
// CHECK:         ascend.vsel %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : memref<1x1x40xi1, #ascend<space ub>>, memref<1x3x40xf16, #ascend<space ub>>, memref<1x3x40xf16, #ascend<space ub>>, memref<1x3x40xf16, #ascend<space ub>>

// CHECK-LABEL: ascend.kernel @mul_0
// CHECK-SAME:    block_dim = 48 : i64
// CHECK:         ascend.alloc : memref<1x{{[0-9]+}}xf32, #ascend<space ub>>
// CHECK:         %[[N:.*]] = arith.minsi
// CHECK:         memref.subview %{{.*}}[%{{.*}}, %{{.*}}] [1, %[[N]]] [1, 1] : memref<8x20001xf32, #ascend<space gm>> to memref<1x?xf32,
// CHECK:         memref.subview %{{.*}}[0, %{{.*}}] [1, %[[N]]] [1, 1] : memref<1x20001xf32, #ascend<space gm>> to memref<1x?xf32,

// Leaky ReLU with 0 <= alpha <= 1 is max(x, alpha * x).
// CHECK-LABEL: ascend.kernel @leaky_relu_0
// CHECK:         ascend.vmuls %[[LX:.*]], %[[LT:.*]] {scalar = 0.10000000149011612 : f64}
// CHECK-NEXT:    ascend.vmax %[[LX]], %[[LT]], %{{.*}}

// CHECK-LABEL: func.func @main
// CHECK:         %[[AV:.*]] = ascend.view %{{.*}} : memref<2x3x40xf16, #ascend<space gm>> to memref<6x40xf16, #ascend<space gm>>
// CHECK-NEXT:    %[[BV:.*]] = ascend.view %{{.*}} : memref<40xf16, #ascend<space gm>> to memref<1x40xf16, #ascend<space gm>>
// CHECK:         ascend.launch @add_0(%[[AV]], %[[BV]],
func.func @main(%a: tensor<2x3x40xf16> {onnx.name = "a"}, %b: tensor<40xf16> {onnx.name = "b"}, %m: tensor<2x1x40xi1> {onnx.name = "m"}, %l: tensor<8x20001xf32> {onnx.name = "l"}, %r: tensor<20001xf32> {onnx.name = "r"}) -> (tensor<2x3x40xf16> {onnx.name = "y"}, tensor<8x20001xf32> {onnx.name = "z"}) {
  %s = nn.add %a, %b : (tensor<2x3x40xf16>, tensor<40xf16>) -> tensor<2x3x40xf16>
  %g = nn.gelu %s {approximate = #nn.gelu_approximate<tanh>} : (tensor<2x3x40xf16>) -> tensor<2x3x40xf16>
  %y = nn.where %m, %g, %a : (tensor<2x1x40xi1>, tensor<2x3x40xf16>, tensor<2x3x40xf16>) -> tensor<2x3x40xf16>
  %p = nn.mul %l, %r : (tensor<8x20001xf32>, tensor<20001xf32>) -> tensor<8x20001xf32>
  %z = nn.leaky_relu %p {alpha = 0.1 : f32} : (tensor<8x20001xf32>) -> tensor<8x20001xf32>
  func.return %y, %z : tensor<2x3x40xf16>, tensor<8x20001xf32>
}
