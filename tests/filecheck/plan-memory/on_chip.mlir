// RUN: ascendir-opt %s -p plan-memory | filecheck %s

// Two phases of one AIV kernel: %a and %b are used only in the first loop, %c only in the second,
// %keep in both. %c reuses the bytes of %a (first fit, largest first); %keep, live throughout,
// gets its own. Offsets are multiples of UB's 32-B alignment.
// CHECK: %[[A:.*]] = ascend.alloc {offset = 0 : i64} : memref<64x256xf32, #ascend<space ub>>
// CHECK: %[[B:.*]] = ascend.alloc {offset = 98304 : i64} : memref<16x256xf32, #ascend<space ub>>
// CHECK: %[[C:.*]] = ascend.alloc {offset = 0 : i64} : memref<64x256xf32, #ascend<space ub>>
// CHECK: %[[K:.*]] = ascend.alloc {offset = 65536 : i64} : memref<32x256xf32, #ascend<space ub>>
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">, ascend.target = #ascend.target<"ascend910b2">} {
  ascend.kernel @two_phases(%x: memref<64x256xf32, #ascend<space gm>>, %y: memref<64x256xf32, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %a = ascend.alloc : memref<64x256xf32, #ascend<space ub>>
    %b = ascend.alloc : memref<16x256xf32, #ascend<space ub>>
    %c = ascend.alloc : memref<64x256xf32, #ascend<space ub>>
    %keep = ascend.alloc : memref<32x256xf32, #ascend<space ub>>
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    scf.for %i = %c0 to %c2 step %c1 {
      ascend.copy %x, %a : memref<64x256xf32, #ascend<space gm>>, memref<64x256xf32, #ascend<space ub>>
      ascend.pipe_barrier ALL
      ascend.vexp %a, %a : memref<64x256xf32, #ascend<space ub>>, memref<64x256xf32, #ascend<space ub>>
      ascend.vdup %b {scalar = 1.0 : f64} : memref<16x256xf32, #ascend<space ub>>
      ascend.vdup %keep {scalar = 2.0 : f64} : memref<32x256xf32, #ascend<space ub>>
    }
    scf.for %i = %c0 to %c2 step %c1 {
      ascend.vdup %c {scalar = 3.0 : f64} : memref<64x256xf32, #ascend<space ub>>
      ascend.vdup %keep {scalar = 4.0 : f64} : memref<32x256xf32, #ascend<space ub>>
      ascend.pipe_barrier ALL
      ascend.copy %c, %y : memref<64x256xf32, #ascend<space ub>>, memref<64x256xf32, #ascend<space gm>>
    }
    ascend.return
  }
}
