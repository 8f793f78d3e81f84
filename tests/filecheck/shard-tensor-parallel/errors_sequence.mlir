// RUN: not ascendir-opt %s -p 'shard-tensor-parallel{tp=2 sequence-parallel=true}' 2>&1 | filecheck %s
// RUN: not ascendir-opt %s -p 'shard-tensor-parallel{tp=2}' 2>&1 | filecheck %s --check-prefix=VOCAB
// RUN: not ascendir-opt %s -p 'shard-tensor-parallel{tp=0}' 2>&1 | filecheck %s --check-prefix=TP0

// 65 tokens (ViT: 64 patches and the class token) cannot be reduce-scattered over 2 devices.
// CHECK: ascendir-opt: error: shard-tensor-parallel: nn.add: sequence parallelism: 65 tokens (dim 1 of [1, 65, 16]) do not split over 2 devices
// A 4097-row table (over 1 MiB) cannot be vocab-parallel over 2 devices.
// VOCAB: ascendir-opt: error: shard-tensor-parallel: nn.gather: the vocabulary (4097 rows) does not split over 2 devices
// TP0: ascendir-opt: error: shard-tensor-parallel: tp must be at least 1, got 0
func.func @main(%x: tensor<1x65x16xf32>, %ids: tensor<1x65xi64>) -> tensor<1x65x16xf32> {
  %w1 = nn.weight @w1 : tensor<16x32xf32>
  %h = nn.matmul %x, %w1 : (tensor<1x65x16xf32>, tensor<16x32xf32>) -> tensor<1x65x32xf32>
  %a = nn.gelu %h : (tensor<1x65x32xf32>) -> tensor<1x65x32xf32>
  %w2 = nn.weight @w2 : tensor<32x16xf32>
  %o = nn.matmul %a, %w2 : (tensor<1x65x32xf32>, tensor<32x16xf32>) -> tensor<1x65x16xf32>
  %r = nn.add %x, %o : (tensor<1x65x16xf32>, tensor<1x65x16xf32>) -> tensor<1x65x16xf32>
  %table = nn.weight @table : tensor<4097x64xf32>
  %e = nn.gather %table, %ids {axis = 0 : i64} : (tensor<4097x64xf32>, tensor<1x65xi64>) -> tensor<1x65x64xf32>
  %e2 = nn.slice %e {starts = array<i64: 0, 0, 0>, steps = array<i64: 1, 1, 1>} : (tensor<1x65x64xf32>) -> tensor<1x65x16xf32>
  %y = nn.add %r, %e2 : (tensor<1x65x16xf32>, tensor<1x65x16xf32>) -> tensor<1x65x16xf32>
  func.return %y : tensor<1x65x16xf32>
}
