// RUN: not ascendir-opt %s -p convert-nn-to-ascend 2>&1 | filecheck %s

// Errors are one line naming the op. nn.constant must have been moved into the WeightStore
// (ascendir.lowering.constants_to_weights) before lowering.
// CHECK: ascendir-opt: error: nn.constant #0: nn.constant must be moved into the WeightStore before lowering (ascendir.lowering.constants_to_weights)
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c = nn.constant dense<1.0> : tensor<4xf32>
  %y = nn.add %x, %c : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}
