// RUN: ascendir-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Every verifier error of the nn ops (ops.py, fused.py, cast_mode.py).

// CHECK: nn.relu: dynamic dims are not allowed (tensor<?x8xf32>)
func.func @main(%x: tensor<2x8xf32>) {
  %r = nn.relu %x : (tensor<2x8xf32>) -> tensor<?x8xf32>
  func.return
}

// -----

// CHECK: nn.constant: value type differs from result type
func.func @main() {
  %c = "nn.constant"() <{value = dense<1.0> : tensor<2xf32>}> : () -> tensor<3xf32>
  func.return
}

// -----

// CHECK: nn.exp: result type must equal the operand type
func.func @main(%x: tensor<2x8xf32>) {
  %r = nn.exp %x : (tensor<2x8xf32>) -> tensor<2x8xf16>
  func.return
}

// -----

// CHECK: nn.add: operand element types differ
func.func @main(%x: tensor<2x8xf32>, %y: tensor<2x8xf16>) {
  %r = nn.add %x, %y : (tensor<2x8xf32>, tensor<2x8xf16>) -> tensor<2x8xf32>
  func.return
}

// -----

// CHECK: nn.add: result must be tensor<2x8xf32>
func.func @main(%x: tensor<2x8xf32>) {
  %r = nn.add %x, %x : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<1x8xf32>
  func.return
}

// -----

// CHECK: nn.less: result must be tensor<2x8xi1>
func.func @main(%x: tensor<2x8xf32>) {
  %r = nn.less %x, %x : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  func.return
}

// -----

// CHECK: shapes [[2, 8], [3, 8]] do not broadcast
func.func @main(%x: tensor<2x8xf32>, %y: tensor<3x8xf32>) {
  %r = nn.mul %x, %y : (tensor<2x8xf32>, tensor<3x8xf32>) -> tensor<2x8xf32>
  func.return
}

// -----

// CHECK: nn.where: condition must be i1
func.func @main(%x: tensor<2x8xf32>) {
  %r = nn.where %x, %x, %x : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  func.return
}

// -----

// CHECK: nn.where: result shape must be (2, 8)
func.func @main(%x: tensor<2x8xf32>, %c: tensor<2x8xi1>) {
  %r = nn.where %c, %x, %x : (tensor<2x8xi1>, tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<1x8xf32>
  func.return
}

// -----

// CHECK: nn.cast: shape must not change
func.func @main(%x: tensor<2x8xf32>) {
  %r = nn.cast %x : (tensor<2x8xf32>) -> tensor<8x2xf16>
  func.return
}

// -----

// CHECK: nn.cast: saturate applies to float 8 results only, not f16
func.func @main(%x: tensor<2x8xf32>) {
  %r = nn.cast %x {saturate = false} : (tensor<2x8xf32>) -> tensor<2x8xf16>
  func.return
}

// -----

// CHECK: nn.cast: round_mode applies to f8E8M0FNU results only, not f16
func.func @main(%x: tensor<2x8xf32>) {
  %r = nn.cast %x {round_mode = #ascend.round_mode<down>} : (tensor<2x8xf32>) -> tensor<2x8xf16>
  func.return
}

// -----

// A round mode written as a string (an unknown one in #ascend.round_mode is a parse error:
// invalid_parse.mlir)
// CHECK: "even" should be of base attribute ascend.round_mode
func.func @main(%x: tensor<2x8xf32>) {
  %r = nn.cast %x {round_mode = "even"} : (tensor<2x8xf32>) -> tensor<2x8xf8E8M0FNU>
  func.return
}

// -----

// CHECK: matmul contraction dims differ: [2, 8] x [4, 4]
func.func @main(%x: tensor<2x8xf32>, %w: tensor<4x4xf32>) {
  %r = nn.matmul %x, %w : (tensor<2x8xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  func.return
}

// -----

// CHECK: nn.matmul: result shape does not follow the matmul rule
func.func @main(%x: tensor<2x8xf32>, %w: tensor<8x4xf32>) {
  %r = nn.matmul %x, %w : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x5xf32>
  func.return
}

// -----

// CHECK: nn.matmul: zero-size operands are not supported
func.func @main(%x: tensor<2x0xf32>, %w: tensor<0x4xf32>) {
  %r = nn.matmul %x, %w : (tensor<2x0xf32>, tensor<0x4xf32>) -> tensor<2x4xf32>
  func.return
}

// -----

// CHECK: nn.matmul: i8 x i8 cannot give i16 (only i8 x i8 -> i32 widens)
func.func @main(%x: tensor<2x32xi8>, %w: tensor<32x4xi8>) {
  %r = nn.matmul %x, %w : (tensor<2x32xi8>, tensor<32x4xi8>) -> tensor<2x4xi16>
  func.return
}

// -----

// CHECK: nn.matmul: f16 x f16 cannot give f32 (only i8 x i8 -> i32 widens)
func.func @main(%x: tensor<2x32xf16>, %w: tensor<32x4xf16>) {
  %r = nn.matmul %x, %w : (tensor<2x32xf16>, tensor<32x4xf16>) -> tensor<2x4xf32>
  func.return
}

// -----

// CHECK: nn.softmax: axis 2 out of range for rank 2
func.func @main(%x: tensor<2x8xf32>) {
  %r = nn.softmax %x {axis = 2 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  func.return
}

// -----

// CHECK: nn.layer_norm: the statistics results must be none or two of tensor<2x1xf32>
func.func @main(%x: tensor<2x8xf32>) {
  %r, %m = nn.layer_norm %x, %x {axis = 1 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x8xf32>, tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x1xf32>)
  func.return
}

// -----

// CHECK: nn.reduce_sum: axes [1, 0] must be sorted, unique, in [0, 2)
func.func @main(%x: tensor<2x8xf32>) {
  %r = nn.reduce_sum %x {axes = array<i64: 1, 0>, keepdims = true} : (tensor<2x8xf32>) -> tensor<1x1xf32>
  func.return
}

// -----

// CHECK: nn.topk: k=9 / axis=1 out of range for shape [2, 8]
func.func @main(%x: tensor<2x8xf32>) {
  %v, %i = nn.topk %x {k = 9 : i64, axis = 1 : i64, largest = true} : (tensor<2x8xf32>) -> (tensor<2x9xf32>, tensor<2x9xi64>)
  func.return
}

// -----

// CHECK: nn.topk: results must have shape [2, 3]
func.func @main(%x: tensor<2x8xf32>) {
  %v, %i = nn.topk %x {k = 3 : i64, axis = 1 : i64, largest = true} : (tensor<2x8xf32>) -> (tensor<2x4xf32>, tensor<2x4xi64>)
  func.return
}

// -----

// CHECK: nn.topk: values keep the input element type, indices are i64
func.func @main(%x: tensor<2x8xf32>) {
  %v, %i = nn.topk %x {k = 3 : i64, axis = 1 : i64, largest = true} : (tensor<2x8xf32>) -> (tensor<2x3xf32>, tensor<2x3xi32>)
  func.return
}

// -----

// CHECK: nn.conv2d: expects 2 strides, 4 pads, 2 dilations and a 2-D kernel
func.func @main(%x: tensor<1x4x8x8xf32>, %w: tensor<4x4x3x3xf32>) {
  %r = nn.conv2d %x, %w {strides = array<i64: 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x4x8x8xf32>, tensor<4x4x3x3xf32>) -> tensor<1x4x6x6xf32>
  func.return
}

// -----

// CHECK: nn.conv2d: strides and dilations must be ≥ 1, pads ≥ 0
func.func @main(%x: tensor<1x4x8x8xf32>, %w: tensor<4x4x3x3xf32>) {
  %r = nn.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: -1, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x4x8x8xf32>, tensor<4x4x3x3xf32>) -> tensor<1x4x6x6xf32>
  func.return
}

// -----

// CHECK: nn.pool2d: expects NCHW tensors
func.func @main(%x: tensor<4x8x8xf32>) {
  %r = nn.pool2d %x {kind = #nn.pool_kind<avg>, kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, count_include_pad = false} : (tensor<4x8x8xf32>) -> tensor<4x8x4xf32>
  func.return
}

// -----

// CHECK: nn.conv2d: output dim 2 is 7, expected 6
func.func @main(%x: tensor<1x4x8x8xf32>, %w: tensor<4x4x3x3xf32>) {
  %r = nn.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x4x8x8xf32>, tensor<4x4x3x3xf32>) -> tensor<1x4x7x6xf32>
  func.return
}

// -----

// CHECK: nn.conv2d: weight [4, 3, 3, 3] does not fit input [1, 4, 8, 8] with group 1
func.func @main(%x: tensor<1x4x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  %r = nn.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x4x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  func.return
}

// -----

// CHECK: nn.conv2d: bias must have shape [4]
func.func @main(%x: tensor<1x4x8x8xf32>, %w: tensor<4x4x3x3xf32>, %b: tensor<5xf32>) {
  %r = nn.conv2d %x, %w, %b {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x4x8x8xf32>, tensor<4x4x3x3xf32>, tensor<5xf32>) -> tensor<1x4x6x6xf32>
  func.return
}

// -----

// CHECK: nn.conv2d: result must be [N, O, Ho, Wo]
func.func @main(%x: tensor<1x4x8x8xf32>, %w: tensor<4x4x3x3xf32>) {
  %r = nn.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x4x8x8xf32>, tensor<4x4x3x3xf32>) -> tensor<1x5x6x6xf32>
  func.return
}

// -----

// A pool kind written as a string (an unknown #nn.pool_kind is a parse error: invalid_parse.mlir)
// CHECK: "min" should be of base attribute nn.pool_kind
func.func @main(%x: tensor<1x4x8x8xf32>) {
  %r = nn.pool2d %x {kind = "min", kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, count_include_pad = false} : (tensor<1x4x8x8xf32>) -> tensor<1x4x4x4xf32>
  func.return
}

// -----

// CHECK: nn.pool2d: pooling keeps N and C
func.func @main(%x: tensor<1x4x8x8xf32>) {
  %r = nn.pool2d %x {kind = #nn.pool_kind<avg>, kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, count_include_pad = false} : (tensor<1x4x8x8xf32>) -> tensor<1x2x4x4xf32>
  func.return
}

// -----

// CHECK: nn.pool2d: a max pool has the indices result exactly when it has storage_order
func.func @main(%x: tensor<1x4x8x8xf32>) {
  %r = nn.pool2d %x {kind = #nn.pool_kind<max>, kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, count_include_pad = false, storage_order = 0 : i64} : (tensor<1x4x8x8xf32>) -> tensor<1x4x4x4xf32>
  func.return
}

// -----

// CHECK: nn.pool2d: indices are i64 of the result's shape, storage_order 0 or 1
func.func @main(%x: tensor<1x4x8x8xf32>) {
  %r, %i = nn.pool2d %x {kind = #nn.pool_kind<max>, kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, count_include_pad = false, storage_order = 2 : i64} : (tensor<1x4x8x8xf32>) -> (tensor<1x4x4x4xf32>, tensor<1x4x4x4xi64>)
  func.return
}

// -----

// CHECK: nn.transpose: [0, 0] is not a permutation of rank 2
func.func @main(%x: tensor<2x8xf32>) {
  %r = nn.transpose %x {perm = array<i64: 0, 0>} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  func.return
}

// -----

// CHECK: nn.transpose: result shape does not match the permutation
func.func @main(%x: tensor<2x8xf32>) {
  %r = nn.transpose %x {perm = array<i64: 1, 0>} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  func.return
}

// -----

// CHECK: nn.reshape: element counts differ
func.func @main(%x: tensor<2x8xf32>) {
  %r = nn.reshape %x : (tensor<2x8xf32>) -> tensor<3x5xf32>
  func.return
}

// -----

// CHECK: nn.expand: input does not broadcast to the result shape
func.func @main(%x: tensor<2x8xf32>) {
  %r = nn.expand %x : (tensor<2x8xf32>) -> tensor<1x8xf32>
  func.return
}

// -----

// CHECK: nn.concat: axis 2 out of range
func.func @main(%x: tensor<2x8xf32>) {
  %r = nn.concat %x, %x {axis = 2 : i64} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  func.return
}

// -----

// CHECK: nn.concat: operand shape [3, 4] does not match
func.func @main(%x: tensor<2x8xf32>, %y: tensor<3x4xf32>) {
  %r = nn.concat %x, %y {axis = 0 : i64} : (tensor<2x8xf32>, tensor<3x4xf32>) -> tensor<5x8xf32>
  func.return
}

// -----

// CHECK: nn.concat: wrong result shape
func.func @main(%x: tensor<2x8xf32>) {
  %r = nn.concat %x, %x {axis = 0 : i64} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<5x8xf32>
  func.return
}

// -----

// CHECK: nn.slice: starts/steps must have one entry per dim
func.func @main(%x: tensor<2x8xf32>) {
  %r = nn.slice %x {starts = array<i64: 0>, steps = array<i64: 1>} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  func.return
}

// -----

// CHECK: nn.slice: dim 1 slice out of bounds
func.func @main(%x: tensor<2x8xf32>) {
  %r = nn.slice %x {starts = array<i64: 0, 4>, steps = array<i64: 1, 1>} : (tensor<2x8xf32>) -> tensor<2x5xf32>
  func.return
}

// -----

// CHECK: nn.gather: axis out of range
func.func @main(%x: tensor<2x8xf32>, %i: tensor<3xi64>) {
  %r = nn.gather %x, %i {axis = 2 : i64} : (tensor<2x8xf32>, tensor<3xi64>) -> tensor<2x8xf32>
  func.return
}

// -----

// CHECK: nn.gather: indices must be integers
func.func @main(%x: tensor<2x8xf32>, %i: tensor<3xf32>) {
  %r = nn.gather %x, %i {axis = 1 : i64} : (tensor<2x8xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  func.return
}

// -----

// CHECK: nn.gather: wrong result shape
func.func @main(%x: tensor<2x8xf32>, %i: tensor<3xi64>) {
  %r = nn.gather %x, %i {axis = 1 : i64} : (tensor<2x8xf32>, tensor<3xi64>) -> tensor<2x4xf32>
  func.return
}

// -----

// CHECK: nn.attention: q, k, v must be [B, H, S, D]
func.func @main(%q: tensor<4x16x8xf16>, %k: tensor<1x2x32x8xf16>, %v: tensor<1x2x32x8xf16>) {
  %r = nn.attention %q, %k, %v {num_heads = 4 : i64, num_kv_heads = 2 : i64, causal = false, scale = 1.0 : f32} : (tensor<4x16x8xf16>, tensor<1x2x32x8xf16>, tensor<1x2x32x8xf16>) -> tensor<4x16x8xf16>
  func.return
}

// -----

// CHECK: nn.attention: 4 query heads cannot share 3 K/V heads ([1, 4, 16, 8], [1, 2, 32, 8])
func.func @main(%q: tensor<1x4x16x8xf16>, %k: tensor<1x2x32x8xf16>, %v: tensor<1x2x32x8xf16>) {
  %r = nn.attention %q, %k, %v {num_heads = 4 : i64, num_kv_heads = 3 : i64, causal = false, scale = 1.0 : f32} : (tensor<1x4x16x8xf16>, tensor<1x2x32x8xf16>, tensor<1x2x32x8xf16>) -> tensor<1x4x16x8xf16>
  func.return
}

// -----

// CHECK: nn.attention: q [1, 4, 16, 8], k [1, 2, 32, 4], v [1, 2, 32, 8] do not fit
func.func @main(%q: tensor<1x4x16x8xf16>, %k: tensor<1x2x32x4xf16>, %v: tensor<1x2x32x8xf16>) {
  %r = nn.attention %q, %k, %v {num_heads = 4 : i64, num_kv_heads = 2 : i64, causal = false, scale = 1.0 : f32} : (tensor<1x4x16x8xf16>, tensor<1x2x32x4xf16>, tensor<1x2x32x8xf16>) -> tensor<1x4x16x8xf16>
  func.return
}

// -----

// CHECK: nn.attention: result must be [1, 4, 16, 8]
func.func @main(%q: tensor<1x4x16x8xf16>, %k: tensor<1x2x32x8xf16>, %v: tensor<1x2x32x8xf16>) {
  %r = nn.attention %q, %k, %v {num_heads = 4 : i64, num_kv_heads = 2 : i64, causal = false, scale = 1.0 : f32} : (tensor<1x4x16x8xf16>, tensor<1x2x32x8xf16>, tensor<1x2x32x8xf16>) -> tensor<1x4x16x4xf16>
  func.return
}

// -----

// CHECK: nn.attention: mask [2, 1, 16, 32] does not broadcast to [1, 4, 16, 32]
func.func @main(%q: tensor<1x4x16x8xf16>, %k: tensor<1x2x32x8xf16>, %v: tensor<1x2x32x8xf16>, %m: tensor<2x1x16x32xf16>) {
  %r = nn.attention %q, %k, %v, %m {num_heads = 4 : i64, num_kv_heads = 2 : i64, causal = false, scale = 1.0 : f32} : (tensor<1x4x16x8xf16>, tensor<1x2x32x8xf16>, tensor<1x2x32x8xf16>, tensor<2x1x16x32xf16>) -> tensor<1x4x16x8xf16>
  func.return
}

// -----

// CHECK: #ascend.tiling: m = 1.000000e+00 : f32 must be an integer
func.func @main(%x: tensor<2x8xf32>, %w: tensor<8x4xf32>) {
  %r = nn.matmul %x, %w {ascend.tiling = #ascend.tiling<{m = 1.0 : f32}>} : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  func.return
}

// -----

// CHECK: {m = 16 : i64} should be of base attribute ascend.tiling
func.func @main(%x: tensor<2x8xf32>, %w: tensor<8x4xf32>) {
  %r = nn.matmul %x, %w {ascend.tiling = {m = 16 : i64}} : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  func.return
}

// -----

// CHECK: nn.fused: block argument types must equal the operand types
func.func @main(%x: tensor<2x8xf32>) {
  %r = nn.fused(%x) {kind = #nn.fused_kind<elementwise>} : (tensor<2x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf16>):
    nn.yield %a : tensor<2x8xf16>
  }
  func.return
}

// -----

// CHECK: nn.fused: body must end in nn.yield of the result types
func.func @main(%x: tensor<2x8xf32>) {
  %r = nn.fused(%x) {kind = #nn.fused_kind<elementwise>} : (tensor<2x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>):
    %e = nn.exp %a : (tensor<2x8xf32>) -> tensor<2x8xf32>
    nn.yield %e, %e : tensor<2x8xf32>, tensor<2x8xf32>
  }
  func.return
}

// -----

// A GELU form written as a string (an unknown #nn.gelu_approximate is a parse error: invalid_parse.mlir)
// CHECK: "tanh" should be of base attribute nn.gelu_approximate
func.func @main(%x: tensor<2x8xf32>) {
  %r = nn.gelu %x {approximate = "tanh"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  func.return
}

// -----

// A fused kind written as a string
// CHECK: "ffn" should be of base attribute nn.fused_kind
func.func @main(%x: tensor<2x8xf32>) {
  %r = nn.fused(%x) {kind = "ffn"} : (tensor<2x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>):
    nn.yield %a : tensor<2x8xf32>
  }
  func.return
}

// -----

// CHECK: nn.conv2d: i8 x i8 cannot give i8 (only i8 x i8 -> i32 widens)
func.func @main(%x: tensor<1x4x5x5xi8>, %w: tensor<2x4x3x3xi8>) {
  %y = nn.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x4x5x5xi8>, tensor<2x4x3x3xi8>) -> tensor<1x2x3x3xi8>
  func.return
}
