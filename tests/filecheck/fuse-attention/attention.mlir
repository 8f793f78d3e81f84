// RUN: ascendir-opt %s --split-input-file -p fuse-attention | filecheck %s

// Causal GQA attention (4 query heads over 2 K/V heads): one region around the op.
// CHECK-LABEL: func.func @causal_gqa
// CHECK-NEXT:    %[[F:.*]] = nn.fused(%q, %k, %v) {kind = #nn.fused_kind<flash_attention>}
// CHECK-NEXT:    ^{{.*}}(%[[Q:.*]]: tensor<1x4x33x32xf32>, %[[K:.*]]: tensor<1x2x33x32xf32>, %[[V:.*]]: tensor<1x2x33x32xf32>):
// CHECK-NEXT:      %[[A:.*]] = nn.attention %[[Q]], %[[K]], %[[V]] {num_heads = 4 : i64, num_kv_heads = 2 : i64, causal = true
// CHECK-NEXT:      nn.yield %[[A]]
// CHECK:         func.return %[[F]]
func.func @causal_gqa(%q: tensor<1x4x33x32xf32>, %k: tensor<1x2x33x32xf32>, %v: tensor<1x2x33x32xf32>) -> tensor<1x4x33x32xf32> {
  %o = nn.attention %q, %k, %v {num_heads = 4 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.176776695 : f32} : (tensor<1x4x33x32xf32>, tensor<1x2x33x32xf32>, tensor<1x2x33x32xf32>) -> tensor<1x4x33x32xf32>
  func.return %o : tensor<1x4x33x32xf32>
}

// -----

// A padding mask becomes a fourth input of the region.
// CHECK-LABEL: func.func @masked
// CHECK-NEXT:    nn.fused(%q, %k, %v, %m) {kind = #nn.fused_kind<flash_attention>}
// CHECK:           nn.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {{.*}}causal = false
func.func @masked(%q: tensor<2x2x8x16xf16>, %k: tensor<2x2x8x16xf16>, %v: tensor<2x2x8x16xf16>, %m: tensor<2x1x1x8xf16>) -> tensor<2x2x8x16xf16> {
  %o = nn.attention %q, %k, %v, %m {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = false, scale = 0.25 : f32} : (tensor<2x2x8x16xf16>, tensor<2x2x8x16xf16>, tensor<2x2x8x16xf16>, tensor<2x1x1x8xf16>) -> tensor<2x2x8x16xf16>
  func.return %o : tensor<2x2x8x16xf16>
}

// -----

// Not fused: causal with more queries than keys (the first queries see no key; the unfused
// path keeps its uniform rows), and a mask of another element type.
// CHECK-LABEL: func.func @no_match
// CHECK-NOT:     nn.fused
// CHECK:         nn.attention
// CHECK:         nn.attention
// CHECK-NOT:     nn.fused
func.func @no_match(%q: tensor<1x1x8x16xf32>, %k: tensor<1x1x4x16xf32>, %v: tensor<1x1x4x16xf32>, %m: tensor<1x1x8x4xf16>) -> (tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>) {
  %a = nn.attention %q, %k, %v {num_heads = 1 : i64, num_kv_heads = 1 : i64, causal = true, scale = 0.25 : f32} : (tensor<1x1x8x16xf32>, tensor<1x1x4x16xf32>, tensor<1x1x4x16xf32>) -> tensor<1x1x8x16xf32>
  %b = nn.attention %q, %k, %v, %m {num_heads = 1 : i64, num_kv_heads = 1 : i64, causal = false, scale = 0.25 : f32} : (tensor<1x1x8x16xf32>, tensor<1x1x4x16xf32>, tensor<1x1x4x16xf32>, tensor<1x1x8x4xf16>) -> tensor<1x1x8x16xf32>
  func.return %a, %b : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>
}

// -----

// The head transposes of a projection output ([B, S, N, D] -> [B, N, S, D]) and of the result go
// into the region (q, k, v and the output in BSND): no transpose kernel around the attention.
// CHECK-LABEL: func.func @bsnd
// CHECK-NEXT:    %[[F:.*]] = nn.fused(%q, %k, %v) {kind = #nn.fused_kind<flash_attention>} : (tensor<1x8x4x32xf32>, tensor<1x8x2x32xf32>, tensor<1x8x2x32xf32>) -> tensor<1x8x4x32xf32>
// CHECK-NEXT:    ^{{.*}}(%[[Q:.*]]: tensor<1x8x4x32xf32>, %[[K:.*]]: tensor<1x8x2x32xf32>, %[[V:.*]]: tensor<1x8x2x32xf32>):
// CHECK-NEXT:      %[[QT:.*]] = nn.transpose %[[Q]] {perm = array<i64: 0, 2, 1, 3>}
// CHECK-NEXT:      %[[KT:.*]] = nn.transpose %[[K]] {perm = array<i64: 0, 2, 1, 3>}
// CHECK-NEXT:      %[[VT:.*]] = nn.transpose %[[V]] {perm = array<i64: 0, 2, 1, 3>}
// CHECK-NEXT:      %[[A:.*]] = nn.attention %[[QT]], %[[KT]], %[[VT]]
// CHECK-NEXT:      %[[OT:.*]] = nn.transpose %[[A]] {perm = array<i64: 0, 2, 1, 3>}
// CHECK-NEXT:      nn.yield %[[OT]] : tensor<1x8x4x32xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[F]]
func.func @bsnd(%q: tensor<1x8x4x32xf32>, %k: tensor<1x8x2x32xf32>, %v: tensor<1x8x2x32xf32>) -> tensor<1x8x4x32xf32> {
  %qt = nn.transpose %q {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x8x4x32xf32>) -> tensor<1x4x8x32xf32>
  %kt = nn.transpose %k {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x8x2x32xf32>) -> tensor<1x2x8x32xf32>
  %vt = nn.transpose %v {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x8x2x32xf32>) -> tensor<1x2x8x32xf32>
  %o = nn.attention %qt, %kt, %vt {num_heads = 4 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.176776695 : f32} : (tensor<1x4x8x32xf32>, tensor<1x2x8x32xf32>, tensor<1x2x8x32xf32>) -> tensor<1x4x8x32xf32>
  %ot = nn.transpose %o {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x4x8x32xf32>) -> tensor<1x8x4x32xf32>
  func.return %ot : tensor<1x8x4x32xf32>
}

// -----

// Not taken into the region: a transpose whose result has another user (q, also returned), one of
// another permutation (k), a head row shorter than one 128-B GM transaction (v and the output:
// 32 f16 = 64 B, a strided read of those would waste half of every transaction).
// CHECK-LABEL: func.func @kept
// CHECK-NEXT:    %[[QT:.*]] = nn.transpose %q {perm = array<i64: 0, 2, 1, 3>}
// CHECK-NEXT:    %[[KT:.*]] = nn.transpose %k {perm = array<i64: 0, 1, 2, 3>}
// CHECK-NEXT:    %[[VT:.*]] = nn.transpose %v {perm = array<i64: 0, 2, 1, 3>}
// CHECK-NEXT:    %[[F:.*]] = nn.fused(%[[QT]], %[[KT]], %[[VT]]) {kind = #nn.fused_kind<flash_attention>}
// CHECK-NEXT:    ^{{.*}}(%[[Q:.*]]: tensor<1x2x8x64xf16>, %[[K:.*]]: tensor<1x2x8x64xf16>, %[[V:.*]]: tensor<1x2x8x32xf16>):
// CHECK-NEXT:      %[[A:.*]] = nn.attention %[[Q]], %[[K]], %[[V]]
// CHECK-NEXT:      nn.yield %[[A]]
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[OT:.*]] = nn.transpose %[[F]] {perm = array<i64: 0, 2, 1, 3>}
// CHECK-NEXT:    func.return %[[OT]], %[[QT]]
func.func @kept(%q: tensor<1x8x2x64xf16>, %k: tensor<1x2x8x64xf16>, %v: tensor<1x8x2x32xf16>) -> (tensor<1x8x2x32xf16>, tensor<1x2x8x64xf16>) {
  %qt = nn.transpose %q {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x8x2x64xf16>) -> tensor<1x2x8x64xf16>
  %kt = nn.transpose %k {perm = array<i64: 0, 1, 2, 3>} : (tensor<1x2x8x64xf16>) -> tensor<1x2x8x64xf16>
  %vt = nn.transpose %v {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x8x2x32xf16>) -> tensor<1x2x8x32xf16>
  %o = nn.attention %qt, %kt, %vt {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = false, scale = 0.125 : f32} : (tensor<1x2x8x64xf16>, tensor<1x2x8x64xf16>, tensor<1x2x8x32xf16>) -> tensor<1x2x8x32xf16>
  %ot = nn.transpose %o {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x2x8x32xf16>) -> tensor<1x8x2x32xf16>
  func.return %ot, %qt : tensor<1x8x2x32xf16>, tensor<1x2x8x64xf16>
}
