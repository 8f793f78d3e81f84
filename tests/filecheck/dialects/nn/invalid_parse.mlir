// RUN: ascendir-opt %s --split-input-file --parsing-diagnostics | filecheck %s

// Parse errors of the nn dialect: nn.constant's literal, unknown or quoted enum values.

// CHECK: nn.constant expects a dense<...> : tensor<...> literal
func.func @main() {
  %c = nn.constant 1.0 : f32
  func.return
}

// -----

// CHECK: unknown #nn.fused_kind mlp (expected one of matmul_epilogue, ffn, flash_attention, norm_matmul, conv_activation, elementwise, add_rms_norm, moe_gating, moe_finalize_routing, matmul_all_reduce, matmul_reduce_scatter, all_gather_matmul, moe_experts)
func.func @main(%x: tensor<2x8xf32>) {
  %r = nn.fused(%x) {kind = #nn.fused_kind<mlp>} : (tensor<2x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>):
    nn.yield %a : tensor<2x8xf32>
  }
  func.return
}

// -----

// An enum value has one spelling, the printer's (dialects/enum_attr.py): a quoted one is an error.
// CHECK: #nn.fused_kind ffn is written bare, not as a string "ffn"
func.func @main(%x: tensor<2x8xf32>) {
  %r = nn.fused(%x) {kind = #nn.fused_kind<"ffn">} : (tensor<2x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>):
    nn.yield %a : tensor<2x8xf32>
  }
  func.return
}

// -----

// CHECK: unknown #nn.pool_kind min (expected one of max, avg)
func.func @main(%x: tensor<1x4x8x8xf32>) {
  %r = nn.pool2d %x {kind = #nn.pool_kind<min>, kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, count_include_pad = false} : (tensor<1x4x8x8xf32>) -> tensor<1x4x4x4xf32>
  func.return
}

// -----

// CHECK: #nn.pool_kind max is written bare, not as a string "max"
func.func @main(%x: tensor<1x4x8x8xf32>) {
  %r = nn.pool2d %x {kind = #nn.pool_kind<"max">, kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, count_include_pad = false} : (tensor<1x4x8x8xf32>) -> tensor<1x4x4x4xf32>
  func.return
}

// -----

// CHECK: unknown #nn.gelu_approximate fast (expected one of none, tanh)
func.func @main(%x: tensor<2x8xf32>) {
  %r = nn.gelu %x {approximate = #nn.gelu_approximate<fast>} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  func.return
}

// -----

// CHECK: unknown #ascend.round_mode even (expected one of up, down, nearest)
func.func @main(%x: tensor<2x8xf32>) {
  %r = nn.cast %x {round_mode = #ascend.round_mode<even>} : (tensor<2x8xf32>) -> tensor<2x8xf8E8M0FNU>
  func.return
}

// -----

// CHECK: dense literal of tensor<4611686018427387904xf32> has 4611686018427387904 elements, over the 67108864 a literal may have
func.func @main() {
  %c = nn.constant dense<1.0> : tensor<4611686018427387904xf32>
  func.return
}
