// RUN: ascendir-opt %s -p insert-sync | filecheck %s

// A single-buffered z = x + y over 4 row tiles with no flags: MTE2 loads, V adds, MTE3 stores.
// insert-sync adds the RAW hand-offs MTE2 -> V (one pair covers both loads) and V -> MTE3 inside
// the loop, and the WAR
// dependences of the next iteration (V must have read ux/uy before MTE2 overwrites them, MTE3
// must have read uz before V overwrites it) as loop-carried pairs: primed before the loop,
// waited at the top of the body, set after the last reader, drained after the loop.
// CHECK:      ascend.set_flag V -> MTE2, 0
// CHECK-NEXT: ascend.set_flag MTE3 -> V, 0
// CHECK-NEXT: scf.for
// CHECK:        ascend.wait_flag V -> MTE2, 0
// CHECK-NEXT:   ascend.copy %{{.*}}, %[[UX:.*]] :
// CHECK-NEXT:   ascend.copy %{{.*}}, %[[UY:.*]] :
// CHECK-NEXT:   ascend.set_flag MTE2 -> V, 0
// CHECK-NEXT:   ascend.wait_flag MTE2 -> V, 0
// CHECK-NEXT:   ascend.wait_flag MTE3 -> V, 0
// CHECK-NEXT:   ascend.vadd %[[UX]], %[[UY]], %[[UZ:.*]] :
// CHECK-NEXT:   ascend.set_flag V -> MTE2, 0
// CHECK-NEXT:   memref.subview
// CHECK-NEXT:   ascend.set_flag V -> MTE3, 0
// CHECK-NEXT:   ascend.wait_flag V -> MTE3, 0
// CHECK-NEXT:   ascend.copy %[[UZ]], %{{.*}} :
// CHECK-NEXT:   ascend.set_flag MTE3 -> V, 0
// CHECK-NEXT: }
// CHECK-NEXT: ascend.wait_flag MTE3 -> V, 0
// CHECK-NEXT: ascend.wait_flag V -> MTE2, 0
// CHECK-NEXT: ascend.return
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
