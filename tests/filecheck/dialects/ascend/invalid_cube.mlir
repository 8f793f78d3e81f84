// RUN: ascendir-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Every verifier error of ascend.mmad (ops_cube.py).

// CHECK: ascend.mmad: operand in ub, expected l0a
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aic>} {
    %a = ascend.alloc : memref<16x32xf16, #ascend<space ub>>
    %b = ascend.alloc : memref<32x16xf16, #ascend<space l0b>>
    %c = ascend.alloc : memref<16x16xf32, #ascend<space l0c>>
    ascend.mmad %a, %b, %c {init = true} : memref<16x32xf16, #ascend<space ub>>, memref<32x16xf16, #ascend<space l0b>>, memref<16x16xf32, #ascend<space l0c>>
    ascend.return
  }
}

// -----

// CHECK: ascend.mmad: shapes [16,32] x [16,16] -> [16,16] do not match
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aic>} {
    %a = ascend.alloc : memref<16x32xf16, #ascend<space l0a>>
    %b = ascend.alloc : memref<16x16xf16, #ascend<space l0b>>
    %c = ascend.alloc : memref<16x16xf32, #ascend<space l0c>>
    ascend.mmad %a, %b, %c {init = true} : memref<16x32xf16, #ascend<space l0a>>, memref<16x16xf16, #ascend<space l0b>>, memref<16x16xf32, #ascend<space l0c>>
    ascend.return
  }
}

// -----

// CHECK: ascend.mmad: M=8, N=16 must be multiples of 16 and K=32 of 16
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aic>} {
    %a = ascend.alloc : memref<8x32xf16, #ascend<space l0a>>
    %b = ascend.alloc : memref<32x16xf16, #ascend<space l0b>>
    %c = ascend.alloc : memref<8x16xf32, #ascend<space l0c>>
    ascend.mmad %a, %b, %c {init = true} : memref<8x32xf16, #ascend<space l0a>>, memref<32x16xf16, #ascend<space l0b>>, memref<8x16xf32, #ascend<space l0c>>
    ascend.return
  }
}

// -----

// CHECK: ascend.mmad: M, N, K must be <= 4095
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aic>} {
    %a = ascend.alloc : memref<16x4096xf16, #ascend<space l0a>>
    %b = ascend.alloc : memref<4096x16xf16, #ascend<space l0b>>
    %c = ascend.alloc : memref<16x16xf32, #ascend<space l0c>>
    ascend.mmad %a, %b, %c {init = true} : memref<16x4096xf16, #ascend<space l0a>>, memref<4096x16xf16, #ascend<space l0b>>, memref<16x16xf32, #ascend<space l0c>>
    ascend.return
  }
}

// -----

// CHECK: ascend.mmad: L0A and L0B element types differ
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aic>} {
    %a = ascend.alloc : memref<16x32xf16, #ascend<space l0a>>
    %b = ascend.alloc : memref<32x16xbf16, #ascend<space l0b>>
    %c = ascend.alloc : memref<16x16xf32, #ascend<space l0c>>
    ascend.mmad %a, %b, %c {init = true} : memref<16x32xf16, #ascend<space l0a>>, memref<32x16xbf16, #ascend<space l0b>>, memref<16x16xf32, #ascend<space l0c>>
    ascend.return
  }
}

// -----

// CHECK: ascend.mmad: bias must be a [1, 16] BT buffer
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aic>} {
    %a = ascend.alloc : memref<16x32xf16, #ascend<space l0a>>
    %b = ascend.alloc : memref<32x16xf16, #ascend<space l0b>>
    %c = ascend.alloc : memref<16x16xf32, #ascend<space l0c>>
    %bt = ascend.alloc : memref<1x32xf16, #ascend<space bt>>
    ascend.mmad %a, %b, %c bias(%bt : memref<1x32xf16, #ascend<space bt>>) {init = true} : memref<16x32xf16, #ascend<space l0a>>, memref<32x16xf16, #ascend<space l0b>>, memref<16x16xf32, #ascend<space l0c>>
    ascend.return
  }
}

// -----

// CHECK: ascend.mmad: bias element type must be that of a or f32
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aic>} {
    %a = ascend.alloc : memref<16x32xf16, #ascend<space l0a>>
    %b = ascend.alloc : memref<32x16xf16, #ascend<space l0b>>
    %c = ascend.alloc : memref<16x16xf32, #ascend<space l0c>>
    %bt = ascend.alloc : memref<1x16xbf16, #ascend<space bt>>
    ascend.mmad %a, %b, %c bias(%bt : memref<1x16xbf16, #ascend<space bt>>) {init = true} : memref<16x32xf16, #ascend<space l0a>>, memref<32x16xf16, #ascend<space l0b>>, memref<16x16xf32, #ascend<space l0c>>
    ascend.return
  }
}

// -----

// CHECK: ascend.mmad: bias is the initial value, so it needs init = true
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aic>} {
    %a = ascend.alloc : memref<16x32xf16, #ascend<space l0a>>
    %b = ascend.alloc : memref<32x16xf16, #ascend<space l0b>>
    %c = ascend.alloc : memref<16x16xf32, #ascend<space l0c>>
    %bt = ascend.alloc : memref<1x16xf16, #ascend<space bt>>
    ascend.mmad %a, %b, %c bias(%bt : memref<1x16xf16, #ascend<space bt>>) {init = false} : memref<16x32xf16, #ascend<space l0a>>, memref<32x16xf16, #ascend<space l0b>>, memref<16x16xf32, #ascend<space l0c>>
    ascend.return
  }
}
