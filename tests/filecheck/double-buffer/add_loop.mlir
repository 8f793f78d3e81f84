// RUN: ascendir-opt %s -p double-buffer | filecheck %s
// RUN: ascendir-opt %s -p double-buffer,insert-sync | filecheck %s --check-prefix=SYNC

// The single-buffered z = x + y of insert-sync/add_loop.mlir: its three UB tiles are written
// first in every iteration (two loads, the vadd result), so each gets a second slot and the body
// runs on slot (iteration mod 2); the iteration number is iv / step (the lower bound is 0).
// CHECK:      %[[UX:.*]] = ascend.alloc {ascend.slot = 0 : i64} : memref<64x128xf16, #ascend<space ub>>
// CHECK-NEXT: %[[UX1:.*]] = ascend.alloc {ascend.slot = 1 : i64} : memref<64x128xf16, #ascend<space ub>>
// CHECK-NEXT: %[[UY:.*]] = ascend.alloc {ascend.slot = 0 : i64}
// CHECK-NEXT: %[[UY1:.*]] = ascend.alloc {ascend.slot = 1 : i64}
// CHECK-NEXT: %[[UZ:.*]] = ascend.alloc {ascend.slot = 0 : i64}
// CHECK-NEXT: %[[UZ1:.*]] = ascend.alloc {ascend.slot = 1 : i64}
// CHECK:      scf.for %[[R:.*]] = %{{.*}} to %{{.*}} step %[[ST:.*]] {
// CHECK:        %[[N:.*]] = arith.divui %[[R]], %[[ST]] : index
// CHECK-NEXT:   %[[P:.*]] = arith.remui %[[N]], %{{.*}} : index
// CHECK-NEXT:   %[[EVEN:.*]] = arith.cmpi eq, %[[P]], %{{.*}} : index
// CHECK-NEXT:   scf.if %[[EVEN]] {
// CHECK:          ascend.vadd %[[UX]], %[[UY]], %[[UZ]]
// CHECK:        } else {
// CHECK:          ascend.vadd %[[UX1]], %[[UY1]], %[[UZ1]]
// CHECK:        }
// CHECK-NOT:  ascend.set_flag

// With insert-sync: one event pair per slot for each dependence, so MTE2 fills one slot while V
// and MTE3 work on the other; every pair is primed before the loop and drained after it.
// SYNC:      ascend.set_flag V -> MTE2, 0
// SYNC-NEXT: ascend.set_flag MTE3 -> V, 0
// SYNC-NEXT: ascend.set_flag V -> MTE2, 1
// SYNC-NEXT: ascend.set_flag MTE3 -> V, 1
// SYNC-NEXT: scf.for
// SYNC:      scf.if
// SYNC:        ascend.wait_flag V -> MTE2, 0
// SYNC:        ascend.set_flag MTE2 -> V, 0
// SYNC-NEXT:   ascend.wait_flag MTE2 -> V, 0
// SYNC-NEXT:   ascend.wait_flag MTE3 -> V, 0
// SYNC-NEXT:   ascend.vadd
// SYNC-NEXT:   ascend.set_flag V -> MTE2, 0
// SYNC:        ascend.set_flag MTE3 -> V, 0
// SYNC-NEXT: } else {
// SYNC:        ascend.wait_flag V -> MTE2, 1
// SYNC:        ascend.set_flag MTE3 -> V, 1
// SYNC-NEXT: }
// SYNC-NEXT: }
// SYNC-NEXT: ascend.wait_flag MTE3 -> V, 1
// SYNC-NEXT: ascend.wait_flag V -> MTE2, 1
// SYNC-NEXT: ascend.wait_flag MTE3 -> V, 0
// SYNC-NEXT: ascend.wait_flag V -> MTE2, 0
// SYNC-NEXT: ascend.return
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
