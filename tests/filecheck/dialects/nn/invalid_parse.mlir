// RUN: ascendir-opt %s --split-input-file --parsing-diagnostics | filecheck %s

// Parse errors of the nn dialect: nn.constant's literal, an unknown #nn.fused_kind.

// CHECK: nn.constant expects a dense<...> : tensor<...> literal
func.func @main() {
  %c = nn.constant 1.0 : f32
  func.return
}

// -----

// CHECK: Expected `matmul_epilogue`, `ffn`, `flash_attention`, `norm_matmul`, `conv_activation`, `elementwise`, or `add_rms_norm`.
func.func @main(%x: tensor<2x8xf32>) {
  %r = nn.fused(%x) {kind = #nn.fused_kind<mlp>} : (tensor<2x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>):
    nn.yield %a : tensor<2x8xf32>
  }
  func.return
}
