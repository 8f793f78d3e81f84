// RUN: ascendir-opt %s --split-input-file -p fuse-ffn | filecheck %s

// SwiGLU (LLaMA): gate, up, silu * up, down in one region.
// CHECK-LABEL: func.func @swiglu
// CHECK-NEXT:    %[[F:.*]] = nn.fused(%x, %wg, %wu, %wd) {kind = "ffn"}
// CHECK:           nn.matmul
// CHECK-NEXT:      nn.silu
// CHECK-NEXT:      nn.matmul
// CHECK-NEXT:      nn.mul
// CHECK-NEXT:      nn.matmul
// CHECK-NEXT:      nn.yield
// CHECK:         func.return %[[F]]
func.func @swiglu(%x: tensor<1x8x16xf16>, %wg: tensor<16x32xf16>, %wu: tensor<16x32xf16>, %wd: tensor<32x16xf16>) -> tensor<1x8x16xf16> {
  %g = nn.matmul %x, %wg : (tensor<1x8x16xf16>, tensor<16x32xf16>) -> tensor<1x8x32xf16>
  %a = nn.silu %g : (tensor<1x8x32xf16>) -> tensor<1x8x32xf16>
  %u = nn.matmul %x, %wu : (tensor<1x8x16xf16>, tensor<16x32xf16>) -> tensor<1x8x32xf16>
  %m = nn.mul %a, %u : (tensor<1x8x32xf16>, tensor<1x8x32xf16>) -> tensor<1x8x32xf16>
  %y = nn.matmul %m, %wd : (tensor<1x8x32xf16>, tensor<32x16xf16>) -> tensor<1x8x16xf16>
  func.return %y : tensor<1x8x16xf16>
}

// -----

// BERT's MatMul + bias -> GELU -> MatMul + bias.
// CHECK-LABEL: func.func @plain_bias
// CHECK-NEXT:    %[[F:.*]] = nn.fused(%x, %w1, %b1, %w2, %b2) {kind = "ffn"}
// CHECK:           nn.gelu
// CHECK:           %[[Y:.*]] = nn.add %{{.*}}, %{{.*}} : (tensor<16xf32>, tensor<8x16xf32>)
// CHECK-NEXT:      nn.yield %[[Y]]
func.func @plain_bias(%x: tensor<8x16xf32>, %w1: tensor<16x32xf32>, %b1: tensor<32xf32>, %w2: tensor<32x16xf32>, %b2: tensor<16xf32>) -> tensor<8x16xf32> {
  %h = nn.matmul %x, %w1 : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %hb = nn.add %b1, %h : (tensor<32xf32>, tensor<8x32xf32>) -> tensor<8x32xf32>
  %a = nn.gelu %hb : (tensor<8x32xf32>) -> tensor<8x32xf32>
  %y = nn.matmul %a, %w2 : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %yb = nn.add %b2, %y : (tensor<16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  func.return %yb : tensor<8x16xf32>
}

// -----

// Not an FFN: the activation (tanh) is not one the template has; and the intermediate of
// the second block is also returned.
// CHECK-LABEL: func.func @no_match
// CHECK-NOT:     nn.fused
func.func @no_match(%x: tensor<8x16xf32>, %w1: tensor<16x32xf32>, %w2: tensor<32x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x32xf32>) {
  %h = nn.matmul %x, %w1 : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %a = nn.tanh %h : (tensor<8x32xf32>) -> tensor<8x32xf32>
  %y = nn.matmul %a, %w2 : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %h2 = nn.matmul %x, %w1 : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %a2 = nn.relu %h2 : (tensor<8x32xf32>) -> tensor<8x32xf32>
  %y2 = nn.matmul %a2, %w2 : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  func.return %y, %y2, %a2 : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x32xf32>
}
