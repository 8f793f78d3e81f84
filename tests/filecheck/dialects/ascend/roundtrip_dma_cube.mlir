// RUN: ascendir-opt %s | ascendir-opt | filecheck %s
// RUN: ascendir-opt %s --print-op-generic | ascendir-opt | filecheck %s

// Round trip of the DMA and cube ops (ops_dma.py, ops_cube.py): ascend.copy with each typed
// #ascend.layout, i1 relu / transpose; ascend.mmad with init = true / false and a bias;
// ascend.gather_rows.

// CHECK:      builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
// CHECK-NEXT: ascend.kernel @dma(%x: memref<64x64xf16, #ascend<space gm>>, %y: memref<64x64xf32, #ascend<space gm>>, %tab: memref<100x64xf16, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<mix>} {
// CHECK-NEXT: %l1 = ascend.alloc : memref<64x64xf16, #ascend<space l1>>
// CHECK-NEXT: %l0a = ascend.alloc : memref<64x64xf16, #ascend<space l0a>>
// CHECK-NEXT: %l0b = ascend.alloc : memref<64x64xf16, #ascend<space l0b>>
// CHECK-NEXT: %l0c = ascend.alloc : memref<64x64xf32, #ascend<space l0c>>
// CHECK-NEXT: %bt = ascend.alloc : memref<1x64xf16, #ascend<space bt>>
// CHECK-NEXT: %ub = ascend.alloc : memref<64x64xf16, #ascend<space ub>>
// CHECK-NEXT: %idx = ascend.alloc : memref<16x1xi64, #ascend<space ub>>
// CHECK-NEXT: %rows = ascend.alloc : memref<16x64xf16, #ascend<space ub>>
// CHECK-NEXT: ascend.copy %x, %l1 {layout = #ascend.layout<nd2nz>} : memref<64x64xf16, #ascend<space gm>>, memref<64x64xf16, #ascend<space l1>>
// CHECK-NEXT: ascend.copy %x, %l1 {layout = #ascend.layout<nz>} : memref<64x64xf16, #ascend<space gm>>, memref<64x64xf16, #ascend<space l1>>
// CHECK-NEXT: ascend.copy %l1, %l0a : memref<64x64xf16, #ascend<space l1>>, memref<64x64xf16, #ascend<space l0a>>
// CHECK-NEXT: ascend.copy %l1, %l0b {transpose = true} : memref<64x64xf16, #ascend<space l1>>, memref<64x64xf16, #ascend<space l0b>>
// CHECK-NEXT: ascend.mmad %l0a, %l0b, %l0c {init = true} : memref<64x64xf16, #ascend<space l0a>>, memref<64x64xf16, #ascend<space l0b>>, memref<64x64xf32, #ascend<space l0c>>
// CHECK-NEXT: ascend.mmad %l0a, %l0b, %l0c {init = false} : memref<64x64xf16, #ascend<space l0a>>, memref<64x64xf16, #ascend<space l0b>>, memref<64x64xf32, #ascend<space l0c>>
// CHECK-NEXT: ascend.mmad %l0a, %l0b, %l0c bias(%bt : memref<1x64xf16, #ascend<space bt>>) {init = true} : memref<64x64xf16, #ascend<space l0a>>, memref<64x64xf16, #ascend<space l0b>>, memref<64x64xf32, #ascend<space l0c>>
// CHECK-NEXT: ascend.copy %l0c, %y {layout = #ascend.layout<nz2nd>, relu = true} : memref<64x64xf32, #ascend<space l0c>>, memref<64x64xf32, #ascend<space gm>>
// CHECK-NEXT: ascend.copy %l0c, %x {layout = #ascend.layout<nz2nd>} : memref<64x64xf32, #ascend<space l0c>>, memref<64x64xf16, #ascend<space gm>>
// CHECK-NEXT: ascend.copy %x, %ub {layout = #ascend.layout<nd>} : memref<64x64xf16, #ascend<space gm>>, memref<64x64xf16, #ascend<space ub>>
// CHECK-NEXT: ascend.copy %ub, %x : memref<64x64xf16, #ascend<space ub>>, memref<64x64xf16, #ascend<space gm>>
// CHECK-NEXT: ascend.gather_rows %tab, %idx, %rows : memref<100x64xf16, #ascend<space gm>>, memref<16x1xi64, #ascend<space ub>>, memref<16x64xf16, #ascend<space ub>>
// CHECK-NEXT: ascend.return
// CHECK-NEXT: }
// CHECK-NEXT: }
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @dma(%x: memref<64x64xf16, #ascend<space gm>>, %y: memref<64x64xf32, #ascend<space gm>>, %tab: memref<100x64xf16, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<mix>} {
    %l1 = ascend.alloc : memref<64x64xf16, #ascend<space l1>>
    %l0a = ascend.alloc : memref<64x64xf16, #ascend<space l0a>>
    %l0b = ascend.alloc : memref<64x64xf16, #ascend<space l0b>>
    %l0c = ascend.alloc : memref<64x64xf32, #ascend<space l0c>>
    %bt = ascend.alloc : memref<1x64xf16, #ascend<space bt>>
    %ub = ascend.alloc : memref<64x64xf16, #ascend<space ub>>
    %idx = ascend.alloc : memref<16x1xi64, #ascend<space ub>>
    %rows = ascend.alloc : memref<16x64xf16, #ascend<space ub>>
    ascend.copy %x, %l1 {layout = #ascend.layout<nd2nz>} : memref<64x64xf16, #ascend<space gm>>, memref<64x64xf16, #ascend<space l1>>
    ascend.copy %x, %l1 {layout = #ascend.layout<nz>} : memref<64x64xf16, #ascend<space gm>>, memref<64x64xf16, #ascend<space l1>>
    ascend.copy %l1, %l0a : memref<64x64xf16, #ascend<space l1>>, memref<64x64xf16, #ascend<space l0a>>
    ascend.copy %l1, %l0b {transpose = true} : memref<64x64xf16, #ascend<space l1>>, memref<64x64xf16, #ascend<space l0b>>
    ascend.mmad %l0a, %l0b, %l0c {init = true} : memref<64x64xf16, #ascend<space l0a>>, memref<64x64xf16, #ascend<space l0b>>, memref<64x64xf32, #ascend<space l0c>>
    ascend.mmad %l0a, %l0b, %l0c {init = false} : memref<64x64xf16, #ascend<space l0a>>, memref<64x64xf16, #ascend<space l0b>>, memref<64x64xf32, #ascend<space l0c>>
    ascend.mmad %l0a, %l0b, %l0c bias(%bt : memref<1x64xf16, #ascend<space bt>>) {init = true} : memref<64x64xf16, #ascend<space l0a>>, memref<64x64xf16, #ascend<space l0b>>, memref<64x64xf32, #ascend<space l0c>>
    ascend.copy %l0c, %y {layout = #ascend.layout<nz2nd>, relu = true} : memref<64x64xf32, #ascend<space l0c>>, memref<64x64xf32, #ascend<space gm>>
    ascend.copy %l0c, %x {layout = #ascend.layout<nz2nd>} : memref<64x64xf32, #ascend<space l0c>>, memref<64x64xf16, #ascend<space gm>>
    ascend.copy %x, %ub {layout = #ascend.layout<nd>} : memref<64x64xf16, #ascend<space gm>>, memref<64x64xf16, #ascend<space ub>>
    ascend.copy %ub, %x : memref<64x64xf16, #ascend<space ub>>, memref<64x64xf16, #ascend<space gm>>
    ascend.gather_rows %tab, %idx, %rows : memref<100x64xf16, #ascend<space gm>>, memref<16x1xi64, #ascend<space ub>>, memref<16x64xf16, #ascend<space ub>>
    ascend.return
  }
}
