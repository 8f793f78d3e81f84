// RUN: ascendir-opt %s -p 'shard-tensor-parallel{tp=2}' | filecheck %s --check-prefix=TP2
// RUN: ascendir-opt %s -p 'shard-tensor-parallel{tp=2 sequence-parallel=true}' | filecheck %s --check-prefix=SP
// RUN: ascendir-opt %s -p 'shard-tensor-parallel{tp=4}' | filecheck %s --check-prefix=TP4
// RUN: ascendir-opt %s -p 'fuse-ffn,shard-tensor-parallel{tp=2}' | filecheck %s --check-prefix=FFN

// A LLaMA block (RMSNorm, GQA attention with 4 query / 2 KV heads, SwiGLU MLP).
// tp=2: Q/K/V/gate/up column-parallel (the weights' output columns halved), heads halved,
// o_proj / down row-parallel (input rows halved) followed by an all_reduce before the residual.
// TP2:      nn.rms_norm %x
// TP2:      nn.weight @wq : tensor<16x8xf32>
// TP2:      nn.weight @wk : tensor<16x4xf32>
// TP2:      nn.weight @wv : tensor<16x4xf32>
// TP2:      nn.attention {{.*}} {num_heads = 2 : i64, num_kv_heads = 1 : i64
// TP2-SAME:   -> tensor<1x2x8x4xf32>
// TP2:      nn.weight @wo : tensor<8x16xf32>
// TP2-NEXT: %[[O:.*]] = nn.matmul {{.*}} : (tensor<1x8x8xf32>, tensor<8x16xf32>) -> tensor<1x8x16xf32>
// TP2-NEXT: %[[AR:.*]] = nn.all_reduce %[[O]] {group = #ascend.device_group<[0, 1]>} : (tensor<1x8x16xf32>) -> tensor<1x8x16xf32>
// TP2-NEXT: %[[R1:.*]] = nn.add %x, %[[AR]]
// TP2:      nn.weight @wg : tensor<16x16xf32>
// TP2:      nn.silu {{.*}} : (tensor<1x8x16xf32>)
// TP2:      nn.weight @wd : tensor<16x16xf32>
// TP2-NEXT: %[[D:.*]] = nn.matmul
// TP2-NEXT: %[[AR2:.*]] = nn.all_reduce %[[D]]
// TP2-NEXT: %[[Y:.*]] = nn.add %[[R1]], %[[AR2]]
// TP2-NEXT: func.return %[[Y]] : tensor<1x8x16xf32>

// Sequence parallelism: the row-parallel outputs are reduce-scattered along the tokens, the
// residual and the second norm run on 4 of the 8 tokens, and the tokens are all-gathered
// before the column-parallel gate / up and at the result.
// SP:      %[[O:.*]] = nn.matmul {{.*}} -> tensor<1x8x16xf32>
// SP:      %[[IDX:.*]] = nn.weight @tp.index.d1.8.s1 : tensor<4xi64>
// SP-NEXT: %[[XS:.*]] = nn.gather %x, %[[IDX]] {axis = 1 : i64} : (tensor<1x8x16xf32>, tensor<4xi64>) -> tensor<1x4x16xf32>
// SP-NEXT: %[[RS:.*]] = nn.reduce_scatter %[[O]] {group = #ascend.device_group<[0, 1]>, axis = 1 : i64} : (tensor<1x8x16xf32>) -> tensor<1x4x16xf32>
// SP-NEXT: %[[R1:.*]] = nn.add %[[XS]], %[[RS]] : (tensor<1x4x16xf32>, tensor<1x4x16xf32>)
// SP-NEXT: %[[N:.*]] = nn.rms_norm %[[R1]], {{.*}} -> tensor<1x4x16xf32>
// SP-NEXT: %[[G:.*]] = nn.all_gather %[[N]] {group = #ascend.device_group<[0, 1]>, axis = 1 : i64} : (tensor<1x4x16xf32>) -> tensor<1x8x16xf32>
// SP:      nn.reduce_scatter
// SP-NEXT: %[[Y:.*]] = nn.add %[[R1]]
// SP-NEXT: %[[YG:.*]] = nn.all_gather %[[Y]] {{.*}} axis = 1 : i64} : (tensor<1x4x16xf32>) -> tensor<1x8x16xf32>
// SP-NEXT: func.return %[[YG]]

// tp=4 > 2 KV heads: each rank keeps the one KV head its query head reads (K/V projections
// replicated per KV head: 4 columns of 8), one query head per rank.
// TP4: nn.weight @wq : tensor<16x4xf32>
// TP4: nn.weight @wk : tensor<16x4xf32>
// TP4: nn.attention {{.*}} {num_heads = 1 : i64, num_kv_heads = 1 : i64
// TP4: nn.all_reduce {{.*}} {group = #ascend.device_group<[0, 1, 2, 3]>}

// A fused SwiGLU region is sharded whole: its operands' types change, the all_reduce follows it.
// FFN:      %[[F:.*]] = nn.fused({{.*}}) {kind = #nn.fused_kind<ffn>} : (tensor<1x8x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<1x8x16xf32>
// FFN:      nn.yield
// FFN-NEXT: }
// FFN-NEXT: nn.all_reduce %[[F]]
func.func @main(%x: tensor<1x8x16xf32>) -> tensor<1x8x16xf32> {
  %ln = nn.weight @ln : tensor<16xf32>
  %h = nn.rms_norm %x, %ln {axis = 2 : i64, epsilon = 1.000000e-05 : f32} : (tensor<1x8x16xf32>, tensor<16xf32>) -> tensor<1x8x16xf32>
  %wq = nn.weight @wq : tensor<16x16xf32>
  %q0 = nn.matmul %h, %wq : (tensor<1x8x16xf32>, tensor<16x16xf32>) -> tensor<1x8x16xf32>
  %q1 = nn.reshape %q0 : (tensor<1x8x16xf32>) -> tensor<1x8x4x4xf32>
  %q = nn.transpose %q1 {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x8x4x4xf32>) -> tensor<1x4x8x4xf32>
  %wk = nn.weight @wk : tensor<16x8xf32>
  %k0 = nn.matmul %h, %wk : (tensor<1x8x16xf32>, tensor<16x8xf32>) -> tensor<1x8x8xf32>
  %k1 = nn.reshape %k0 : (tensor<1x8x8xf32>) -> tensor<1x8x2x4xf32>
  %k = nn.transpose %k1 {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x8x2x4xf32>) -> tensor<1x2x8x4xf32>
  %wv = nn.weight @wv : tensor<16x8xf32>
  %v0 = nn.matmul %h, %wv : (tensor<1x8x16xf32>, tensor<16x8xf32>) -> tensor<1x8x8xf32>
  %v1 = nn.reshape %v0 : (tensor<1x8x8xf32>) -> tensor<1x8x2x4xf32>
  %v = nn.transpose %v1 {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x8x2x4xf32>) -> tensor<1x2x8x4xf32>
  %att = nn.attention %q, %k, %v {num_heads = 4 : i64, num_kv_heads = 2 : i64, causal = true, scale = 5.000000e-01 : f32} : (tensor<1x4x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) -> tensor<1x4x8x4xf32>
  %o1 = nn.transpose %att {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x4x8x4xf32>) -> tensor<1x8x4x4xf32>
  %o2 = nn.reshape %o1 : (tensor<1x8x4x4xf32>) -> tensor<1x8x16xf32>
  %wo = nn.weight @wo : tensor<16x16xf32>
  %o = nn.matmul %o2, %wo : (tensor<1x8x16xf32>, tensor<16x16xf32>) -> tensor<1x8x16xf32>
  %r1 = nn.add %x, %o : (tensor<1x8x16xf32>, tensor<1x8x16xf32>) -> tensor<1x8x16xf32>
  %h2 = nn.rms_norm %r1, %ln {axis = 2 : i64, epsilon = 1.000000e-05 : f32} : (tensor<1x8x16xf32>, tensor<16xf32>) -> tensor<1x8x16xf32>
  %wg = nn.weight @wg : tensor<16x32xf32>
  %g = nn.matmul %h2, %wg : (tensor<1x8x16xf32>, tensor<16x32xf32>) -> tensor<1x8x32xf32>
  %a = nn.silu %g : (tensor<1x8x32xf32>) -> tensor<1x8x32xf32>
  %wu = nn.weight @wu : tensor<16x32xf32>
  %u = nn.matmul %h2, %wu : (tensor<1x8x16xf32>, tensor<16x32xf32>) -> tensor<1x8x32xf32>
  %m = nn.mul %a, %u : (tensor<1x8x32xf32>, tensor<1x8x32xf32>) -> tensor<1x8x32xf32>
  %wd = nn.weight @wd : tensor<32x16xf32>
  %d = nn.matmul %m, %wd : (tensor<1x8x32xf32>, tensor<32x16xf32>) -> tensor<1x8x16xf32>
  %y = nn.add %r1, %d : (tensor<1x8x16xf32>, tensor<1x8x16xf32>) -> tensor<1x8x16xf32>
  func.return %y : tensor<1x8x16xf32>
}
