// RUN: ascendir-opt %s -p convert-nn-to-ascend | filecheck %s

// An nn.constant left in the module (ascendir-opt has no WeightStore to move it into, as the
// driver's constants_to_weights does) becomes an ascend.weight carrying its value. This used to
// be an error, so the README's `ascendir-opt in.mlir -p '...,convert-nn-to-ascend'` failed on
// every imported model (their nn IR keeps small constants: scalars, masks).
// CHECK: func.func @main
// CHECK: %[[C:.*]] = ascend.weight @inline_const_0 {value = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00]> : tensor<4xf32>} : memref<4xf32, #ascend<space gm>>
// CHECK: ascend.launch @add_0
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c = nn.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %y = nn.add %x, %c : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}
