// RUN: ascendir-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Every verifier error of nn.weight_quant_matmul (quant.py).

// CHECK: nn.weight_quant_matmul: x [2, 64] and w [32, 48] are not [..., K] x [K, N]
func.func @main(%x: tensor<2x64xf16>, %w: tensor<32x48xi8>, %s: tensor<1x48xf16>) {
  %y = nn.weight_quant_matmul %x, %w, %s {group_size = 32 : i64} : (tensor<2x64xf16>, tensor<32x48xi8>, tensor<1x48xf16>) -> tensor<2x48xf16>
  func.return
}

// -----

// CHECK: nn.weight_quant_matmul: the weight must be i8 or i4, got f16
func.func @main(%x: tensor<2x64xf16>, %w: tensor<64x48xf16>, %s: tensor<1x48xf16>) {
  %y = nn.weight_quant_matmul %x, %w, %s {group_size = 64 : i64} : (tensor<2x64xf16>, tensor<64x48xf16>, tensor<1x48xf16>) -> tensor<2x48xf16>
  func.return
}

// -----

// CHECK: nn.weight_quant_matmul: group_size 0 must be positive
func.func @main(%x: tensor<2x64xf16>, %w: tensor<64x48xi8>, %s: tensor<1x48xf16>) {
  %y = nn.weight_quant_matmul %x, %w, %s {group_size = 0 : i64} : (tensor<2x64xf16>, tensor<64x48xi8>, tensor<1x48xf16>) -> tensor<2x48xf16>
  func.return
}

// -----

// CHECK: nn.weight_quant_matmul: scale must be [2, 48] of f16, got tensor<1x48xf16>
func.func @main(%x: tensor<2x64xf16>, %w: tensor<64x48xi8>, %s: tensor<1x48xf16>) {
  %y = nn.weight_quant_matmul %x, %w, %s {group_size = 32 : i64} : (tensor<2x64xf16>, tensor<64x48xi8>, tensor<1x48xf16>) -> tensor<2x48xf16>
  func.return
}

// -----

// CHECK: nn.weight_quant_matmul: offset must be [1, 48] of f16, got tensor<1x48xf32>
func.func @main(%x: tensor<2x64xf16>, %w: tensor<64x48xi8>, %s: tensor<1x48xf16>, %o: tensor<1x48xf32>) {
  %y = nn.weight_quant_matmul %x, %w, %s, %o {group_size = 64 : i64} : (tensor<2x64xf16>, tensor<64x48xi8>, tensor<1x48xf16>, tensor<1x48xf32>) -> tensor<2x48xf16>
  func.return
}

// -----

// CHECK: nn.weight_quant_matmul: the result is [..., N] of x's type
func.func @main(%x: tensor<2x64xf16>, %w: tensor<64x48xi8>, %s: tensor<1x48xf16>) {
  %y = nn.weight_quant_matmul %x, %w, %s {group_size = 64 : i64} : (tensor<2x64xf16>, tensor<64x48xi8>, tensor<1x48xf16>) -> tensor<2x48xf32>
  func.return
}

// -----

// CHECK: nn.weight_quant_matmul: zero-size operands are not supported
func.func @main(%x: tensor<0x64xf16>, %w: tensor<64x48xi8>, %s: tensor<1x48xf16>) {
  %y = nn.weight_quant_matmul %x, %w, %s {group_size = 64 : i64} : (tensor<0x64xf16>, tensor<64x48xi8>, tensor<1x48xf16>) -> tensor<0x48xf16>
  func.return
}
