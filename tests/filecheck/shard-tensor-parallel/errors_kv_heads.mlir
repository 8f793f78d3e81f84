// RUN: not ascendir-opt %s -p 'shard-tensor-parallel{tp=2}' 2>&1 | filecheck %s

// 3 KV heads (GQA, 6 query heads) neither split over 2 devices nor replicate evenly to them.
// CHECK: ascendir-opt: error: shard-tensor-parallel: nn.attention: 3 KV heads neither split over nor replicate evenly to 2 devices
func.func @main(%x: tensor<1x8x24xf32>) -> tensor<1x6x8x4xf32> {
  %wq = nn.weight @wq : tensor<24x24xf32>
  %q0 = nn.matmul %x, %wq : (tensor<1x8x24xf32>, tensor<24x24xf32>) -> tensor<1x8x24xf32>
  %q1 = nn.reshape %q0 : (tensor<1x8x24xf32>) -> tensor<1x8x6x4xf32>
  %q = nn.transpose %q1 {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x8x6x4xf32>) -> tensor<1x6x8x4xf32>
  %wk = nn.weight @wk : tensor<24x12xf32>
  %k0 = nn.matmul %x, %wk : (tensor<1x8x24xf32>, tensor<24x12xf32>) -> tensor<1x8x12xf32>
  %k1 = nn.reshape %k0 : (tensor<1x8x12xf32>) -> tensor<1x8x3x4xf32>
  %k = nn.transpose %k1 {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x8x3x4xf32>) -> tensor<1x3x8x4xf32>
  %att = nn.attention %q, %k, %k {num_heads = 6 : i64, num_kv_heads = 3 : i64, causal = false, scale = 5.000000e-01 : f32} : (tensor<1x6x8x4xf32>, tensor<1x3x8x4xf32>, tensor<1x3x8x4xf32>) -> tensor<1x6x8x4xf32>
  func.return %att : tensor<1x6x8x4xf32>
}
