// RUN: ascendir-opt %s -p insert-sync | filecheck %s

// The z = x + y loop of add_loop.mlir as insert-sync leaves it, plus an MTE2 -> MTE3 hand-off
// before the store: the store reads only uz, which V wrote after waiting for MTE2, so the event
// orders nothing the others do not already order. insert-sync removes it and keeps the rest.
// CHECK-NOT:  MTE2 -> MTE3
// CHECK:      ascend.set_flag V -> MTE2, 0
// CHECK-NEXT: ascend.set_flag MTE3 -> V, 0
// CHECK-NOT:  MTE2 -> MTE3
// CHECK:      ascend.set_flag V -> MTE3, 0
// CHECK-NEXT: ascend.wait_flag V -> MTE3, 0
// CHECK-NOT:  MTE2 -> MTE3
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @add(%x: memref<256x128xf16, #ascend<space gm>>, %y: memref<256x128xf16, #ascend<space gm>>, %z: memref<256x128xf16, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %ux = ascend.alloc : memref<64x128xf16, #ascend<space ub>>
    %uy = ascend.alloc : memref<64x128xf16, #ascend<space ub>>
    %uz = ascend.alloc : memref<64x128xf16, #ascend<space ub>>
    %c0 = arith.constant 0 : index
    %c64 = arith.constant 64 : index
    %c256 = arith.constant 256 : index
    %b = ascend.block_idx : index
    ascend.set_flag V -> MTE2, 0
    ascend.set_flag MTE3 -> V, 0
    scf.for %r = %c0 to %c256 step %c64 {
      %xs = memref.subview %x[%r, 0] [64, 128] [1, 1] : memref<256x128xf16, #ascend<space gm>> to memref<64x128xf16, strided<[128, 1], offset: ?>, #ascend<space gm>>
      %ys = memref.subview %y[%r, 0] [64, 128] [1, 1] : memref<256x128xf16, #ascend<space gm>> to memref<64x128xf16, strided<[128, 1], offset: ?>, #ascend<space gm>>
      ascend.wait_flag V -> MTE2, 0
      ascend.copy %xs, %ux : memref<64x128xf16, strided<[128, 1], offset: ?>, #ascend<space gm>>, memref<64x128xf16, #ascend<space ub>>
      ascend.copy %ys, %uy : memref<64x128xf16, strided<[128, 1], offset: ?>, #ascend<space gm>>, memref<64x128xf16, #ascend<space ub>>
      ascend.set_flag MTE2 -> V, 0
      ascend.wait_flag MTE2 -> V, 0
      ascend.wait_flag MTE3 -> V, 0
      ascend.vadd %ux, %uy, %uz : memref<64x128xf16, #ascend<space ub>>, memref<64x128xf16, #ascend<space ub>>, memref<64x128xf16, #ascend<space ub>>
      ascend.set_flag V -> MTE2, 0
      %zs = memref.subview %z[%r, 0] [64, 128] [1, 1] : memref<256x128xf16, #ascend<space gm>> to memref<64x128xf16, strided<[128, 1], offset: ?>, #ascend<space gm>>
      ascend.set_flag MTE2 -> MTE3, 3
      ascend.wait_flag MTE2 -> MTE3, 3
      ascend.set_flag V -> MTE3, 0
      ascend.wait_flag V -> MTE3, 0
      ascend.copy %uz, %zs : memref<64x128xf16, #ascend<space ub>>, memref<64x128xf16, strided<[128, 1], offset: ?>, #ascend<space gm>>
      ascend.set_flag MTE3 -> V, 0
    }
    ascend.wait_flag MTE3 -> V, 0
    ascend.wait_flag V -> MTE2, 0
    ascend.return
  }
}

