// RUN: ascendir-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Every verifier error of nn.cache_append (cache.py).

// CHECK: nn.cache_append: the result has the cache's type
func.func @main(%c: tensor<1x2x7x16xf32>, %n: tensor<1x2x1x16xf32>) {
  %p = nn.cache_append %c, %n {axis = 2 : i64, offset = 6 : i64} : (tensor<1x2x7x16xf32>, tensor<1x2x1x16xf32>) -> tensor<1x2x8x16xf32>
  func.return
}

// -----

// CHECK: nn.cache_append: new rows and cache differ in element type
func.func @main(%c: tensor<1x2x7x16xf32>, %n: tensor<1x2x1x16xf16>) {
  %p = nn.cache_append %c, %n {axis = 2 : i64, offset = 6 : i64} : (tensor<1x2x7x16xf32>, tensor<1x2x1x16xf16>) -> tensor<1x2x7x16xf32>
  func.return
}

// -----

// CHECK: nn.cache_append: axis 4 and ranks 4, 4 do not match
func.func @main(%c: tensor<1x2x7x16xf32>, %n: tensor<1x2x1x16xf32>) {
  %p = nn.cache_append %c, %n {axis = 4 : i64, offset = 6 : i64} : (tensor<1x2x7x16xf32>, tensor<1x2x1x16xf32>) -> tensor<1x2x7x16xf32>
  func.return
}

// -----

// CHECK: nn.cache_append: new [1, 4, 1, 16] does not match cache [1, 2, 7, 16] outside axis 2
func.func @main(%c: tensor<1x2x7x16xf32>, %n: tensor<1x4x1x16xf32>) {
  %p = nn.cache_append %c, %n {axis = 2 : i64, offset = 6 : i64} : (tensor<1x2x7x16xf32>, tensor<1x4x1x16xf32>) -> tensor<1x2x7x16xf32>
  func.return
}

// -----

// CHECK: nn.cache_append: positions [7, 8) outside the cache's 7
func.func @main(%c: tensor<1x2x7x16xf32>, %n: tensor<1x2x1x16xf32>) {
  %p = nn.cache_append %c, %n {axis = 2 : i64, offset = 7 : i64} : (tensor<1x2x7x16xf32>, tensor<1x2x1x16xf32>) -> tensor<1x2x7x16xf32>
  func.return
}
