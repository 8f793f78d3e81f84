// RUN: ascendir-opt %s | filecheck %s
// RUN: ascendir-opt %s | ascendir-opt | filecheck %s

// Weight-only quantized matmul (quant.py): an int4 weight with per-group scale and offset, and an
// int8 one with one group over all of K and no offset.

// CHECK: %y = nn.weight_quant_matmul %x, %w, %s, %o {group_size = 32 : i64} : (tensor<2x64xf16>, tensor<64x48xi4>, tensor<2x48xf16>, tensor<2x48xf16>) -> tensor<2x48xf16>
// CHECK: %z = nn.weight_quant_matmul %x, %v, %t {group_size = 64 : i64} : (tensor<2x64xf16>, tensor<64x48xi8>, tensor<1x48xf16>) -> tensor<2x48xf16>
func.func @main(%x: tensor<2x64xf16>, %w: tensor<64x48xi4>, %s: tensor<2x48xf16>, %o: tensor<2x48xf16>, %v: tensor<64x48xi8>, %t: tensor<1x48xf16>) -> (tensor<2x48xf16>, tensor<2x48xf16>) {
  %y = nn.weight_quant_matmul %x, %w, %s, %o {group_size = 32 : i64} : (tensor<2x64xf16>, tensor<64x48xi4>, tensor<2x48xf16>, tensor<2x48xf16>) -> tensor<2x48xf16>
  %z = nn.weight_quant_matmul %x, %v, %t {group_size = 64 : i64} : (tensor<2x64xf16>, tensor<64x48xi8>, tensor<1x48xf16>) -> tensor<2x48xf16>
  func.return %y, %z : tensor<2x48xf16>, tensor<2x48xf16>
}
