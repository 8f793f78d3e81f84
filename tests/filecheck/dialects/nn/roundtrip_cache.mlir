// RUN: ascendir-opt %s | filecheck %s
// RUN: ascendir-opt %s | ascendir-opt | filecheck %s

// The KV cache in place (cache.py): one decode step's new row written at position 6 of 7.

// CHECK: %p = nn.cache_append %c, %n {axis = 2 : i64, offset = 6 : i64} : (tensor<1x2x7x16xf32>, tensor<1x2x1x16xf32>) -> tensor<1x2x7x16xf32>
func.func @main(%c: tensor<1x2x7x16xf32>, %n: tensor<1x2x1x16xf32>) -> tensor<1x2x7x16xf32> {
  %p = nn.cache_append %c, %n {axis = 2 : i64, offset = 6 : i64} : (tensor<1x2x7x16xf32>, tensor<1x2x1x16xf32>) -> tensor<1x2x7x16xf32>
  func.return %p : tensor<1x2x7x16xf32>
}
