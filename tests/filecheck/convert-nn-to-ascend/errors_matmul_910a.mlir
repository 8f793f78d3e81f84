// RUN: not ascendir-opt %s -p 'convert-nn-to-ascend{target=ascend910a}' 2>&1 | filecheck %s

// The first-generation 910 (dav-c100) has no fp32 mmad: a clear error names the op.
// CHECK: ascendir-opt: error: nn.matmul #0: ascend910a (dav-c100) has no f32 mmad (only f16/int8 on its cube, S1); cast the model to float16
func.func @main(%a: tensor<16x16xf32>, %b: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %y = nn.matmul %a, %b : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
  func.return %y : tensor<16x16xf32>
}
