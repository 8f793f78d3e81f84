// RUN: ascendir-opt %s | ascendir-opt | filecheck %s
// RUN: ascendir-opt %s --print-op-generic | ascendir-opt | filecheck %s

// Round trip of every nn op (ops.py, fused.py): each op with its properties (optional ones
// present and absent), the declared #ascend.tiling of nn.matmul / nn.attention, nn.fused with every
// #nn.fused_kind, nn.yield.

// CHECK:      builtin.module {
// CHECK-NEXT: func.func @main(%x: tensor<2x8xf32>, %y: tensor<1x8xf32>, %c: tensor<2x8xi1>, %i: tensor<3xi64>) -> tensor<2x8xf32> {
// CHECK-NEXT: %w = nn.weight @w0 : tensor<8x4xf32>
// CHECK-NEXT: %k = nn.constant dense<[1, 2]> : tensor<2xi64>
// CHECK-NEXT: %relu = nn.relu %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %sigmoid = nn.sigmoid %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %silu = nn.silu %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %tanh = nn.tanh %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %exp = nn.exp %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %log = nn.log %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %sqrt = nn.sqrt %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %rsqrt = nn.rsqrt %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %reciprocal = nn.reciprocal %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %neg = nn.neg %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %abs = nn.abs %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %erf = nn.erf %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %sin = nn.sin %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %cos = nn.cos %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %floor = nn.floor %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %ceil = nn.ceil %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %identity = nn.identity %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %not = nn.not %c : (tensor<2x8xi1>) -> tensor<2x8xi1>
// CHECK-NEXT: %gelu = nn.gelu %x {approximate = #nn.gelu_approximate<tanh>} : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %gelu_erf = nn.gelu %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %leaky = nn.leaky_relu %x {alpha = 1.000000e-01 : f32} : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %clip = nn.clip %x {min = 0.000000e+00 : f32, max = 6.000000e+00 : f32} : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %add = nn.add %x, %y : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %sub = nn.sub %x, %y : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %mul = nn.mul %x, %y : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %div = nn.div %x, %y : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %pow = nn.pow %x, %y : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %max = nn.max %x, %y : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %min = nn.min %x, %y : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %mod = nn.mod %x, %y : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %fmod = nn.fmod %x, %y : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %and = nn.and %c, %c : (tensor<2x8xi1>, tensor<2x8xi1>) -> tensor<2x8xi1>
// CHECK-NEXT: %or = nn.or %c, %c : (tensor<2x8xi1>, tensor<2x8xi1>) -> tensor<2x8xi1>
// CHECK-NEXT: %equal = nn.equal %x, %y : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xi1>
// CHECK-NEXT: %less = nn.less %x, %y : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xi1>
// CHECK-NEXT: %less_equal = nn.less_equal %x, %y : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xi1>
// CHECK-NEXT: %greater = nn.greater %x, %y : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xi1>
// CHECK-NEXT: %greater_equal = nn.greater_equal %x, %y : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xi1>
// CHECK-NEXT: %where = nn.where %c, %x, %y : (tensor<2x8xi1>, tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %cast = nn.cast %x : (tensor<2x8xf32>) -> tensor<2x8xf16>
// CHECK-NEXT: %cast8 = nn.cast %x {saturate = false} : (tensor<2x8xf32>) -> tensor<2x8xf8E4M3FN>
// CHECK-NEXT: %e8 = nn.cast %x {round_mode = #ascend.round_mode<nearest>} : (tensor<2x8xf32>) -> tensor<2x8xf8E8M0FNU>
// CHECK-NEXT: %matmul = nn.matmul %x, %w {ascend.tiling = #ascend.tiling<{m = 16 : i64, n = 16 : i64, k = 16 : i64, l1_depth = 1 : i64, split_k = 1 : i64, swizzle = 1 : i64}>} : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %softmax = nn.softmax %x {axis = 1 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %ln = nn.layer_norm %x, %y, %y {axis = 1 : i64, epsilon = 1.000000e-05 : f32} : (tensor<2x8xf32>, tensor<1x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %ln2, %mean, %inv = nn.layer_norm %x, %y {axis = 1 : i64, epsilon = 1.000000e-05 : f32} : (tensor<2x8xf32>, tensor<1x8xf32>) -> (tensor<2x8xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
// CHECK-NEXT: %rms = nn.rms_norm %x, %y {axis = 1 : i64, epsilon = 1.000000e-05 : f32} : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %reduce_sum = nn.reduce_sum %x {axes = array<i64: 1>, keepdims = true} : (tensor<2x8xf32>) -> tensor<2x1xf32>
// CHECK-NEXT: %reduce_mean = nn.reduce_mean %x {axes = array<i64: 1>, keepdims = true} : (tensor<2x8xf32>) -> tensor<2x1xf32>
// CHECK-NEXT: %reduce_max = nn.reduce_max %x {axes = array<i64: 1>, keepdims = true} : (tensor<2x8xf32>) -> tensor<2x1xf32>
// CHECK-NEXT: %reduce_min = nn.reduce_min %x {axes = array<i64: 1>, keepdims = true} : (tensor<2x8xf32>) -> tensor<2x1xf32>
// CHECK-NEXT: %reduce_prod = nn.reduce_prod %x {axes = array<i64: 1>, keepdims = true} : (tensor<2x8xf32>) -> tensor<2x1xf32>
// CHECK-NEXT: %rs0 = nn.reduce_sum %x {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x8xf32>) -> tensor<f32>
// CHECK-NEXT: %tv, %ti = nn.topk %x {k = 3 : i64, axis = 1 : i64, largest = true} : (tensor<2x8xf32>) -> (tensor<2x3xf32>, tensor<2x3xi64>)
// CHECK-NEXT: %img = nn.weight @img : tensor<1x4x8x8xf32>
// CHECK-NEXT: %cw = nn.weight @cw : tensor<6x2x3x3xf32>
// CHECK-NEXT: %cb = nn.weight @cb : tensor<6xf32>
// CHECK-NEXT: %conv = nn.conv2d %img, %cw, %cb {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 2 : i64} : (tensor<1x4x8x8xf32>, tensor<6x2x3x3xf32>, tensor<6xf32>) -> tensor<1x6x8x8xf32>
// CHECK-NEXT: %conv_nb = nn.conv2d %img, %cw {strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 2 : i64} : (tensor<1x4x8x8xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x3x3xf32>
// CHECK-NEXT: %pool = nn.pool2d %img {kind = #nn.pool_kind<avg>, kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, count_include_pad = false} : (tensor<1x4x8x8xf32>) -> tensor<1x4x4x4xf32>
// CHECK-NEXT: %mp, %mi = nn.pool2d %img {kind = #nn.pool_kind<max>, kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, count_include_pad = false, storage_order = 0 : i64} : (tensor<1x4x8x8xf32>) -> (tensor<1x4x4x4xf32>, tensor<1x4x4x4xi64>)
// CHECK-NEXT: %q = nn.weight @q : tensor<1x4x16x8xf16>
// CHECK-NEXT: %kk = nn.weight @k : tensor<1x2x32x8xf16>
// CHECK-NEXT: %v = nn.weight @v : tensor<1x2x32x8xf16>
// CHECK-NEXT: %mask = nn.weight @mask : tensor<1x1x16x32xf16>
// CHECK-NEXT: %att = nn.attention %q, %kk, %v, %mask {num_heads = 4 : i64, num_kv_heads = 2 : i64, causal = true, scale = 3.535530e-01 : f32} : (tensor<1x4x16x8xf16>, tensor<1x2x32x8xf16>, tensor<1x2x32x8xf16>, tensor<1x1x16x32xf16>) -> tensor<1x4x16x8xf16>
// CHECK-NEXT: %att_nm = nn.attention %q, %kk, %v {ascend.tiling = #ascend.tiling<{br = 16 : i64, bc = 32 : i64}>, num_heads = 4 : i64, num_kv_heads = 2 : i64, causal = false, scale = 1.250000e-01 : f32} : (tensor<1x4x16x8xf16>, tensor<1x2x32x8xf16>, tensor<1x2x32x8xf16>) -> tensor<1x4x16x8xf16>
// CHECK-NEXT: %tr = nn.transpose %x {perm = array<i64: 1, 0>} : (tensor<2x8xf32>) -> tensor<8x2xf32>
// CHECK-NEXT: %rsh = nn.reshape %x : (tensor<2x8xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: %exp2 = nn.expand %y : (tensor<1x8xf32>) -> tensor<3x8xf32>
// CHECK-NEXT: %cat = nn.concat %x, %y {axis = 0 : i64} : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<3x8xf32>
// CHECK-NEXT: %sl = nn.slice %x {starts = array<i64: 0, 7>, steps = array<i64: 1, -2>} : (tensor<2x8xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %ga = nn.gather %x, %i {axis = 1 : i64} : (tensor<2x8xf32>, tensor<3xi64>) -> tensor<2x3xf32>
// CHECK-NEXT: %f = nn.fused(%x, %w) {kind = #nn.fused_kind<matmul_epilogue>} : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT: ^bb0(%a: tensor<2x8xf32>, %b: tensor<8x4xf32>):
// CHECK-NEXT: %mm = nn.matmul %a, %b : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %re = nn.relu %mm : (tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: nn.yield %re : tensor<2x4xf32>
// CHECK-NEXT: }
// CHECK-NEXT: %f_ffn = nn.fused(%x) {kind = #nn.fused_kind<ffn>} : (tensor<2x8xf32>) -> tensor<2x8xf32> {
// CHECK-NEXT: ^bb0(%a: tensor<2x8xf32>):
// CHECK-NEXT: nn.yield %a : tensor<2x8xf32>
// CHECK-NEXT: }
// CHECK-NEXT: %f_flash_attention = nn.fused(%x) {kind = #nn.fused_kind<flash_attention>} : (tensor<2x8xf32>) -> tensor<2x8xf32> {
// CHECK-NEXT: ^bb0(%a: tensor<2x8xf32>):
// CHECK-NEXT: nn.yield %a : tensor<2x8xf32>
// CHECK-NEXT: }
// CHECK-NEXT: %f_norm_matmul = nn.fused(%x) {kind = #nn.fused_kind<norm_matmul>} : (tensor<2x8xf32>) -> tensor<2x8xf32> {
// CHECK-NEXT: ^bb0(%a: tensor<2x8xf32>):
// CHECK-NEXT: nn.yield %a : tensor<2x8xf32>
// CHECK-NEXT: }
// CHECK-NEXT: %f_conv_activation = nn.fused(%x) {kind = #nn.fused_kind<conv_activation>} : (tensor<2x8xf32>) -> tensor<2x8xf32> {
// CHECK-NEXT: ^bb0(%a: tensor<2x8xf32>):
// CHECK-NEXT: nn.yield %a : tensor<2x8xf32>
// CHECK-NEXT: }
// CHECK-NEXT: %f_elementwise = nn.fused(%x) {kind = #nn.fused_kind<elementwise>} : (tensor<2x8xf32>) -> tensor<2x8xf32> {
// CHECK-NEXT: ^bb0(%a: tensor<2x8xf32>):
// CHECK-NEXT: nn.yield %a : tensor<2x8xf32>
// CHECK-NEXT: }
// CHECK-NEXT: func.return %x : tensor<2x8xf32>
// CHECK-NEXT: }
// CHECK-NEXT: }
func.func @main(%x: tensor<2x8xf32>, %y: tensor<1x8xf32>, %c: tensor<2x8xi1>, %i: tensor<3xi64>) -> tensor<2x8xf32> {
  %w = nn.weight @w0 : tensor<8x4xf32>
  %k = nn.constant dense<[1, 2]> : tensor<2xi64>
  %relu = nn.relu %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %sigmoid = nn.sigmoid %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %silu = nn.silu %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %tanh = nn.tanh %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %exp = nn.exp %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %log = nn.log %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %sqrt = nn.sqrt %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %rsqrt = nn.rsqrt %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %reciprocal = nn.reciprocal %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %neg = nn.neg %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %abs = nn.abs %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %erf = nn.erf %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %sin = nn.sin %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %cos = nn.cos %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %floor = nn.floor %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %ceil = nn.ceil %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %identity = nn.identity %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %not = nn.not %c : (tensor<2x8xi1>) -> tensor<2x8xi1>
  %gelu = nn.gelu %x {approximate = #nn.gelu_approximate<tanh>} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %gelu_erf = nn.gelu %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %leaky = nn.leaky_relu %x {alpha = 1.000000e-01 : f32} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %clip = nn.clip %x {min = 0.000000e+00 : f32, max = 6.000000e+00 : f32} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %add = nn.add %x, %y : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
  %sub = nn.sub %x, %y : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
  %mul = nn.mul %x, %y : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
  %div = nn.div %x, %y : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
  %pow = nn.pow %x, %y : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
  %max = nn.max %x, %y : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
  %min = nn.min %x, %y : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
  %mod = nn.mod %x, %y : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
  %fmod = nn.fmod %x, %y : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
  %and = nn.and %c, %c : (tensor<2x8xi1>, tensor<2x8xi1>) -> tensor<2x8xi1>
  %or = nn.or %c, %c : (tensor<2x8xi1>, tensor<2x8xi1>) -> tensor<2x8xi1>
  %equal = nn.equal %x, %y : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xi1>
  %less = nn.less %x, %y : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xi1>
  %less_equal = nn.less_equal %x, %y : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xi1>
  %greater = nn.greater %x, %y : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xi1>
  %greater_equal = nn.greater_equal %x, %y : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xi1>
  %where = nn.where %c, %x, %y : (tensor<2x8xi1>, tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
  %cast = nn.cast %x : (tensor<2x8xf32>) -> tensor<2x8xf16>
  %cast8 = nn.cast %x {saturate = false} : (tensor<2x8xf32>) -> tensor<2x8xf8E4M3FN>
  %e8 = nn.cast %x {round_mode = #ascend.round_mode<nearest>} : (tensor<2x8xf32>) -> tensor<2x8xf8E8M0FNU>
  %matmul = nn.matmul %x, %w {ascend.tiling = #ascend.tiling<{m = 16 : i64, n = 16 : i64, k = 16 : i64, l1_depth = 1 : i64, split_k = 1 : i64, swizzle = 1 : i64}>} : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %softmax = nn.softmax %x {axis = 1 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %ln = nn.layer_norm %x, %y, %y {axis = 1 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x8xf32>, tensor<1x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
  %ln2, %mean, %inv = nn.layer_norm %x, %y {axis = 1 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x8xf32>, tensor<1x8xf32>) -> (tensor<2x8xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
  %rms = nn.rms_norm %x, %y {axis = 1 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
  %reduce_sum = nn.reduce_sum %x {axes = array<i64: 1>, keepdims = true} : (tensor<2x8xf32>) -> tensor<2x1xf32>
  %reduce_mean = nn.reduce_mean %x {axes = array<i64: 1>, keepdims = true} : (tensor<2x8xf32>) -> tensor<2x1xf32>
  %reduce_max = nn.reduce_max %x {axes = array<i64: 1>, keepdims = true} : (tensor<2x8xf32>) -> tensor<2x1xf32>
  %reduce_min = nn.reduce_min %x {axes = array<i64: 1>, keepdims = true} : (tensor<2x8xf32>) -> tensor<2x1xf32>
  %reduce_prod = nn.reduce_prod %x {axes = array<i64: 1>, keepdims = true} : (tensor<2x8xf32>) -> tensor<2x1xf32>
  %rs0 = nn.reduce_sum %x {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x8xf32>) -> tensor<f32>
  %tv, %ti = nn.topk %x {k = 3 : i64, axis = 1 : i64, largest = true} : (tensor<2x8xf32>) -> (tensor<2x3xf32>, tensor<2x3xi64>)
  %img = nn.weight @img : tensor<1x4x8x8xf32>
  %cw = nn.weight @cw : tensor<6x2x3x3xf32>
  %cb = nn.weight @cb : tensor<6xf32>
  %conv = nn.conv2d %img, %cw, %cb {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 2 : i64} : (tensor<1x4x8x8xf32>, tensor<6x2x3x3xf32>, tensor<6xf32>) -> tensor<1x6x8x8xf32>
  %conv_nb = nn.conv2d %img, %cw {strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 2 : i64} : (tensor<1x4x8x8xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x3x3xf32>
  %pool = nn.pool2d %img {kind = #nn.pool_kind<avg>, kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, count_include_pad = false} : (tensor<1x4x8x8xf32>) -> tensor<1x4x4x4xf32>
  %mp, %mi = nn.pool2d %img {kind = #nn.pool_kind<max>, kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, count_include_pad = false, storage_order = 0 : i64} : (tensor<1x4x8x8xf32>) -> (tensor<1x4x4x4xf32>, tensor<1x4x4x4xi64>)
  %q = nn.weight @q : tensor<1x4x16x8xf16>
  %kk = nn.weight @k : tensor<1x2x32x8xf16>
  %v = nn.weight @v : tensor<1x2x32x8xf16>
  %mask = nn.weight @mask : tensor<1x1x16x32xf16>
  %att = nn.attention %q, %kk, %v, %mask {num_heads = 4 : i64, num_kv_heads = 2 : i64, causal = true, scale = 3.535530e-01 : f32} : (tensor<1x4x16x8xf16>, tensor<1x2x32x8xf16>, tensor<1x2x32x8xf16>, tensor<1x1x16x32xf16>) -> tensor<1x4x16x8xf16>
  %att_nm = nn.attention %q, %kk, %v {ascend.tiling = #ascend.tiling<{br = 16 : i64, bc = 32 : i64}>, num_heads = 4 : i64, num_kv_heads = 2 : i64, causal = false, scale = 1.250000e-01 : f32} : (tensor<1x4x16x8xf16>, tensor<1x2x32x8xf16>, tensor<1x2x32x8xf16>) -> tensor<1x4x16x8xf16>
  %tr = nn.transpose %x {perm = array<i64: 1, 0>} : (tensor<2x8xf32>) -> tensor<8x2xf32>
  %rsh = nn.reshape %x : (tensor<2x8xf32>) -> tensor<4x4xf32>
  %exp2 = nn.expand %y : (tensor<1x8xf32>) -> tensor<3x8xf32>
  %cat = nn.concat %x, %y {axis = 0 : i64} : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<3x8xf32>
  %sl = nn.slice %x {starts = array<i64: 0, 7>, steps = array<i64: 1, -2>} : (tensor<2x8xf32>) -> tensor<2x4xf32>
  %ga = nn.gather %x, %i {axis = 1 : i64} : (tensor<2x8xf32>, tensor<3xi64>) -> tensor<2x3xf32>
  %f = nn.fused(%x, %w) {kind = #nn.fused_kind<matmul_epilogue>} : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32> {
  ^bb0(%a: tensor<2x8xf32>, %b: tensor<8x4xf32>):
    %mm = nn.matmul %a, %b : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
    %re = nn.relu %mm : (tensor<2x4xf32>) -> tensor<2x4xf32>
    nn.yield %re : tensor<2x4xf32>
  }
  %f_ffn = nn.fused(%x) {kind = #nn.fused_kind<ffn>} : (tensor<2x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>):
    nn.yield %a : tensor<2x8xf32>
  }
  %f_flash_attention = nn.fused(%x) {kind = #nn.fused_kind<flash_attention>} : (tensor<2x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>):
    nn.yield %a : tensor<2x8xf32>
  }
  %f_norm_matmul = nn.fused(%x) {kind = #nn.fused_kind<norm_matmul>} : (tensor<2x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>):
    nn.yield %a : tensor<2x8xf32>
  }
  %f_conv_activation = nn.fused(%x) {kind = #nn.fused_kind<conv_activation>} : (tensor<2x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>):
    nn.yield %a : tensor<2x8xf32>
  }
  %f_elementwise = nn.fused(%x) {kind = #nn.fused_kind<elementwise>} : (tensor<2x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>):
    nn.yield %a : tensor<2x8xf32>
  }
  func.return %x : tensor<2x8xf32>
}
