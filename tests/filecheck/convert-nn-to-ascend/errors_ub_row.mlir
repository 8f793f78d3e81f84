// RUN: not ascendir-opt %s -p convert-nn-to-ascend 2>&1 | filecheck %s

// A softmax row must fit UB whole (chunked rows are a later improvement): the error names the
// op and the bytes needed vs available.
// CHECK: ascendir-opt: error: nn.softmax #0: one row of 100000 elements needs {{[0-9]+}} bytes of UB, ascend910b2 has 196608 (chunked rows are not implemented yet)
func.func @main(%x: tensor<2x100000xf32>) -> tensor<2x100000xf32> {
  %y = nn.softmax %x {axis = 1 : i64} : (tensor<2x100000xf32>) -> tensor<2x100000xf32>
  func.return %y : tensor<2x100000xf32>
}
