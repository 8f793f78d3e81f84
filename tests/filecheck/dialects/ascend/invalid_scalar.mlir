// RUN: ascendir-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Every verifier error of ascend.get_value (ops_scalar.py).

// CHECK: ascend.get_value: source in l1, expected gm or ub
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aic>} {
    %c0 = arith.constant 0 : index
    %l1 = ascend.alloc : memref<16xi64, #ascend<space l1>>
    %v = ascend.get_value %l1[%c0] : memref<16xi64, #ascend<space l1>>
    ascend.return
  }
}

// -----

// CHECK: ascend.get_value: source elements must be i32 or i64, got f32
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k(%x: memref<16xf32, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %c0 = arith.constant 0 : index
    %v = ascend.get_value %x[%c0] : memref<16xf32, #ascend<space gm>>
    ascend.return
  }
}

// -----

// CHECK: ascend.get_value: 1 indices for a rank-2 source
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k(%x: memref<4x4xi64, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %c0 = arith.constant 0 : index
    %v = ascend.get_value %x[%c0] : memref<4x4xi64, #ascend<space gm>>
    ascend.return
  }
}
