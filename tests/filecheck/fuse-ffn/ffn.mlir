// RUN: ascendir-opt %s --split-input-file -p fuse-ffn | filecheck %s

// SwiGLU (LLaMA): gate, up, silu * up, down in one region.
// CHECK-LABEL: func.func @swiglu
// CHECK-NEXT:    %[[F:.*]] = nn.fused(%x, %wg, %wu, %wd) {kind = #nn.fused_kind<ffn>}
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
// CHECK-NEXT:    %[[F:.*]] = nn.fused(%x, %w1, %b1, %w2, %b2) {kind = #nn.fused_kind<ffn>}
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

// -----

// GPT-2's Conv1D export: Gemm (bias first, as a [1, N] row) with Reshapes that only regroup rows
// between the projections and the GELU; the reshapes go into the region.
// CHECK-LABEL: func.func @gpt2_mlp
// CHECK:         %[[X2:.*]] = nn.reshape %x
// CHECK-NEXT:    %[[F:.*]] = nn.fused(%[[X2]], %w1, %b1, %w2, %b2) {kind = #nn.fused_kind<ffn>}
// CHECK:           nn.matmul
// CHECK-NEXT:      nn.add
// CHECK-NEXT:      nn.reshape
// CHECK-NEXT:      nn.gelu
// CHECK-NEXT:      nn.reshape
// CHECK-NEXT:      nn.matmul
// CHECK-NEXT:      nn.add
// CHECK-NEXT:      nn.yield
// CHECK:         nn.reshape %[[F]]
func.func @gpt2_mlp(%x: tensor<1x8x16xf32>, %w1: tensor<16x32xf32>, %b1: tensor<1x32xf32>, %w2: tensor<32x16xf32>, %b2: tensor<16xf32>) -> tensor<1x8x16xf32> {
  %x2 = nn.reshape %x : (tensor<1x8x16xf32>) -> tensor<8x16xf32>
  %h = nn.matmul %x2, %w1 : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %hb = nn.add %b1, %h : (tensor<1x32xf32>, tensor<8x32xf32>) -> tensor<8x32xf32>
  %h3 = nn.reshape %hb : (tensor<8x32xf32>) -> tensor<1x8x32xf32>
  %a = nn.gelu %h3 {approximate = #nn.gelu_approximate<tanh>} : (tensor<1x8x32xf32>) -> tensor<1x8x32xf32>
  %a2 = nn.reshape %a : (tensor<1x8x32xf32>) -> tensor<8x32xf32>
  %y = nn.matmul %a2, %w2 : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %yb = nn.add %y, %b2 : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %y3 = nn.reshape %yb : (tensor<8x16xf32>) -> tensor<1x8x16xf32>
  func.return %y3 : tensor<1x8x16xf32>
}

// -----

// NOT an FFN: the reshaped GELU output is also returned (the intermediate must reach GM), and
// a reshape that changes the last dim is not a row regrouping.
// CHECK-LABEL: func.func @gpt2_no_match
// CHECK-NOT:     nn.fused
func.func @gpt2_no_match(%x: tensor<8x16xf32>, %w1: tensor<16x32xf32>, %w2: tensor<32x16xf32>, %w3: tensor<64x16xf32>) -> (tensor<8x16xf32>, tensor<1x8x32xf32>, tensor<4x16xf32>) {
  %h = nn.matmul %x, %w1 : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %h3 = nn.reshape %h : (tensor<8x32xf32>) -> tensor<1x8x32xf32>
  %a = nn.gelu %h3 : (tensor<1x8x32xf32>) -> tensor<1x8x32xf32>
  %a2 = nn.reshape %a : (tensor<1x8x32xf32>) -> tensor<8x32xf32>
  %y = nn.matmul %a2, %w2 : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %g = nn.matmul %x, %w1 : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %r = nn.relu %g : (tensor<8x32xf32>) -> tensor<8x32xf32>
  %r2 = nn.reshape %r : (tensor<8x32xf32>) -> tensor<4x64xf32>
  %z = nn.matmul %r2, %w3 : (tensor<4x64xf32>, tensor<64x16xf32>) -> tensor<4x16xf32>
  func.return %y, %h3, %z : tensor<8x16xf32>, tensor<1x8x32xf32>, tensor<4x16xf32>
}

// -----

// Mixtral's experts (HF batched-expert export): the routed tokens' gathered gate_up weights,
// gate and up sliced from one product, SiLU(gate) * up, the gathered down projection. The ffn
// template declines this form, so the pass gives act * up its elementwise region here (lowering
// then only reads regions).
// CHECK-LABEL: func.func @mixtral_experts
// CHECK:         nn.fused(%wgu, %xc, %wd) {kind = #nn.fused_kind<ffn>}
// CHECK:           nn.matmul
// CHECK-NEXT:      nn.reshape
// CHECK-NEXT:      nn.slice
// CHECK-NEXT:      nn.slice
// CHECK-NEXT:      nn.fused({{.*}}) {kind = #nn.fused_kind<elementwise>}
// CHECK-NEXT:      ^bb0
// CHECK-NEXT:        nn.silu
// CHECK-NEXT:        nn.mul
// CHECK-NEXT:        nn.yield
// CHECK-NEXT:      }
// CHECK-NEXT:      nn.reshape
// CHECK-NEXT:      nn.matmul
// CHECK-NEXT:      nn.yield
func.func @mixtral_experts(%wgu: tensor<4x64x16xf32>, %xc: tensor<4x16x1xf32>, %wd: tensor<4x16x32xf32>) -> tensor<4x16x1xf32> {
  %p = nn.matmul %wgu, %xc : (tensor<4x64x16xf32>, tensor<4x16x1xf32>) -> tensor<4x64x1xf32>
  %s = nn.reshape %p : (tensor<4x64x1xf32>) -> tensor<4x64xf32>
  %g = nn.slice %s {starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : (tensor<4x64xf32>) -> tensor<4x32xf32>
  %u = nn.slice %s {starts = array<i64: 0, 32>, steps = array<i64: 1, 1>} : (tensor<4x64xf32>) -> tensor<4x32xf32>
  %a = nn.silu %g : (tensor<4x32xf32>) -> tensor<4x32xf32>
  %m = nn.mul %a, %u : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
  %mc = nn.reshape %m : (tensor<4x32xf32>) -> tensor<4x32x1xf32>
  %y = nn.matmul %wd, %mc : (tensor<4x16x32xf32>, tensor<4x32x1xf32>) -> tensor<4x16x1xf32>
  func.return %y : tensor<4x16x1xf32>
}

// -----

// NOT an expert block: the gate/up product is also read elsewhere; and ReLU is not a gate
// activation of the template.
// CHECK-LABEL: func.func @mixtral_no_match
// CHECK-NOT:     nn.fused
func.func @mixtral_no_match(%wgu: tensor<4x64x16xf32>, %xc: tensor<4x16x1xf32>, %wd: tensor<4x16x32xf32>) -> (tensor<4x16x1xf32>, tensor<4x64xf32>, tensor<4x16x1xf32>) {
  %p = nn.matmul %wgu, %xc : (tensor<4x64x16xf32>, tensor<4x16x1xf32>) -> tensor<4x64x1xf32>
  %s = nn.reshape %p : (tensor<4x64x1xf32>) -> tensor<4x64xf32>
  %g = nn.slice %s {starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : (tensor<4x64xf32>) -> tensor<4x32xf32>
  %u = nn.slice %s {starts = array<i64: 0, 32>, steps = array<i64: 1, 1>} : (tensor<4x64xf32>) -> tensor<4x32xf32>
  %a = nn.silu %g : (tensor<4x32xf32>) -> tensor<4x32xf32>
  %m = nn.mul %a, %u : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
  %mc = nn.reshape %m : (tensor<4x32xf32>) -> tensor<4x32x1xf32>
  %y = nn.matmul %wd, %mc : (tensor<4x16x32xf32>, tensor<4x32x1xf32>) -> tensor<4x16x1xf32>
  %p2 = nn.matmul %wgu, %xc : (tensor<4x64x16xf32>, tensor<4x16x1xf32>) -> tensor<4x64x1xf32>
  %s2 = nn.reshape %p2 : (tensor<4x64x1xf32>) -> tensor<4x64xf32>
  %g2 = nn.slice %s2 {starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : (tensor<4x64xf32>) -> tensor<4x32xf32>
  %u2 = nn.slice %s2 {starts = array<i64: 0, 32>, steps = array<i64: 1, 1>} : (tensor<4x64xf32>) -> tensor<4x32xf32>
  %a2 = nn.relu %g2 : (tensor<4x32xf32>) -> tensor<4x32xf32>
  %m2 = nn.mul %a2, %u2 : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
  %mc2 = nn.reshape %m2 : (tensor<4x32xf32>) -> tensor<4x32x1xf32>
  %y2 = nn.matmul %wd, %mc2 : (tensor<4x16x32xf32>, tensor<4x32x1xf32>) -> tensor<4x16x1xf32>
  func.return %y, %s, %y2 : tensor<4x16x1xf32>, tensor<4x64xf32>, tensor<4x16x1xf32>
}
