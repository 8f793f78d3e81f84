// RUN: not ascendir-opt %s -p 'convert-nn-to-ascend{target=ascend910b2}' 2>&1 | filecheck %s

// No Ascend cube has an f64 mmad (S1 intrinsic maps): the template says so at lowering, naming the
// op, instead of emitting an mmad the interpreter rejects at run time.
// CHECK: ascendir-opt: error: nn.matmul #0: ascend910b2 (dav-c220) has no f64 mmad (only f16/bf16/f32/int8 on its cube, S1)
func.func @main(%a: tensor<16x16xf64>, %b: tensor<16x16xf64>) -> tensor<16x16xf64> {
  %y = nn.matmul %a, %b : (tensor<16x16xf64>, tensor<16x16xf64>) -> tensor<16x16xf64>
  func.return %y : tensor<16x16xf64>
}
