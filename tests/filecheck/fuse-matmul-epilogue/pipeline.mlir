// RUN: ascendir-opt %s -p 'O2,convert-nn-to-ascend' | filecheck %s
// RUN: ascendir-opt %s -p 'O0,convert-nn-to-ascend' | filecheck %s --check-prefix=UNFUSED

// Gemm + ReLU (an MLP layer): fused, one cube kernel with the bias in BT and ReLU in FixPipe;
// unfused, three kernels with two GM round trips.
// CHECK:     ascend.kernel @matmul_epilogue_0
// CHECK:       ascend.mmad {{.*}} bias(
// CHECK:       ascend.copy {{.*}} {layout = #ascend.layout<nz2nd>, relu = true}
// CHECK-NOT: ascend.kernel
// CHECK:     func.func @main
// CHECK-NEXT:  ascend.weight @w1
// CHECK-NEXT:  ascend.weight @b1
// CHECK:       ascend.launch @matmul_epilogue_0
// CHECK-NOT:   ascend.launch

// UNFUSED:     ascend.launch @matmul_0
// UNFUSED-NEXT: ascend.alloc
// UNFUSED-NEXT: ascend.view
// UNFUSED-NEXT: ascend.launch @add_0
// UNFUSED-NEXT: ascend.alloc
// UNFUSED-NEXT: ascend.view
// UNFUSED-NEXT: ascend.view
// UNFUSED-NEXT: ascend.launch @relu_0
func.func @main(%x: tensor<16x784xf32> {onnx.name = "input"}) -> (tensor<16x128xf32> {onnx.name = "out"}) {
  %w = nn.weight @w1 : tensor<784x128xf32>
  %b = nn.weight @b1 : tensor<128xf32>
  %m = nn.matmul %x, %w : (tensor<16x784xf32>, tensor<784x128xf32>) -> tensor<16x128xf32>
  %y = nn.add %m, %b : (tensor<16x128xf32>, tensor<128xf32>) -> tensor<16x128xf32>
  %z = nn.relu %y : (tensor<16x128xf32>) -> tensor<16x128xf32>
  func.return %z : tensor<16x128xf32>
}
