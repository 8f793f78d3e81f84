// RUN: ascendir-opt %s --split-input-file -p cache-append | filecheck %s
// RUN: ascendir-opt %s --split-input-file -p cache-append,convert-nn-to-ascend | filecheck %s --check-prefix=LOWER

// A decode step: the past (6 positions) grows by one row and is returned as the present. The
// argument becomes the cache with room for the new row; the concat becomes an in-place append.
// CHECK-LABEL: func.func @main(%past: tensor<1x2x7x16xf32>, %new: tensor<1x2x1x16xf32>) -> tensor<1x2x7x16xf32>
// CHECK-NEXT:    %present = nn.cache_append %past, %new {axis = 2 : i64, offset = 6 : i64} : (tensor<1x2x7x16xf32>, tensor<1x2x1x16xf32>) -> tensor<1x2x7x16xf32>
// CHECK-NEXT:    func.return %present : tensor<1x2x7x16xf32>

// Lowered, the kernel copies the new row (2 x 16 elements) into the cache buffer at column
// 6 x 16 = 96, and @main returns its own argument: no copy of the past.
// LOWER-LABEL: ascend.kernel @cache_append_0
// LOWER:         ascend.copy %{{.*}}, %{{.*}} : memref<{{.*}}, #ascend<space gm>>, memref<{{.*}}, #ascend<space ub>>
// LOWER:         ascend.copy
// LOWER-LABEL: func.func @main(%{{.*}}: memref<1x2x7x16xf32, #ascend<space gm>>
// LOWER:         %[[C:.*]] = ascend.view %[[PAST:.*]] : memref<1x2x7x16xf32, #ascend<space gm>> to memref<2x112xf32, #ascend<space gm>>
// LOWER:         ascend.launch @cache_append_0(%{{.*}}, %[[C]])
// LOWER-NEXT:    func.return %[[PAST]]
func.func @main(%past: tensor<1x2x6x16xf32>, %new: tensor<1x2x1x16xf32>) -> tensor<1x2x7x16xf32> {
  %present = nn.concat %past, %new {axis = 2 : i64} : (tensor<1x2x6x16xf32>, tensor<1x2x1x16xf32>) -> tensor<1x2x7x16xf32>
  func.return %present : tensor<1x2x7x16xf32>
}

// -----

// Not rewritten: the past is read by something else too (it would see the new row), and a
// concat that is not returned (no present to keep in place).
// CHECK-LABEL: func.func @main(%past: tensor<1x2x6x16xf32>, %new: tensor<1x2x1x16xf32>)
// CHECK:         nn.concat %past, %new
// CHECK:         nn.concat %new, %new
// CHECK-NOT:     nn.cache_append
func.func @main(%past: tensor<1x2x6x16xf32>, %new: tensor<1x2x1x16xf32>) -> (tensor<1x2x7x16xf32>, tensor<1x2x6x16xf32>, tensor<1x2x2x16xf32>) {
  %present = nn.concat %past, %new {axis = 2 : i64} : (tensor<1x2x6x16xf32>, tensor<1x2x1x16xf32>) -> tensor<1x2x7x16xf32>
  %two = nn.concat %new, %new {axis = 2 : i64} : (tensor<1x2x1x16xf32>, tensor<1x2x1x16xf32>) -> tensor<1x2x2x16xf32>
  %r = nn.relu %past : (tensor<1x2x6x16xf32>) -> tensor<1x2x6x16xf32>
  func.return %present, %r, %two : tensor<1x2x7x16xf32>, tensor<1x2x6x16xf32>, tensor<1x2x2x16xf32>
}
