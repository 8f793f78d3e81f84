// RUN: ascendir-opt %s --split-input-file --verify-diagnostics | filecheck %s
// RUN: not ascendir-opt %s --split-input-file 2>&1 | filecheck %s --check-prefix=ERR

// Each AIV of a 910B group has its own UB: an op of AIV 1 (subblock = 1) cannot touch a UB buffer
// of AIV 0 (an ascend.alloc without subblock), nor the reverse, also through a subview. The
// ascend.kernel verifier names the kernel, the op, its AIV and the buffer.

// CHECK: ascend.kernel @aiv1_on_aiv0: ascend.vadd on AIV 1 uses a UB buffer of AIV 0 (%a: memref<16x32xf32, #ascend<space ub>>); each AIV of a group has its own UB
// ERR: ascendir-opt: error: ascend.kernel @aiv1_on_aiv0: ascend.vadd on AIV 1 uses a UB buffer of AIV 0 (%a: memref<16x32xf32, #ascend<space ub>>); each AIV of a group has its own UB
// ERR-NOT: error
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @aiv1_on_aiv0() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<mix>} {
    %a = ascend.alloc : memref<16x32xf32, #ascend<space ub>>
    %b = ascend.alloc {subblock = 1 : i64} : memref<16x32xf32, #ascend<space ub>>
    ascend.vadd %b, %a, %b {subblock = 1 : i64} : memref<16x32xf32, #ascend<space ub>>, memref<16x32xf32, #ascend<space ub>>, memref<16x32xf32, #ascend<space ub>>
    ascend.return
  }
}

// -----

// CHECK: ascend.kernel @aiv0_on_aiv1: ascend.copy on AIV 0 uses a UB buffer of AIV 1 (%b: memref<16x32xf32, #ascend<space ub>>); each AIV of a group has its own UB
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @aiv0_on_aiv1(%x: memref<16x32xf32, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<mix>} {
    %b = ascend.alloc {subblock = 1 : i64} : memref<16x32xf32, #ascend<space ub>>
    %v = memref.subview %b[8, 0] [8, 32] [1, 1] : memref<16x32xf32, #ascend<space ub>> to memref<8x32xf32, strided<[32, 1], offset: 256>, #ascend<space ub>>
    %xv = memref.subview %x[0, 0] [8, 32] [1, 1] : memref<16x32xf32, #ascend<space gm>> to memref<8x32xf32, strided<[32, 1]>, #ascend<space gm>>
    ascend.copy %xv, %v : memref<8x32xf32, strided<[32, 1]>, #ascend<space gm>>, memref<8x32xf32, strided<[32, 1], offset: 256>, #ascend<space ub>>
    ascend.return
  }
}

// -----

// Each AIV on its own buffers verifies.
// CHECK-LABEL: ascend.kernel @own
// CHECK: ascend.vadd %{{.*}}, %{{.*}}, %{{.*}} {subblock = 1 : i64}
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @own() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<mix>} {
    %a = ascend.alloc : memref<16x32xf32, #ascend<space ub>>
    %b = ascend.alloc {subblock = 1 : i64} : memref<16x32xf32, #ascend<space ub>>
    ascend.vadd %a, %a, %a : memref<16x32xf32, #ascend<space ub>>, memref<16x32xf32, #ascend<space ub>>, memref<16x32xf32, #ascend<space ub>>
    ascend.vadd %b, %b, %b {subblock = 1 : i64} : memref<16x32xf32, #ascend<space ub>>, memref<16x32xf32, #ascend<space ub>>, memref<16x32xf32, #ascend<space ub>>
    ascend.return
  }
}
