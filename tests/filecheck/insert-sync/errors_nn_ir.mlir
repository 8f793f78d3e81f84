// RUN: not ascendir-opt %s -p insert-sync 2>&1 | filecheck %s

// An ascend-level pass on nn IR (nothing lowered: no ascend.kernel) used to leave the module as
// it was and exit 0; it is a one-line error naming the pass and the first nn op.
// CHECK: ascendir-opt: error: insert-sync is an ascend-level pass, but the module is nn IR (nn.matmul, no ascend.kernel): lower it first (-p '...,convert-nn-to-ascend,insert-sync', or ascendir compile)
// CHECK-NOT: func.func
func.func @main(%a: tensor<256x512xf16>, %b: tensor<512x256xf16>) -> tensor<256x256xf16> {
  %y = nn.matmul %a, %b : (tensor<256x512xf16>, tensor<512x256xf16>) -> tensor<256x256xf16>
  func.return %y : tensor<256x256xf16>
}
