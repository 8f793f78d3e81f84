// RUN: ascendir-opt %s -p double-buffer 2>%t.err | filecheck %s
// RUN: filecheck %s --check-prefix=NOTE --input-file %t.err
// RUN: ascendir-opt %s -p plan-memory,double-buffer 2>/dev/null | filecheck %s --check-prefix=PLAN

// A 910B mix kernel whose loop adds rows [r, r+96) on AIV 0 and rows [r+384, r+480) on AIV 1
// (the ops and UB buffers of AIV 1 carry subblock = 1). Each AIV has its own 196608 B of UB:
// doubled, each holds six 24576 B tiles (147456 B), so the loop is ping-ponged although the
// twelve tiles together (294912 B) would not fit one UB. The slot-1 twin of an AIV 1 buffer is an
// AIV 1 buffer too (the else-branch's AIV 1 ops use it).
// CHECK-LABEL: ascend.kernel @add
// CHECK:      %[[UX:.*]] = ascend.alloc {ascend.slot = 0 : i64} : memref<96x128xf16, #ascend<space ub>>
// CHECK-NEXT: %[[UX1:.*]] = ascend.alloc {ascend.slot = 1 : i64} : memref<96x128xf16, #ascend<space ub>>
// CHECK-NEXT: ascend.alloc {ascend.slot = 0 : i64}
// CHECK-NEXT: ascend.alloc {ascend.slot = 1 : i64}
// CHECK-NEXT: ascend.alloc {ascend.slot = 0 : i64}
// CHECK-NEXT: ascend.alloc {ascend.slot = 1 : i64}
// CHECK-NEXT: %[[VX:.*]] = ascend.alloc {subblock = 1 : i64, ascend.slot = 0 : i64} : memref<96x128xf16, #ascend<space ub>>
// CHECK-NEXT: %[[VX1:.*]] = ascend.alloc {subblock = 1 : i64, ascend.slot = 1 : i64} : memref<96x128xf16, #ascend<space ub>>
// CHECK-NEXT: ascend.alloc {subblock = 1 : i64, ascend.slot = 0 : i64}
// CHECK-NEXT: ascend.alloc {subblock = 1 : i64, ascend.slot = 1 : i64}
// CHECK-NEXT: ascend.alloc {subblock = 1 : i64, ascend.slot = 0 : i64}
// CHECK-NEXT: ascend.alloc {subblock = 1 : i64, ascend.slot = 1 : i64}
// CHECK:      scf.if
// CHECK:        ascend.copy %{{.*}}, %[[UX]] :
// CHECK:        ascend.copy %{{.*}}, %[[VX]] {subblock = 1 : i64}
// CHECK:      } else {
// CHECK:        ascend.copy %{{.*}}, %[[UX1]] :
// CHECK:        ascend.copy %{{.*}}, %[[VX1]] {subblock = 1 : i64}
// CHECK:      }

// @aiv1_only: the same loop on AIV 1 alone, with 64x192 f32 tiles (49152 B): second slots would
// need 294912 B of AIV 1's UB, so the loop stays single-buffered, and the note names the AIV.
// CHECK-LABEL: ascend.kernel @aiv1_only
// CHECK-NOT:   ascend.slot
// NOTE:       ascendir-opt: note: double-buffer: kernel @aiv1_only left single-buffered: the loop over %r: second slots for its 3 buffers (memref<64x192xf32, #ascend<space ub>>) need 294912 B of UB on AIV 1, 196608 B on ascend910b2
// NOTE-EMPTY:

// Planned first: double-buffer plans the kernel again, each AIV's UB apart (AIV 1's buffers
// start at 0, as AIV 0's do), and every twin gets bytes of its own.
// PLAN:      ascend.alloc {offset = 0 : i64, ascend.slot = 0 : i64} : memref<96x128xf16, #ascend<space ub>>
// PLAN-NEXT: ascend.alloc {ascend.slot = 1 : i64, offset = 24576 : i64} : memref<96x128xf16, #ascend<space ub>>
// PLAN-NEXT: ascend.alloc {offset = 49152 : i64, ascend.slot = 0 : i64} : memref<96x128xf16, #ascend<space ub>>
// PLAN-NEXT: ascend.alloc {ascend.slot = 1 : i64, offset = 73728 : i64} : memref<96x128xf16, #ascend<space ub>>
// PLAN-NEXT: ascend.alloc {offset = 98304 : i64, ascend.slot = 0 : i64} : memref<96x128xf16, #ascend<space ub>>
// PLAN-NEXT: ascend.alloc {ascend.slot = 1 : i64, offset = 122880 : i64} : memref<96x128xf16, #ascend<space ub>>
// PLAN-NEXT: ascend.alloc {subblock = 1 : i64, offset = 0 : i64, ascend.slot = 0 : i64} : memref<96x128xf16, #ascend<space ub>>
// PLAN-NEXT: ascend.alloc {subblock = 1 : i64, ascend.slot = 1 : i64, offset = 24576 : i64} : memref<96x128xf16, #ascend<space ub>>
// PLAN-NEXT: ascend.alloc {subblock = 1 : i64, offset = 49152 : i64, ascend.slot = 0 : i64} : memref<96x128xf16, #ascend<space ub>>
// PLAN-NEXT: ascend.alloc {subblock = 1 : i64, ascend.slot = 1 : i64, offset = 73728 : i64} : memref<96x128xf16, #ascend<space ub>>
// PLAN-NEXT: ascend.alloc {subblock = 1 : i64, offset = 98304 : i64, ascend.slot = 0 : i64} : memref<96x128xf16, #ascend<space ub>>
// PLAN-NEXT: ascend.alloc {subblock = 1 : i64, ascend.slot = 1 : i64, offset = 122880 : i64} : memref<96x128xf16, #ascend<space ub>>
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @add(%x: memref<768x128xf16, #ascend<space gm>>, %y: memref<768x128xf16, #ascend<space gm>>, %z: memref<768x128xf16, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<mix>} {
    %ux = ascend.alloc : memref<96x128xf16, #ascend<space ub>>
    %uy = ascend.alloc : memref<96x128xf16, #ascend<space ub>>
    %uz = ascend.alloc : memref<96x128xf16, #ascend<space ub>>
    %vx = ascend.alloc {subblock = 1 : i64} : memref<96x128xf16, #ascend<space ub>>
    %vy = ascend.alloc {subblock = 1 : i64} : memref<96x128xf16, #ascend<space ub>>
    %vz = ascend.alloc {subblock = 1 : i64} : memref<96x128xf16, #ascend<space ub>>
    %c0 = arith.constant 0 : index
    %c96 = arith.constant 96 : index
    %c384 = arith.constant 384 : index
    scf.for %r = %c0 to %c384 step %c96 {
      %xs = memref.subview %x[%r, 0] [96, 128] [1, 1] : memref<768x128xf16, #ascend<space gm>> to memref<96x128xf16, strided<[128, 1], offset: ?>, #ascend<space gm>>
      %ys = memref.subview %y[%r, 0] [96, 128] [1, 1] : memref<768x128xf16, #ascend<space gm>> to memref<96x128xf16, strided<[128, 1], offset: ?>, #ascend<space gm>>
      ascend.copy %xs, %ux : memref<96x128xf16, strided<[128, 1], offset: ?>, #ascend<space gm>>, memref<96x128xf16, #ascend<space ub>>
      ascend.copy %ys, %uy : memref<96x128xf16, strided<[128, 1], offset: ?>, #ascend<space gm>>, memref<96x128xf16, #ascend<space ub>>
      ascend.vadd %ux, %uy, %uz : memref<96x128xf16, #ascend<space ub>>, memref<96x128xf16, #ascend<space ub>>, memref<96x128xf16, #ascend<space ub>>
      %zs = memref.subview %z[%r, 0] [96, 128] [1, 1] : memref<768x128xf16, #ascend<space gm>> to memref<96x128xf16, strided<[128, 1], offset: ?>, #ascend<space gm>>
      ascend.copy %uz, %zs : memref<96x128xf16, #ascend<space ub>>, memref<96x128xf16, strided<[128, 1], offset: ?>, #ascend<space gm>>
      %r1 = arith.addi %r, %c384 : index
      %xs1 = memref.subview %x[%r1, 0] [96, 128] [1, 1] : memref<768x128xf16, #ascend<space gm>> to memref<96x128xf16, strided<[128, 1], offset: ?>, #ascend<space gm>>
      %ys1 = memref.subview %y[%r1, 0] [96, 128] [1, 1] : memref<768x128xf16, #ascend<space gm>> to memref<96x128xf16, strided<[128, 1], offset: ?>, #ascend<space gm>>
      ascend.copy %xs1, %vx {subblock = 1 : i64} : memref<96x128xf16, strided<[128, 1], offset: ?>, #ascend<space gm>>, memref<96x128xf16, #ascend<space ub>>
      ascend.copy %ys1, %vy {subblock = 1 : i64} : memref<96x128xf16, strided<[128, 1], offset: ?>, #ascend<space gm>>, memref<96x128xf16, #ascend<space ub>>
      ascend.vadd %vx, %vy, %vz {subblock = 1 : i64} : memref<96x128xf16, #ascend<space ub>>, memref<96x128xf16, #ascend<space ub>>, memref<96x128xf16, #ascend<space ub>>
      %zs1 = memref.subview %z[%r1, 0] [96, 128] [1, 1] : memref<768x128xf16, #ascend<space gm>> to memref<96x128xf16, strided<[128, 1], offset: ?>, #ascend<space gm>>
      ascend.copy %vz, %zs1 {subblock = 1 : i64} : memref<96x128xf16, #ascend<space ub>>, memref<96x128xf16, strided<[128, 1], offset: ?>, #ascend<space gm>>
    }
    ascend.return
  }
  ascend.kernel @aiv1_only(%x: memref<256x192xf32, #ascend<space gm>>, %y: memref<256x192xf32, #ascend<space gm>>, %z: memref<256x192xf32, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<mix>} {
    %vx = ascend.alloc {subblock = 1 : i64} : memref<64x192xf32, #ascend<space ub>>
    %vy = ascend.alloc {subblock = 1 : i64} : memref<64x192xf32, #ascend<space ub>>
    %vz = ascend.alloc {subblock = 1 : i64} : memref<64x192xf32, #ascend<space ub>>
    %c0 = arith.constant 0 : index
    %c64 = arith.constant 64 : index
    %c256 = arith.constant 256 : index
    scf.for %r = %c0 to %c256 step %c64 {
      %xs = memref.subview %x[%r, 0] [64, 192] [1, 1] : memref<256x192xf32, #ascend<space gm>> to memref<64x192xf32, strided<[192, 1], offset: ?>, #ascend<space gm>>
      %ys = memref.subview %y[%r, 0] [64, 192] [1, 1] : memref<256x192xf32, #ascend<space gm>> to memref<64x192xf32, strided<[192, 1], offset: ?>, #ascend<space gm>>
      ascend.copy %xs, %vx {subblock = 1 : i64} : memref<64x192xf32, strided<[192, 1], offset: ?>, #ascend<space gm>>, memref<64x192xf32, #ascend<space ub>>
      ascend.copy %ys, %vy {subblock = 1 : i64} : memref<64x192xf32, strided<[192, 1], offset: ?>, #ascend<space gm>>, memref<64x192xf32, #ascend<space ub>>
      ascend.vadd %vx, %vy, %vz {subblock = 1 : i64} : memref<64x192xf32, #ascend<space ub>>, memref<64x192xf32, #ascend<space ub>>, memref<64x192xf32, #ascend<space ub>>
      %zs = memref.subview %z[%r, 0] [64, 192] [1, 1] : memref<256x192xf32, #ascend<space gm>> to memref<64x192xf32, strided<[192, 1], offset: ?>, #ascend<space gm>>
      ascend.copy %vz, %zs {subblock = 1 : i64} : memref<64x192xf32, #ascend<space ub>>, memref<64x192xf32, strided<[192, 1], offset: ?>, #ascend<space gm>>
    }
    ascend.return
  }
}
