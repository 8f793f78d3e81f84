// RUN: ascendir-opt %s -p 'shard-tensor-parallel{tp=2}' | filecheck %s
// RUN: ascendir-opt %s -p 'fuse-matmul-epilogue,shard-tensor-parallel{tp=2}' | filecheck %s --check-prefix=FUSED

// A GPT-2 block: vocab-parallel token embedding (masked gather + all_reduce), learned positions,
// packed q|k|v projection with bias, heads split, row-parallel c_proj whose bias rank 0 adds,
// vocab-parallel lm_head whose logits are all-gathered.
// CHECK:      %[[WTE:.*]] = nn.weight @wte : tensor<16x16xf32>
// CHECK:      %[[START:.*]] = nn.weight @tp.vocab_start.32 : tensor<i64>
// CHECK:      %[[ROWS:.*]] = nn.weight @tp.vocab_rows.32 : tensor<i64>
// CHECK:      %[[LOCAL:.*]] = nn.sub %ids, %[[START]]
// CHECK:      %[[IN:.*]] = nn.and
// CHECK:      %[[IDX:.*]] = nn.where %[[IN]], %[[LOCAL]]
// CHECK-NEXT: %[[ROW:.*]] = nn.gather %[[WTE]], %[[IDX]] {axis = 0 : i64} : (tensor<16x16xf32>, tensor<1x8xi64>) -> tensor<1x8x16xf32>
// CHECK:      %[[EMB:.*]] = nn.where {{.*}}, %[[ROW]]
// CHECK:      %[[H:.*]] = nn.add %[[EMB]], {{.*}} : (tensor<1x8x16xf32>, tensor<1x8x16xf32>)
// CHECK-NEXT: %[[HR:.*]] = nn.all_reduce %[[H]]
// The packed projection: 24 of 48 columns per rank (8 of q, 8 of k, 8 of v), the slices
// that separate q, k and v read the rank's part of each.
// CHECK:      nn.weight @c_attn : tensor<16x24xf32>
// CHECK:      nn.weight @c_attn_b : tensor<24xf32>
// CHECK:      nn.slice {{.*}} {starts = array<i64: 0, 0, 0>{{.*}} -> tensor<1x8x8xf32>
// CHECK-NEXT: nn.slice {{.*}} {starts = array<i64: 0, 0, 8>{{.*}} -> tensor<1x8x8xf32>
// CHECK-NEXT: nn.slice {{.*}} {starts = array<i64: 0, 0, 16>{{.*}} -> tensor<1x8x8xf32>
// CHECK:      nn.attention {{.*}} {num_heads = 1 : i64, num_kv_heads = 1 : i64
// CHECK:      nn.weight @c_proj : tensor<8x16xf32>
// CHECK:      %[[BIAS:.*]] = nn.weight @c_proj_b : tensor<16xf32>
// CHECK-NEXT: %[[OB:.*]] = nn.add %{{.*}}, %[[BIAS]]
// CHECK-NEXT: %[[OR:.*]] = nn.all_reduce %[[OB]]
// CHECK-NEXT: %[[R:.*]] = nn.add %[[HR]], %[[OR]]
// CHECK:      nn.weight @lm_head : tensor<16x16xf32>
// CHECK-NEXT: %[[L:.*]] = nn.matmul %[[R]]
// CHECK-NEXT: %[[LG:.*]] = nn.all_gather %[[L]] {group = #ascend.device_group<[0, 1]>, axis = 2 : i64} : (tensor<1x8x16xf32>) -> tensor<1x8x32xf32>
// CHECK-NEXT: func.return %[[LG]]

// Fused first: the c_attn region (column-parallel, bias sliced) is sharded whole; the c_proj
// region (matmul + bias + residual) is dissolved, since its residual add must follow the
// all_reduce: the rank-0 bias joins the partial sum, the residual is added after.
// FUSED:      nn.fused({{.*}}) {kind = #nn.fused_kind<matmul_epilogue>} : (tensor<1x8x16xf32>, tensor<16x24xf32>, tensor<24xf32>) -> tensor<1x8x24xf32>
// FUSED-NOT:  nn.fused
// FUSED:      nn.matmul {{.*}} : (tensor<1x8x8xf32>, tensor<8x16xf32>) -> tensor<1x8x16xf32>
// FUSED-NEXT: nn.weight @c_proj_b
// FUSED-NEXT: %[[OB:.*]] = nn.add
// FUSED-NEXT: %[[OR:.*]] = nn.all_reduce %[[OB]]
// FUSED-NEXT: nn.add %{{.*}}, %[[OR]]

func.func @main(%ids: tensor<1x8xi64>) -> tensor<1x8x32xf32> {
  %wte = nn.weight @wte : tensor<32x16xf32>
  %e = nn.gather %wte, %ids {axis = 0 : i64} : (tensor<32x16xf32>, tensor<1x8xi64>) -> tensor<1x8x16xf32>
  %wpe = nn.weight @wpe : tensor<1x8x16xf32>
  %h = nn.add %e, %wpe : (tensor<1x8x16xf32>, tensor<1x8x16xf32>) -> tensor<1x8x16xf32>
  %w = nn.weight @c_attn : tensor<16x48xf32>
  %b = nn.weight @c_attn_b : tensor<48xf32>
  %qkv0 = nn.matmul %h, %w : (tensor<1x8x16xf32>, tensor<16x48xf32>) -> tensor<1x8x48xf32>
  %qkv = nn.add %qkv0, %b : (tensor<1x8x48xf32>, tensor<48xf32>) -> tensor<1x8x48xf32>
  %q0 = nn.slice %qkv {starts = array<i64: 0, 0, 0>, steps = array<i64: 1, 1, 1>} : (tensor<1x8x48xf32>) -> tensor<1x8x16xf32>
  %k0 = nn.slice %qkv {starts = array<i64: 0, 0, 16>, steps = array<i64: 1, 1, 1>} : (tensor<1x8x48xf32>) -> tensor<1x8x16xf32>
  %v0 = nn.slice %qkv {starts = array<i64: 0, 0, 32>, steps = array<i64: 1, 1, 1>} : (tensor<1x8x48xf32>) -> tensor<1x8x16xf32>
  %q1 = nn.reshape %q0 : (tensor<1x8x16xf32>) -> tensor<1x8x2x8xf32>
  %q = nn.transpose %q1 {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x8x2x8xf32>) -> tensor<1x2x8x8xf32>
  %k1 = nn.reshape %k0 : (tensor<1x8x16xf32>) -> tensor<1x8x2x8xf32>
  %k = nn.transpose %k1 {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x8x2x8xf32>) -> tensor<1x2x8x8xf32>
  %v1 = nn.reshape %v0 : (tensor<1x8x16xf32>) -> tensor<1x8x2x8xf32>
  %v = nn.transpose %v1 {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x8x2x8xf32>) -> tensor<1x2x8x8xf32>
  %att = nn.attention %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 5.000000e-01 : f32} : (tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %o1 = nn.transpose %att {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x2x8x8xf32>) -> tensor<1x8x2x8xf32>
  %o2 = nn.reshape %o1 : (tensor<1x8x2x8xf32>) -> tensor<1x8x16xf32>
  %wo = nn.weight @c_proj : tensor<16x16xf32>
  %bo = nn.weight @c_proj_b : tensor<16xf32>
  %o = nn.matmul %o2, %wo : (tensor<1x8x16xf32>, tensor<16x16xf32>) -> tensor<1x8x16xf32>
  %ob = nn.add %o, %bo : (tensor<1x8x16xf32>, tensor<16xf32>) -> tensor<1x8x16xf32>
  %r = nn.add %h, %ob : (tensor<1x8x16xf32>, tensor<1x8x16xf32>) -> tensor<1x8x16xf32>
  %wl = nn.weight @lm_head : tensor<16x32xf32>
  %logits = nn.matmul %r, %wl : (tensor<1x8x16xf32>, tensor<16x32xf32>) -> tensor<1x8x32xf32>
  func.return %logits : tensor<1x8x32xf32>
}
