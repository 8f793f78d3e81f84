// RUN: ascendir-opt %s -p double-buffer 2>/dev/null | filecheck %s

// @ring: each iteration loads 16 new rows into one half of a 32-row UB window (the half
// alternating with the iteration) and stores the whole window: the other half still holds the
// previous iteration's rows. That is data carried from one iteration to the next, so the window
// must stay one buffer; ping-ponging it (as double-buffer did: the first op touching it writes
// it, through a subview) gave each slot only every other iteration's rows, and 112 of the 256
// output rows were wrong (tests/test_insert_sync.py runs it against numpy).
// CHECK-LABEL: ascend.kernel @ring
// CHECK-NOT:   ascend.slot
// CHECK:       ascend.return
//
// @whole: the same load through a subview that covers all of its buffer is a fresh tile per
// iteration: ping-ponged.
// CHECK-LABEL: ascend.kernel @whole
// CHECK:       ascend.alloc {ascend.slot = 0 : i64} : memref<16x128xf32, #ascend<space ub>>
// CHECK-NEXT:  ascend.alloc {ascend.slot = 1 : i64} : memref<16x128xf32, #ascend<space ub>>
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @ring(%x: memref<128x128xf32, #ascend<space gm>>, %z: memref<256x128xf32, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %acc = ascend.alloc : memref<32x128xf32, #ascend<space ub>>
    %c0 = arith.constant 0 : index
    %c2 = arith.constant 2 : index
    %c16 = arith.constant 16 : index
    %c32 = arith.constant 32 : index
    %c128 = arith.constant 128 : index
    scf.for %r = %c0 to %c128 step %c16 {
      %xs = memref.subview %x[%r, 0] [16, 128] [1, 1] : memref<128x128xf32, #ascend<space gm>> to memref<16x128xf32, strided<[128, 1], offset: ?>, #ascend<space gm>>
      %q = arith.remui %r, %c32 : index
      %h = memref.subview %acc[%q, 0] [16, 128] [1, 1] : memref<32x128xf32, #ascend<space ub>> to memref<16x128xf32, strided<[128, 1], offset: ?>, #ascend<space ub>>
      ascend.copy %xs, %h : memref<16x128xf32, strided<[128, 1], offset: ?>, #ascend<space gm>>, memref<16x128xf32, strided<[128, 1], offset: ?>, #ascend<space ub>>
      %r2 = arith.addi %r, %r : index
      %zs = memref.subview %z[%r2, 0] [32, 128] [1, 1] : memref<256x128xf32, #ascend<space gm>> to memref<32x128xf32, strided<[128, 1], offset: ?>, #ascend<space gm>>
      ascend.copy %acc, %zs : memref<32x128xf32, #ascend<space ub>>, memref<32x128xf32, strided<[128, 1], offset: ?>, #ascend<space gm>>
    }
    ascend.return
  }
  ascend.kernel @whole(%x: memref<128x128xf32, #ascend<space gm>>, %z: memref<128x128xf32, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %t = ascend.alloc : memref<16x128xf32, #ascend<space ub>>
    %c0 = arith.constant 0 : index
    %c16 = arith.constant 16 : index
    %c128 = arith.constant 128 : index
    scf.for %r = %c0 to %c128 step %c16 {
      %xs = memref.subview %x[%r, 0] [16, 128] [1, 1] : memref<128x128xf32, #ascend<space gm>> to memref<16x128xf32, strided<[128, 1], offset: ?>, #ascend<space gm>>
      %all = memref.subview %t[0, 0] [16, 128] [1, 1] : memref<16x128xf32, #ascend<space ub>> to memref<16x128xf32, strided<[128, 1]>, #ascend<space ub>>
      ascend.copy %xs, %all : memref<16x128xf32, strided<[128, 1], offset: ?>, #ascend<space gm>>, memref<16x128xf32, strided<[128, 1]>, #ascend<space ub>>
      %zs = memref.subview %z[%r, 0] [16, 128] [1, 1] : memref<128x128xf32, #ascend<space gm>> to memref<16x128xf32, strided<[128, 1], offset: ?>, #ascend<space gm>>
      ascend.copy %t, %zs : memref<16x128xf32, #ascend<space ub>>, memref<16x128xf32, strided<[128, 1], offset: ?>, #ascend<space gm>>
    }
    ascend.return
  }
}
