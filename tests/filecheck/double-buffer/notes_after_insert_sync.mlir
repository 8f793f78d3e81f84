// RUN: ascendir-opt %s -p insert-sync,double-buffer 2>%t.err | filecheck %s
// RUN: filecheck %s --check-prefix=NOTE --input-file %t.err

// double-buffer after insert-sync: the kernel has flags, so the pass leaves it alone (as it
// leaves the templates' pipelined kernels) and says why on stderr.
// CHECK:      ascend.set_flag
// CHECK-NOT:  ascend.slot
// NOTE:       ascendir-opt: note: double-buffer: kernel @add left single-buffered: it has sync flags already (insert-sync ran, or a template pipelined it): run double-buffer before insert-sync
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
