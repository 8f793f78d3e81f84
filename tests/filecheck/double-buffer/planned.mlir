// RUN: ascendir-opt %s -p plan-memory,double-buffer | filecheck %s
// RUN: ascendir-opt %s -p plan-memory,double-buffer,insert-sync | filecheck %s --check-prefix=SYNC

// double-buffer after plan-memory: the single-buffered add of add_loop.mlir was planned (three
// UB tiles at 0, 16384, 32768); ping-ponging adds a slot-1 twin of each, which lives with its
// original, so the pass plans the kernel again: every UB buffer gets its own 16 KiB (no IR is left
// half planned, no twin shares bytes with the buffer it alternates with).
// CHECK:      ascend.alloc {offset = 0 : i64, ascend.slot = 0 : i64} : memref<64x128xf16, #ascend<space ub>>
// CHECK-NEXT: ascend.alloc {ascend.slot = 1 : i64, offset = 16384 : i64} : memref<64x128xf16, #ascend<space ub>>
// CHECK-NEXT: ascend.alloc {offset = 32768 : i64, ascend.slot = 0 : i64} : memref<64x128xf16, #ascend<space ub>>
// CHECK-NEXT: ascend.alloc {ascend.slot = 1 : i64, offset = 49152 : i64} : memref<64x128xf16, #ascend<space ub>>
// CHECK-NEXT: ascend.alloc {offset = 65536 : i64, ascend.slot = 0 : i64} : memref<64x128xf16, #ascend<space ub>>
// CHECK-NEXT: ascend.alloc {ascend.slot = 1 : i64, offset = 81920 : i64} : memref<64x128xf16, #ascend<space ub>>
// CHECK-NOT:  ascend.alloc

// insert-sync then pairs each slot as in add_loop.mlir.
// SYNC:      ascend.set_flag V -> MTE2, 0
// SYNC:      ascend.set_flag V -> MTE2, 1
// SYNC:      scf.for
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @add(%x: memref<256x128xf16, #ascend<space gm>>, %y: memref<256x128xf16, #ascend<space gm>>, %z: memref<256x128xf16, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %ux = ascend.alloc : memref<64x128xf16, #ascend<space ub>>
    %uy = ascend.alloc : memref<64x128xf16, #ascend<space ub>>
    %uz = ascend.alloc : memref<64x128xf16, #ascend<space ub>>
    %c0 = arith.constant 0 : index
    %c64 = arith.constant 64 : index
    %c256 = arith.constant 256 : index
    %b = ascend.block_idx : index
    scf.for %r = %c0 to %c256 step %c64 {
      %xs = memref.subview %x[%r, 0] [64, 128] [1, 1] : memref<256x128xf16, #ascend<space gm>> to memref<64x128xf16, strided<[128, 1], offset: ?>, #ascend<space gm>>
      %ys = memref.subview %y[%r, 0] [64, 128] [1, 1] : memref<256x128xf16, #ascend<space gm>> to memref<64x128xf16, strided<[128, 1], offset: ?>, #ascend<space gm>>
      ascend.copy %xs, %ux : memref<64x128xf16, strided<[128, 1], offset: ?>, #ascend<space gm>>, memref<64x128xf16, #ascend<space ub>>
      ascend.copy %ys, %uy : memref<64x128xf16, strided<[128, 1], offset: ?>, #ascend<space gm>>, memref<64x128xf16, #ascend<space ub>>
      ascend.vadd %ux, %uy, %uz : memref<64x128xf16, #ascend<space ub>>, memref<64x128xf16, #ascend<space ub>>, memref<64x128xf16, #ascend<space ub>>
      %zs = memref.subview %z[%r, 0] [64, 128] [1, 1] : memref<256x128xf16, #ascend<space gm>> to memref<64x128xf16, strided<[128, 1], offset: ?>, #ascend<space gm>>
      ascend.copy %uz, %zs : memref<64x128xf16, #ascend<space ub>>, memref<64x128xf16, strided<[128, 1], offset: ?>, #ascend<space gm>>
    }
    ascend.return
  }
}
