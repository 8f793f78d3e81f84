// RUN: ascendir-opt %s -p insert-sync 2>%t.err | filecheck %s
// RUN: filecheck %s --check-prefix=NOTE --input-file %t.err
// RUN: ascendir-opt %s -p insert-sync 2>/dev/null | filecheck %s --check-prefix=NONE

// A 910B mix kernel whose two AIVs each relu rows of x and store them to z, AIV 0 rows 0..39 and
// AIV 1 rows 32..63: both MTE3s write rows 32..39 of z. Within each AIV insert-sync adds the
// MTE2 -> V -> MTE3 hand-offs (units named), but the overlap between AIV 0's MTE3 and AIV 1's
// MTE3 would need a flag from a pipe to itself, which set_flag cannot say: the pass leaves it
// and a note names the kernel, both ops and the buffer. The MTE2 -> MTE3 pairs the first round
// adds (before V -> MTE3 orders the same) are still removed as redundant.
// CHECK:      ascend.set_flag MTE2 -> V, 0 {units = #ascend.flag_units<aiv -> aiv>}
// CHECK:      ascend.set_flag V -> MTE3, 0 {units = #ascend.flag_units<aiv -> aiv>}
// CHECK:      ascend.set_flag MTE2 -> V, 1 {units = #ascend.flag_units<aiv1 -> aiv1>}
// CHECK:      ascend.set_flag V -> MTE3, 1 {units = #ascend.flag_units<aiv1 -> aiv1>}
// NONE-NOT:  MTE3 -> MTE3
// NONE-NOT:  MTE2 -> MTE3
// NOTE:      ascendir-opt: note: insert-sync: kernel @halves: ascend.copy on aiv MTE3 then ascend.copy on aiv1 MTE3 (gm buffer %z) touch the same bytes unordered, and no set_flag joins one pipe to itself on another unit (left as it is)
// NOTE-EMPTY:
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @halves(%x: memref<64x128xf32, #ascend<space gm>>, %z: memref<64x128xf32, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<mix>} {
    %u0 = ascend.alloc : memref<40x128xf32, #ascend<space ub>>
    %u1 = ascend.alloc {subblock = 1 : i64} : memref<32x128xf32, #ascend<space ub>>
    %b = ascend.block_idx : index
    %x0 = memref.subview %x[0, 0] [40, 128] [1, 1] : memref<64x128xf32, #ascend<space gm>> to memref<40x128xf32, strided<[128, 1]>, #ascend<space gm>>
    %z0 = memref.subview %z[0, 0] [40, 128] [1, 1] : memref<64x128xf32, #ascend<space gm>> to memref<40x128xf32, strided<[128, 1]>, #ascend<space gm>>
    ascend.copy %x0, %u0 : memref<40x128xf32, strided<[128, 1]>, #ascend<space gm>>, memref<40x128xf32, #ascend<space ub>>
    ascend.vrelu %u0, %u0 : memref<40x128xf32, #ascend<space ub>>, memref<40x128xf32, #ascend<space ub>>
    ascend.copy %u0, %z0 : memref<40x128xf32, #ascend<space ub>>, memref<40x128xf32, strided<[128, 1]>, #ascend<space gm>>
    %x1 = memref.subview %x[32, 0] [32, 128] [1, 1] : memref<64x128xf32, #ascend<space gm>> to memref<32x128xf32, strided<[128, 1], offset: 4096>, #ascend<space gm>>
    %z1 = memref.subview %z[32, 0] [32, 128] [1, 1] : memref<64x128xf32, #ascend<space gm>> to memref<32x128xf32, strided<[128, 1], offset: 4096>, #ascend<space gm>>
    ascend.copy %x1, %u1 {subblock = 1 : i64} : memref<32x128xf32, strided<[128, 1], offset: 4096>, #ascend<space gm>>, memref<32x128xf32, #ascend<space ub>>
    ascend.vrelu %u1, %u1 {subblock = 1 : i64} : memref<32x128xf32, #ascend<space ub>>, memref<32x128xf32, #ascend<space ub>>
    ascend.copy %u1, %z1 {subblock = 1 : i64} : memref<32x128xf32, #ascend<space ub>>, memref<32x128xf32, strided<[128, 1], offset: 4096>, #ascend<space gm>>
    ascend.return
  }
}
