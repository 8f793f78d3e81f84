// RUN: not ascendir-opt %s -p 'shard-tensor-parallel{tp=8}' 2>&1 | filecheck %s
// RUN: not ascendir-opt %s -p 'shard-tensor-parallel{tp=3}' 2>&1 | filecheck %s --check-prefix=TP3

// 4 query heads cannot be dealt to 8 devices: one line naming the op (and exit code 2).
// CHECK: ascendir-opt: error: shard-tensor-parallel: nn.attention: 4 query heads do not split over 8 devices
// TP3: ascendir-opt: error: shard-tensor-parallel: nn.attention: 4 query heads do not split over 3 devices
func.func @main(%x: tensor<1x8x16xf32>) -> tensor<1x8x16xf32> {
  %wq = nn.weight @wq : tensor<16x16xf32>
  %q0 = nn.matmul %x, %wq : (tensor<1x8x16xf32>, tensor<16x16xf32>) -> tensor<1x8x16xf32>
  %q1 = nn.reshape %q0 : (tensor<1x8x16xf32>) -> tensor<1x8x4x4xf32>
  %q = nn.transpose %q1 {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x8x4x4xf32>) -> tensor<1x4x8x4xf32>
  %att = nn.attention %q, %q, %q {num_heads = 4 : i64, num_kv_heads = 4 : i64, causal = true, scale = 5.000000e-01 : f32} : (tensor<1x4x8x4xf32>, tensor<1x4x8x4xf32>, tensor<1x4x8x4xf32>) -> tensor<1x4x8x4xf32>
  %o1 = nn.transpose %att {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x4x8x4xf32>) -> tensor<1x8x4x4xf32>
  %o2 = nn.reshape %o1 : (tensor<1x8x4x4xf32>) -> tensor<1x8x16xf32>
  func.return %o2 : tensor<1x8x16xf32>
}
