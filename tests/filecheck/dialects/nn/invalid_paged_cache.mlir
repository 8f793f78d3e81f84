// RUN: ascendir-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Every verifier error of nn.paged_cache_append and nn.paged_kv (cache.py).

// CHECK: nn.paged_cache_append: new rows [batch, kv_heads, rows, head_dim], got [2, 2, 16]
func.func @main(%p: tensor<6x2x16x16xf32>, %n: tensor<2x2x16xf32>, %t: tensor<2x3xi32>) {
  %q = nn.paged_cache_append %p, %n, %t {offset = 40 : i64} : (tensor<6x2x16x16xf32>, tensor<2x2x16xf32>, tensor<2x3xi32>) -> tensor<6x2x16x16xf32>
  func.return
}

// -----

// CHECK: nn.paged_cache_append: pool [num_blocks, kv_heads, block_size, head_dim] and table [batch, max_blocks], got [6, 2, 16] and [2, 3]
func.func @main(%p: tensor<6x2x16xf32>, %n: tensor<2x2x1x16xf32>, %t: tensor<2x3xi32>) {
  %q = nn.paged_cache_append %p, %n, %t {offset = 40 : i64} : (tensor<6x2x16xf32>, tensor<2x2x1x16xf32>, tensor<2x3xi32>) -> tensor<6x2x16xf32>
  func.return
}

// -----

// CHECK: nn.paged_cache_append: the block table holds i32, got i64
func.func @main(%p: tensor<6x2x16x16xf32>, %n: tensor<2x2x1x16xf32>, %t: tensor<2x3xi64>) {
  %q = nn.paged_cache_append %p, %n, %t {offset = 40 : i64} : (tensor<6x2x16x16xf32>, tensor<2x2x1x16xf32>, tensor<2x3xi64>) -> tensor<6x2x16x16xf32>
  func.return
}

// -----

// CHECK: nn.paged_cache_append: pool [6, 2, 16, 16] and table [2, 3] do not match [batch 2, kv_heads 4, head_dim 16]
func.func @main(%p: tensor<6x2x16x16xf32>, %n: tensor<2x4x1x16xf32>, %t: tensor<2x3xi32>) {
  %q = nn.paged_cache_append %p, %n, %t {offset = 40 : i64} : (tensor<6x2x16x16xf32>, tensor<2x4x1x16xf32>, tensor<2x3xi32>) -> tensor<6x2x16x16xf32>
  func.return
}

// -----

// CHECK: nn.paged_cache_append: the result has the pool's type, new rows its element type
func.func @main(%p: tensor<6x2x16x16xf32>, %n: tensor<2x2x1x16xf16>, %t: tensor<2x3xi32>) {
  %q = nn.paged_cache_append %p, %n, %t {offset = 40 : i64} : (tensor<6x2x16x16xf32>, tensor<2x2x1x16xf16>, tensor<2x3xi32>) -> tensor<6x2x16x16xf32>
  func.return
}

// -----

// CHECK: nn.paged_cache_append: positions [48, 49) outside the 3 x 16 a table row addresses
func.func @main(%p: tensor<6x2x16x16xf32>, %n: tensor<2x2x1x16xf32>, %t: tensor<2x3xi32>) {
  %q = nn.paged_cache_append %p, %n, %t {offset = 48 : i64} : (tensor<6x2x16x16xf32>, tensor<2x2x1x16xf32>, tensor<2x3xi32>) -> tensor<6x2x16x16xf32>
  func.return
}

// -----

// CHECK: nn.paged_kv: length 49 (result [2, 2, 49, 16]) outside the 3 x 16 a table row addresses
func.func @main(%p: tensor<6x2x16x16xf32>, %t: tensor<2x3xi32>) {
  %k = nn.paged_kv %p, %t {length = 49 : i64} : (tensor<6x2x16x16xf32>, tensor<2x3xi32>) -> tensor<2x2x49x16xf32>
  func.return
}
