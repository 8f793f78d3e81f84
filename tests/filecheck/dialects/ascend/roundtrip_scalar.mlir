// RUN: ascendir-opt %s | ascendir-opt | filecheck %s
// RUN: ascendir-opt %s --print-op-generic | ascendir-opt | filecheck %s

// Round trip of ascend.get_value (ops_scalar.py): a GroupedMatmul's group list read from GM
// into the bounds of its row loop, and an i32 read from UB.

// CHECK:      ascend.kernel @groups(%g: memref<9xi64, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aic>} {
// CHECK-NEXT:   %c0 = arith.constant 0 : index
// CHECK-NEXT:   %c1 = arith.constant 1 : index
// CHECK-NEXT:   %c16 = arith.constant 16 : index
// CHECK-NEXT:   %lo = ascend.get_value %g[%c0] : memref<9xi64, #ascend<space gm>>
// CHECK-NEXT:   %hi = ascend.get_value %g[%c1] : memref<9xi64, #ascend<space gm>>
// CHECK-NEXT:   scf.for %m = %lo to %hi step %c16 {
// CHECK-NEXT:   }
// CHECK:      ascend.kernel @ub(%x: memref<4x8xi32, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
// CHECK-NEXT:   %c2 = arith.constant 2 : index
// CHECK-NEXT:   %u = ascend.alloc : memref<4x8xi32, #ascend<space ub>>
// CHECK-NEXT:   %v = ascend.get_value %u[%c2, %c2] : memref<4x8xi32, #ascend<space ub>>
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @groups(%g: memref<9xi64, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aic>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c16 = arith.constant 16 : index
    %lo = ascend.get_value %g[%c0] : memref<9xi64, #ascend<space gm>>
    %hi = ascend.get_value %g[%c1] : memref<9xi64, #ascend<space gm>>
    scf.for %m = %lo to %hi step %c16 {
    }
    ascend.return
  }
  ascend.kernel @ub(%x: memref<4x8xi32, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %c2 = arith.constant 2 : index
    %u = ascend.alloc : memref<4x8xi32, #ascend<space ub>>
    %v = ascend.get_value %u[%c2, %c2] : memref<4x8xi32, #ascend<space ub>>
    ascend.return
  }
}
