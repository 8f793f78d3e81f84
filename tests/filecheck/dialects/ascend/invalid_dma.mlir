// RUN: ascendir-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Every verifier error of the DMA ops (ops_dma.py) and of placement's copy paths.

// CHECK: no DMA path gm -> gm on dav-c220
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k(%x: memref<16x16xf16, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    ascend.copy %x, %x : memref<16x16xf16, #ascend<space gm>>, memref<16x16xf16, #ascend<space gm>>
    ascend.return
  }
}

// -----

// CHECK: no DMA path l0c -> ub on dav-c220
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<mix>} {
    %c = ascend.alloc : memref<16x16xf32, #ascend<space l0c>>
    %u = ascend.alloc : memref<16x16xf32, #ascend<space ub>>
    ascend.copy %c, %u : memref<16x16xf32, #ascend<space l0c>>, memref<16x16xf32, #ascend<space ub>>
    ascend.return
  }
}

// -----

// CHECK: ascend.copy: ranks differ
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k(%x: memref<256xf32, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %u = ascend.alloc : memref<16x16xf32, #ascend<space ub>>
    ascend.copy %x, %u : memref<256xf32, #ascend<space gm>>, memref<16x16xf32, #ascend<space ub>>
    ascend.return
  }
}

// -----

// CHECK: ascend.copy: only FixPipe (L0C out) may change the element type
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k(%x: memref<16x16xf16, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %u = ascend.alloc : memref<16x16xf32, #ascend<space ub>>
    ascend.copy %x, %u : memref<16x16xf16, #ascend<space gm>>, memref<16x16xf32, #ascend<space ub>>
    ascend.return
  }
}

// -----

// CHECK: ascend.copy: relu is applied by FixPipe only
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k(%x: memref<16x16xf32, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %u = ascend.alloc : memref<16x16xf32, #ascend<space ub>>
    ascend.copy %x, %u {relu = true} : memref<16x16xf32, #ascend<space gm>>, memref<16x16xf32, #ascend<space ub>>
    ascend.return
  }
}

// -----

// CHECK: ascend.copy: layout nz is a GM -> L1 load of NZ-stored data only
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k(%x: memref<16x16xf16, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %u = ascend.alloc : memref<16x16xf16, #ascend<space ub>>
    ascend.copy %x, %u {layout = #ascend.layout<nz>} : memref<16x16xf16, #ascend<space gm>>, memref<16x16xf16, #ascend<space ub>>
    ascend.return
  }
}

// -----

// CHECK: ascend.copy: transpose is a 2-D L1 -> L0A/L0B load (MTE1) only
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k(%x: memref<16x16xf32, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %u = ascend.alloc : memref<16x16xf32, #ascend<space ub>>
    ascend.copy %x, %u {transpose = true} : memref<16x16xf32, #ascend<space gm>>, memref<16x16xf32, #ascend<space ub>>
    ascend.return
  }
}

// -----

// CHECK: ascend.gather_rows: table in GM, indices and dest in UB
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %i = ascend.alloc : memref<4x1xi64, #ascend<space ub>>
    %d = ascend.alloc : memref<4x16xf32, #ascend<space ub>>
    ascend.gather_rows %d, %i, %d : memref<4x16xf32, #ascend<space ub>>, memref<4x1xi64, #ascend<space ub>>, memref<4x16xf32, #ascend<space ub>>
    ascend.return
  }
}
