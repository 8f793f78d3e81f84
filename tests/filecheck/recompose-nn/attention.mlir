// RUN: ascendir-opt %s --split-input-file -p recompose-nn | filecheck %s

// GQA (2 query heads share 1 K/V head through repeat_kv) with the HF causal construction
// where(and(tril, padding), 0, lowest): causal = true, the mask keeps only the padding part,
// and K / V are used before the repeat.
// CHECK-LABEL: func.func @gqa_causal
// CHECK:         %[[M:.*]] = nn.where %pad, %zero, %low : (tensor<1x1x1x3xi1>, tensor<f32>, tensor<f32>) -> tensor<1x1x1x3xf32>
// CHECK-NEXT:    %[[A:.*]] = nn.attention %q, %k, %v, %[[M]] {num_heads = 2 : i64, num_kv_heads = 1 : i64, causal = true, scale = 5.000000e-01 : f32}
// CHECK-NEXT:    func.return %[[A]]
func.func @gqa_causal(%q: tensor<1x2x3x4xf32>, %k: tensor<1x1x3x4xf32>, %v: tensor<1x1x3x4xf32>, %pad: tensor<1x1x1x3xi1>) -> tensor<1x2x3x4xf32> {
  %tril = nn.constant dense<[[[[true, false, false], [true, true, false], [true, true, true]]]]> : tensor<1x1x3x3xi1>
  %c = nn.and %tril, %pad : (tensor<1x1x3x3xi1>, tensor<1x1x1x3xi1>) -> tensor<1x1x3x3xi1>
  %zero = nn.constant dense<0.0> : tensor<f32>
  %low = nn.constant dense<-3.40282347e+38> : tensor<f32>
  %mask = nn.where %c, %zero, %low : (tensor<1x1x3x3xi1>, tensor<f32>, tensor<f32>) -> tensor<1x1x3x3xf32>
  %k5 = nn.reshape %k : (tensor<1x1x3x4xf32>) -> tensor<1x1x1x3x4xf32>
  %ke = nn.expand %k5 : (tensor<1x1x1x3x4xf32>) -> tensor<1x1x2x3x4xf32>
  %kr = nn.reshape %ke : (tensor<1x1x2x3x4xf32>) -> tensor<1x2x3x4xf32>
  %v5 = nn.reshape %v : (tensor<1x1x3x4xf32>) -> tensor<1x1x1x3x4xf32>
  %ve = nn.expand %v5 : (tensor<1x1x1x3x4xf32>) -> tensor<1x1x2x3x4xf32>
  %vr = nn.reshape %ve : (tensor<1x1x2x3x4xf32>) -> tensor<1x2x3x4xf32>
  %kt = nn.transpose %kr {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x3x4xf32>) -> tensor<1x2x4x3xf32>
  %s = nn.matmul %q, %kt : (tensor<1x2x3x4xf32>, tensor<1x2x4x3xf32>) -> tensor<1x2x3x3xf32>
  %sc = nn.constant dense<0.5> : tensor<f32>
  %s2 = nn.mul %s, %sc : (tensor<1x2x3x3xf32>, tensor<f32>) -> tensor<1x2x3x3xf32>
  %s3 = nn.add %s2, %mask : (tensor<1x2x3x3xf32>, tensor<1x1x3x3xf32>) -> tensor<1x2x3x3xf32>
  %p = nn.softmax %s3 {axis = 3 : i64} : (tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
  %o = nn.matmul %p, %vr : (tensor<1x2x3x3xf32>, tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32>
  func.return %o : tensor<1x2x3x4xf32>
}

// -----

// A mask that is not causal (upper triangle): still attention, causal = false, mask kept whole.
// The key comes as [B, S, H, D] transposed by [0, 2, 3, 1] (BERT / GPT-2 export): one transpose.
// CHECK-LABEL: func.func @not_causal
// CHECK:         %[[K:.*]] = nn.transpose %kx {perm = array<i64: 0, 2, 1, 3>}
// CHECK-NEXT:    %[[A:.*]] = nn.attention %q, %[[K]], %v, %mask {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = false, scale = 1.250000e-01 : f32}
// CHECK-NEXT:    func.return %[[A]]
func.func @not_causal(%q: tensor<1x2x3x4xf32>, %kx: tensor<1x3x2x4xf32>, %v: tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32> {
  %triu = nn.constant dense<[[[[true, true, true], [false, true, true], [false, false, true]]]]> : tensor<1x1x3x3xi1>
  %zero = nn.constant dense<0.0> : tensor<f32>
  %low = nn.constant dense<-3.40282347e+38> : tensor<f32>
  %mask = nn.where %triu, %zero, %low : (tensor<1x1x3x3xi1>, tensor<f32>, tensor<f32>) -> tensor<1x1x3x3xf32>
  %kt = nn.transpose %kx {perm = array<i64: 0, 2, 3, 1>} : (tensor<1x3x2x4xf32>) -> tensor<1x2x4x3xf32>
  %s = nn.matmul %q, %kt : (tensor<1x2x3x4xf32>, tensor<1x2x4x3xf32>) -> tensor<1x2x3x3xf32>
  %d = nn.constant dense<8.0> : tensor<f32>
  %s2 = nn.div %s, %d : (tensor<1x2x3x3xf32>, tensor<f32>) -> tensor<1x2x3x3xf32>
  %s3 = nn.add %s2, %mask : (tensor<1x2x3x3xf32>, tensor<1x1x3x3xf32>) -> tensor<1x2x3x3xf32>
  %p = nn.softmax %s3 {axis = 3 : i64} : (tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
  %o = nn.matmul %p, %v : (tensor<1x2x3x3xf32>, tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32>
  func.return %o : tensor<1x2x3x4xf32>
}

// -----

// The scores are also returned (e.g. output_attentions): no attention is formed.
// CHECK-LABEL: func.func @probs_escape
// CHECK-NOT:     nn.attention
// CHECK:         nn.softmax
func.func @probs_escape(%q: tensor<1x2x3x4xf32>, %kt: tensor<1x2x4x3xf32>, %v: tensor<1x2x3x4xf32>) -> (tensor<1x2x3x4xf32>, tensor<1x2x3x3xf32>) {
  %s = nn.matmul %q, %kt : (tensor<1x2x3x4xf32>, tensor<1x2x4x3xf32>) -> tensor<1x2x3x3xf32>
  %p = nn.softmax %s {axis = 3 : i64} : (tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
  %o = nn.matmul %p, %v : (tensor<1x2x3x3xf32>, tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32>
  func.return %o, %p : tensor<1x2x3x4xf32>, tensor<1x2x3x3xf32>
}
