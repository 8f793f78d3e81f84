// RUN: ascendir-opt %s -p insert-sync 2>%t.err | filecheck %s
// RUN: filecheck %s --check-prefix=QUIET --allow-empty --input-file %t.err
// RUN: ascendir-opt %s -p plan-memory,insert-sync 2>%t.plan.err | filecheck %s
// RUN: filecheck %s --check-prefix=QUIET --allow-empty --input-file %t.plan.err

// A 910B mix kernel without flags: z = relu(a @ b), 4 row tiles of 64. Per tile the AIC loads
// the a tile (MTE2), moves it and b to L0A/L0B (MTE1), multiplies (M) and writes the product to a
// GM workspace (FIX); AIV 0 relus rows 0..31 of the workspace (MTE2 -> V -> MTE3), AIV 1
// (subblock = 1) rows 32..63. insert-sync orders, with flags naming their units:
// * within the AIC: the RAW hand-offs MTE2 -> MTE1 -> M -> FIX and the next tile's WARs
//   (MTE1 -> MTE2 on l1a, M -> MTE1 on l0a, FIX -> M on l0c) as loop-carried pairs;
// * within each AIV: MTE2 -> V -> MTE3 hand-offs and the WARs V -> MTE2, MTE3 -> V, each AIV
//   with its own event ids (the interpreter matches a flag by pipes and id, not by units);
// * across units through GM: FixPipe's workspace write before each AIV's read (FIX -> MTE2,
//   aic->aiv and aic->aiv1: two ids, a hand-off id is shared only between the same units), and
//   each AIV's read before the next tile's FixPipe write (MTE2 -> FIX, aiv->aic / aiv1->aic).
// Planned first (plan-memory puts u0 and u1 at byte 0 of their own AIV's UB) nothing changes:
// the AIVs' UBs are apart, and nothing is left for a note.
// CHECK:      ascend.copy %b, %[[L1B:.*]] {layout = #ascend.layout<nd2nz>}
// CHECK-NEXT: ascend.set_flag MTE1 -> MTE2, 0 {units = #ascend.flag_units<aic -> aic>}
// CHECK-NEXT: ascend.set_flag M -> MTE1, 0 {units = #ascend.flag_units<aic -> aic>}
// CHECK-NEXT: ascend.set_flag FIX -> M, 0 {units = #ascend.flag_units<aic -> aic>}
// CHECK-NEXT: ascend.set_flag MTE2 -> FIX, 0 {units = #ascend.flag_units<aiv -> aic>}
// CHECK-NEXT: ascend.set_flag MTE2 -> FIX, 1 {units = #ascend.flag_units<aiv1 -> aic>}
// CHECK-NEXT: ascend.set_flag V -> MTE2, 0 {units = #ascend.flag_units<aiv -> aiv>}
// CHECK-NEXT: ascend.set_flag MTE3 -> V, 0 {units = #ascend.flag_units<aiv -> aiv>}
// CHECK-NEXT: ascend.set_flag V -> MTE2, 1 {units = #ascend.flag_units<aiv1 -> aiv1>}
// CHECK-NEXT: ascend.set_flag MTE3 -> V, 1 {units = #ascend.flag_units<aiv1 -> aiv1>}
// CHECK-NEXT: scf.for
// CHECK:        ascend.wait_flag MTE1 -> MTE2, 0 {units = #ascend.flag_units<aic -> aic>}
// CHECK-NEXT:   ascend.copy %{{.*}}, %[[L1A:.*]] {layout = #ascend.layout<nd2nz>}
// CHECK-NEXT:   ascend.set_flag MTE2 -> MTE1, 0 {units = #ascend.flag_units<aic -> aic>}
// CHECK-NEXT:   ascend.wait_flag MTE2 -> MTE1, 0 {units = #ascend.flag_units<aic -> aic>}
// CHECK-NEXT:   ascend.wait_flag M -> MTE1, 0 {units = #ascend.flag_units<aic -> aic>}
// CHECK-NEXT:   ascend.copy %[[L1A]], %[[L0A:.*]] :
// CHECK-NEXT:   ascend.set_flag MTE1 -> MTE2, 0 {units = #ascend.flag_units<aic -> aic>}
// CHECK-NEXT:   ascend.copy %[[L1B]], %[[L0B:.*]] :
// CHECK-NEXT:   ascend.set_flag MTE1 -> M, 0 {units = #ascend.flag_units<aic -> aic>}
// CHECK-NEXT:   ascend.wait_flag MTE1 -> M, 0 {units = #ascend.flag_units<aic -> aic>}
// CHECK-NEXT:   ascend.wait_flag FIX -> M, 0 {units = #ascend.flag_units<aic -> aic>}
// CHECK-NEXT:   ascend.mmad %[[L0A]], %[[L0B]], %[[L0C:.*]] {init = true}
// CHECK-NEXT:   ascend.set_flag M -> MTE1, 0 {units = #ascend.flag_units<aic -> aic>}
// CHECK-NEXT:   ascend.set_flag M -> FIX, 0 {units = #ascend.flag_units<aic -> aic>}
// CHECK-NEXT:   ascend.wait_flag M -> FIX, 0 {units = #ascend.flag_units<aic -> aic>}
// CHECK-NEXT:   ascend.wait_flag MTE2 -> FIX, 0 {units = #ascend.flag_units<aiv -> aic>}
// CHECK-NEXT:   ascend.wait_flag MTE2 -> FIX, 1 {units = #ascend.flag_units<aiv1 -> aic>}
// CHECK-NEXT:   ascend.copy %[[L0C]], %[[WS:.*]] :
// CHECK-NEXT:   ascend.set_flag FIX -> M, 0 {units = #ascend.flag_units<aic -> aic>}
// CHECK-NEXT:   memref.subview %[[WS]][0, 0]
// CHECK-NEXT:   ascend.set_flag FIX -> MTE2, 0 {units = #ascend.flag_units<aic -> aiv>}
// CHECK-NEXT:   ascend.wait_flag FIX -> MTE2, 0 {units = #ascend.flag_units<aic -> aiv>}
// CHECK-NEXT:   ascend.wait_flag V -> MTE2, 0 {units = #ascend.flag_units<aiv -> aiv>}
// CHECK-NEXT:   ascend.copy %{{.*}}, %[[U0:.*]] :
// CHECK-NEXT:   ascend.set_flag MTE2 -> FIX, 0 {units = #ascend.flag_units<aiv -> aic>}
// CHECK-NEXT:   ascend.set_flag MTE2 -> V, 0 {units = #ascend.flag_units<aiv -> aiv>}
// CHECK-NEXT:   ascend.wait_flag MTE2 -> V, 0 {units = #ascend.flag_units<aiv -> aiv>}
// CHECK-NEXT:   ascend.wait_flag MTE3 -> V, 0 {units = #ascend.flag_units<aiv -> aiv>}
// CHECK-NEXT:   ascend.vrelu %[[U0]], %[[V0:.*]] :
// CHECK-NEXT:   ascend.set_flag V -> MTE2, 0 {units = #ascend.flag_units<aiv -> aiv>}
// CHECK-NEXT:   memref.subview
// CHECK-NEXT:   ascend.set_flag V -> MTE3, 0 {units = #ascend.flag_units<aiv -> aiv>}
// CHECK-NEXT:   ascend.wait_flag V -> MTE3, 0 {units = #ascend.flag_units<aiv -> aiv>}
// CHECK-NEXT:   ascend.copy %[[V0]], %{{.*}} :
// CHECK-NEXT:   ascend.set_flag MTE3 -> V, 0 {units = #ascend.flag_units<aiv -> aiv>}
// CHECK-NEXT:   memref.subview %[[WS]][32, 0]
// CHECK-NEXT:   ascend.set_flag FIX -> MTE2, 1 {units = #ascend.flag_units<aic -> aiv1>}
// CHECK-NEXT:   ascend.wait_flag FIX -> MTE2, 1 {units = #ascend.flag_units<aic -> aiv1>}
// CHECK-NEXT:   ascend.wait_flag V -> MTE2, 1 {units = #ascend.flag_units<aiv1 -> aiv1>}
// CHECK-NEXT:   ascend.copy %{{.*}}, %[[U1:.*]] {subblock = 1 : i64}
// CHECK-NEXT:   ascend.set_flag MTE2 -> FIX, 1 {units = #ascend.flag_units<aiv1 -> aic>}
// CHECK-NEXT:   ascend.set_flag MTE2 -> V, 1 {units = #ascend.flag_units<aiv1 -> aiv1>}
// CHECK-NEXT:   ascend.wait_flag MTE2 -> V, 1 {units = #ascend.flag_units<aiv1 -> aiv1>}
// CHECK-NEXT:   ascend.wait_flag MTE3 -> V, 1 {units = #ascend.flag_units<aiv1 -> aiv1>}
// CHECK-NEXT:   ascend.vrelu %[[U1]], %[[V1:.*]] {subblock = 1 : i64}
// CHECK-NEXT:   ascend.set_flag V -> MTE2, 1 {units = #ascend.flag_units<aiv1 -> aiv1>}
// CHECK-NEXT:   arith.addi
// CHECK-NEXT:   memref.subview
// CHECK-NEXT:   ascend.set_flag V -> MTE3, 1 {units = #ascend.flag_units<aiv1 -> aiv1>}
// CHECK-NEXT:   ascend.wait_flag V -> MTE3, 1 {units = #ascend.flag_units<aiv1 -> aiv1>}
// CHECK-NEXT:   ascend.copy %[[V1]], %{{.*}} {subblock = 1 : i64}
// CHECK-NEXT:   ascend.set_flag MTE3 -> V, 1 {units = #ascend.flag_units<aiv1 -> aiv1>}
// CHECK-NEXT: }
// CHECK-NEXT: ascend.wait_flag MTE3 -> V, 1 {units = #ascend.flag_units<aiv1 -> aiv1>}
// CHECK-NEXT: ascend.wait_flag V -> MTE2, 1 {units = #ascend.flag_units<aiv1 -> aiv1>}
// CHECK-NEXT: ascend.wait_flag MTE3 -> V, 0 {units = #ascend.flag_units<aiv -> aiv>}
// CHECK-NEXT: ascend.wait_flag V -> MTE2, 0 {units = #ascend.flag_units<aiv -> aiv>}
// CHECK-NEXT: ascend.wait_flag MTE2 -> FIX, 1 {units = #ascend.flag_units<aiv1 -> aic>}
// CHECK-NEXT: ascend.wait_flag MTE2 -> FIX, 0 {units = #ascend.flag_units<aiv -> aic>}
// CHECK-NEXT: ascend.wait_flag FIX -> M, 0 {units = #ascend.flag_units<aic -> aic>}
// CHECK-NEXT: ascend.wait_flag M -> MTE1, 0 {units = #ascend.flag_units<aic -> aic>}
// CHECK-NEXT: ascend.wait_flag MTE1 -> MTE2, 0 {units = #ascend.flag_units<aic -> aic>}
// CHECK-NEXT: ascend.return
// QUIET-NOT: note
// tests/test_insert_sync.py runs the result (race and deadlock detectors on) against numpy.
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @mm_relu(%a: memref<256x64xf16, #ascend<space gm>>, %b: memref<64x128xf16, #ascend<space gm>>, %z: memref<256x128xf32, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<mix>} {
    %l1a = ascend.alloc : memref<64x64xf16, #ascend<space l1>>
    %l1b = ascend.alloc : memref<64x128xf16, #ascend<space l1>>
    %l0a = ascend.alloc : memref<64x64xf16, #ascend<space l0a>>
    %l0b = ascend.alloc : memref<64x128xf16, #ascend<space l0b>>
    %l0c = ascend.alloc : memref<64x128xf32, #ascend<space l0c>>
    %ws = ascend.alloc : memref<64x128xf32, #ascend<space gm>>
    %u0 = ascend.alloc : memref<32x128xf32, #ascend<space ub>>
    %v0 = ascend.alloc : memref<32x128xf32, #ascend<space ub>>
    %u1 = ascend.alloc {subblock = 1 : i64} : memref<32x128xf32, #ascend<space ub>>
    %v1 = ascend.alloc {subblock = 1 : i64} : memref<32x128xf32, #ascend<space ub>>
    %c0 = arith.constant 0 : index
    %c32 = arith.constant 32 : index
    %c64 = arith.constant 64 : index
    %c256 = arith.constant 256 : index
    %bid = ascend.block_idx : index
    ascend.copy %b, %l1b {layout = #ascend.layout<nd2nz>} : memref<64x128xf16, #ascend<space gm>>, memref<64x128xf16, #ascend<space l1>>
    scf.for %r = %c0 to %c256 step %c64 {
      %as = memref.subview %a[%r, 0] [64, 64] [1, 1] : memref<256x64xf16, #ascend<space gm>> to memref<64x64xf16, strided<[64, 1], offset: ?>, #ascend<space gm>>
      ascend.copy %as, %l1a {layout = #ascend.layout<nd2nz>} : memref<64x64xf16, strided<[64, 1], offset: ?>, #ascend<space gm>>, memref<64x64xf16, #ascend<space l1>>
      ascend.copy %l1a, %l0a : memref<64x64xf16, #ascend<space l1>>, memref<64x64xf16, #ascend<space l0a>>
      ascend.copy %l1b, %l0b : memref<64x128xf16, #ascend<space l1>>, memref<64x128xf16, #ascend<space l0b>>
      ascend.mmad %l0a, %l0b, %l0c {init = true} : memref<64x64xf16, #ascend<space l0a>>, memref<64x128xf16, #ascend<space l0b>>, memref<64x128xf32, #ascend<space l0c>>
      ascend.copy %l0c, %ws : memref<64x128xf32, #ascend<space l0c>>, memref<64x128xf32, #ascend<space gm>>
      %w0 = memref.subview %ws[0, 0] [32, 128] [1, 1] : memref<64x128xf32, #ascend<space gm>> to memref<32x128xf32, strided<[128, 1]>, #ascend<space gm>>
      ascend.copy %w0, %u0 : memref<32x128xf32, strided<[128, 1]>, #ascend<space gm>>, memref<32x128xf32, #ascend<space ub>>
      ascend.vrelu %u0, %v0 : memref<32x128xf32, #ascend<space ub>>, memref<32x128xf32, #ascend<space ub>>
      %z0 = memref.subview %z[%r, 0] [32, 128] [1, 1] : memref<256x128xf32, #ascend<space gm>> to memref<32x128xf32, strided<[128, 1], offset: ?>, #ascend<space gm>>
      ascend.copy %v0, %z0 : memref<32x128xf32, #ascend<space ub>>, memref<32x128xf32, strided<[128, 1], offset: ?>, #ascend<space gm>>
      %w1 = memref.subview %ws[32, 0] [32, 128] [1, 1] : memref<64x128xf32, #ascend<space gm>> to memref<32x128xf32, strided<[128, 1], offset: 4096>, #ascend<space gm>>
      ascend.copy %w1, %u1 {subblock = 1 : i64} : memref<32x128xf32, strided<[128, 1], offset: 4096>, #ascend<space gm>>, memref<32x128xf32, #ascend<space ub>>
      ascend.vrelu %u1, %v1 {subblock = 1 : i64} : memref<32x128xf32, #ascend<space ub>>, memref<32x128xf32, #ascend<space ub>>
      %r1 = arith.addi %r, %c32 : index
      %z1 = memref.subview %z[%r1, 0] [32, 128] [1, 1] : memref<256x128xf32, #ascend<space gm>> to memref<32x128xf32, strided<[128, 1], offset: ?>, #ascend<space gm>>
      ascend.copy %v1, %z1 {subblock = 1 : i64} : memref<32x128xf32, #ascend<space ub>>, memref<32x128xf32, strided<[128, 1], offset: ?>, #ascend<space gm>>
    }
    ascend.return
  }
  func.func @main(%a: memref<256x64xf16, #ascend<space gm>> {onnx.name = "a"}, %b: memref<64x128xf16, #ascend<space gm>> {onnx.name = "b"}) -> (memref<256x128xf32, #ascend<space gm>> {onnx.name = "z"}) {
    %z = ascend.alloc : memref<256x128xf32, #ascend<space gm>>
    ascend.launch @mm_relu(%a, %b, %z) : memref<256x64xf16, #ascend<space gm>>, memref<64x128xf16, #ascend<space gm>>, memref<256x128xf32, #ascend<space gm>>
    func.return %z : memref<256x128xf32, #ascend<space gm>>
  }
}
