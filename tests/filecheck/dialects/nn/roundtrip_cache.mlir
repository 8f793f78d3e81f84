// RUN: ascendir-opt %s | filecheck %s
// RUN: ascendir-opt %s | ascendir-opt | filecheck %s

// The KV cache in place (cache.py): one decode step's new row written at position 6 of 7.

// CHECK: %p = nn.cache_append %c, %n {axis = 2 : i64, offset = 6 : i64} : (tensor<1x2x7x16xf32>, tensor<1x2x1x16xf32>) -> tensor<1x2x7x16xf32>
func.func @main(%c: tensor<1x2x7x16xf32>, %n: tensor<1x2x1x16xf32>) -> tensor<1x2x7x16xf32> {
  %p = nn.cache_append %c, %n {axis = 2 : i64, offset = 6 : i64} : (tensor<1x2x7x16xf32>, tensor<1x2x1x16xf32>) -> tensor<1x2x7x16xf32>
  func.return %p : tensor<1x2x7x16xf32>
}

// The paged layout: a pool of 6 blocks of 16 positions, a block table of 3 blocks per sequence;
// the new row written at position 40, the first 41 positions read through the table.

// CHECK: %q = nn.paged_cache_append %pool, %n2, %table {offset = 40 : i64} : (tensor<6x2x16x16xf32>, tensor<2x2x1x16xf32>, tensor<2x3xi32>) -> tensor<6x2x16x16xf32>
// CHECK: %k = nn.paged_kv %q, %table {length = 41 : i64} : (tensor<6x2x16x16xf32>, tensor<2x3xi32>) -> tensor<2x2x41x16xf32>
func.func @paged(%pool: tensor<6x2x16x16xf32>, %n2: tensor<2x2x1x16xf32>, %table: tensor<2x3xi32>) -> tensor<2x2x41x16xf32> {
  %q = nn.paged_cache_append %pool, %n2, %table {offset = 40 : i64} : (tensor<6x2x16x16xf32>, tensor<2x2x1x16xf32>, tensor<2x3xi32>) -> tensor<6x2x16x16xf32>
  %k = nn.paged_kv %q, %table {length = 41 : i64} : (tensor<6x2x16x16xf32>, tensor<2x3xi32>) -> tensor<2x2x41x16xf32>
  func.return %k : tensor<2x2x41x16xf32>
}
