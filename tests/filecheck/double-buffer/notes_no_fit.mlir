// RUN: ascendir-opt %s -p double-buffer 2>%t.err | filecheck %s
// RUN: filecheck %s --check-prefix=NOTE --input-file %t.err
// RUN: ascendir-opt %s -p "double-buffer{quiet=true}" 2>%t.quiet | filecheck %s
// RUN: filecheck %s --check-prefix=QUIET --allow-empty --input-file %t.quiet

// add_loop.mlir with 64x192 f32 tiles: three UB tiles of 49152 B fit the 910B2's 196608 B of UB,
// their second slots do not (6 x 49152 = 294912 B). The loop stays single-buffered, and the pass
// says so on stderr instead of printing the module back silently.
// CHECK-NOT:  ascend.slot
// CHECK-NOT:  scf.if
// NOTE:       ascendir-opt: note: double-buffer: kernel @add left single-buffered: the loop over %r: second slots for its 3 buffers (memref<64x192xf32, #ascend<space ub>>) need 294912 B of UB, 196608 B on ascend910b2
// NOTE-EMPTY:
// QUIET-NOT:  note
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @add(%x: memref<256x192xf32, #ascend<space gm>>, %y: memref<256x192xf32, #ascend<space gm>>, %z: memref<256x192xf32, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %ux = ascend.alloc : memref<64x192xf32, #ascend<space ub>>
    %uy = ascend.alloc : memref<64x192xf32, #ascend<space ub>>
    %uz = ascend.alloc : memref<64x192xf32, #ascend<space ub>>
    %c0 = arith.constant 0 : index
    %c64 = arith.constant 64 : index
    %c256 = arith.constant 256 : index
    %b = ascend.block_idx : index
    scf.for %r = %c0 to %c256 step %c64 {
      %xs = memref.subview %x[%r, 0] [64, 192] [1, 1] : memref<256x192xf32, #ascend<space gm>> to memref<64x192xf32, strided<[192, 1], offset: ?>, #ascend<space gm>>
      %ys = memref.subview %y[%r, 0] [64, 192] [1, 1] : memref<256x192xf32, #ascend<space gm>> to memref<64x192xf32, strided<[192, 1], offset: ?>, #ascend<space gm>>
      ascend.copy %xs, %ux : memref<64x192xf32, strided<[192, 1], offset: ?>, #ascend<space gm>>, memref<64x192xf32, #ascend<space ub>>
      ascend.copy %ys, %uy : memref<64x192xf32, strided<[192, 1], offset: ?>, #ascend<space gm>>, memref<64x192xf32, #ascend<space ub>>
      ascend.vadd %ux, %uy, %uz : memref<64x192xf32, #ascend<space ub>>, memref<64x192xf32, #ascend<space ub>>, memref<64x192xf32, #ascend<space ub>>
      %zs = memref.subview %z[%r, 0] [64, 192] [1, 1] : memref<256x192xf32, #ascend<space gm>> to memref<64x192xf32, strided<[192, 1], offset: ?>, #ascend<space gm>>
      ascend.copy %uz, %zs : memref<64x192xf32, #ascend<space ub>>, memref<64x192xf32, strided<[192, 1], offset: ?>, #ascend<space gm>>
    }
    ascend.return
  }
}
