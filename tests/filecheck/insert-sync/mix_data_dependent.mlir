// RUN: ascendir-opt %s -p insert-sync | filecheck %s

// A 910B mix kernel without flags whose control flow depends on data: %g = [tiles, relu] read by
// the scalar unit. z[0 : 32 * tiles] = relu(a @ b) when relu != 0, else a @ b, a row tile of 32
// at a time: the AIC loads the a tile (MTE2), moves it and b to L0A / L0B (MTE1), multiplies (M)
// and FixPipes the product to a GM workspace (FIX); AIV 0 reads it back (MTE2), then in one
// branch of an scf.if on data relus it (V) and stores the result (MTE3), in the other stores it
// as read (MTE3). The loop's bound and the branch are data: insert-sync runs the body for data
// trip counts 0, 1, 6 (and alternating) and each outcome of the branch, so the hand-offs and the
// loop-carried WARs come back (primed before the loop, drained after it), the V -> MTE3
// hand-off inside the taken branch and the MTE2 -> MTE3 one the other branch needs.
// CHECK:      ascend.set_flag MTE2 -> FIX, 0 {units = #ascend.flag_units<aiv -> aic>}
// CHECK-NEXT: ascend.set_flag MTE3 -> MTE2, 0 {units = #ascend.flag_units<aiv -> aiv>}
// CHECK-NEXT: scf.for %r = %c0 to %rows step %c32 {
// CHECK:        ascend.wait_flag MTE2 -> FIX, 0 {units = #ascend.flag_units<aiv -> aic>}
// CHECK-NEXT:   ascend.copy %l0c, %ws
// CHECK:        ascend.set_flag FIX -> MTE2, 0 {units = #ascend.flag_units<aic -> aiv>}
// CHECK-NEXT:   ascend.wait_flag FIX -> MTE2, 0 {units = #ascend.flag_units<aic -> aiv>}
// CHECK-NEXT:   ascend.wait_flag MTE3 -> MTE2, 0 {units = #ascend.flag_units<aiv -> aiv>}
// CHECK-NEXT:   ascend.copy %ws, %u
// CHECK-NEXT:   ascend.set_flag MTE2 -> FIX, 0 {units = #ascend.flag_units<aiv -> aic>}
// CHECK:        ascend.set_flag MTE2 -> MTE3, 0 {units = #ascend.flag_units<aiv -> aiv>}
// CHECK-NEXT:   ascend.wait_flag MTE2 -> MTE3, 0 {units = #ascend.flag_units<aiv -> aiv>}
// CHECK-NEXT:   scf.if %is_relu {
// CHECK-NEXT:     ascend.vrelu %u, %v
// CHECK-NEXT:     ascend.set_flag V -> MTE3, 0 {units = #ascend.flag_units<aiv -> aiv>}
// CHECK-NEXT:     ascend.wait_flag V -> MTE3, 0 {units = #ascend.flag_units<aiv -> aiv>}
// CHECK-NEXT:     ascend.copy %v, %zs
// CHECK-NEXT:   } else {
// CHECK-NEXT:     ascend.copy %u, %zs
// CHECK-NEXT:   }
// CHECK-NEXT:   ascend.set_flag MTE3 -> MTE2, 0 {units = #ascend.flag_units<aiv -> aiv>}
// CHECK-NEXT: }
// CHECK-NEXT: ascend.wait_flag MTE3 -> MTE2, 0 {units = #ascend.flag_units<aiv -> aiv>}
// CHECK-NEXT: ascend.wait_flag MTE2 -> FIX, 0 {units = #ascend.flag_units<aiv -> aic>}
// tests/test_insert_sync.py runs it without flags (a race) and after insert-sync against numpy,
// for both outcomes of the branch and several tile counts.
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @mm_dyn(%a: memref<256x64xf16, #ascend<space gm>>, %b: memref<64x128xf16, #ascend<space gm>>, %g: memref<2xi64, #ascend<space gm>>, %z: memref<256x128xf32, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<mix>} {
    %l1a = ascend.alloc : memref<32x64xf16, #ascend<space l1>>
    %l1b = ascend.alloc : memref<64x128xf16, #ascend<space l1>>
    %l0a = ascend.alloc : memref<32x64xf16, #ascend<space l0a>>
    %l0b = ascend.alloc : memref<64x128xf16, #ascend<space l0b>>
    %l0c = ascend.alloc : memref<32x128xf32, #ascend<space l0c>>
    %ws = ascend.alloc : memref<32x128xf32, #ascend<space gm>>
    %u = ascend.alloc : memref<32x128xf32, #ascend<space ub>>
    %v = ascend.alloc : memref<32x128xf32, #ascend<space ub>>
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c32 = arith.constant 32 : index
    %tiles = ascend.get_value %g[%c0] : memref<2xi64, #ascend<space gm>>
    %relu = ascend.get_value %g[%c1] : memref<2xi64, #ascend<space gm>>
    %rows = arith.muli %tiles, %c32 : index
    %is_relu = arith.cmpi ne, %relu, %c0 : index
    ascend.copy %b, %l1b {layout = #ascend.layout<nd2nz>} : memref<64x128xf16, #ascend<space gm>>, memref<64x128xf16, #ascend<space l1>>
    scf.for %r = %c0 to %rows step %c32 {
      %as = memref.subview %a[%r, 0] [32, 64] [1, 1] : memref<256x64xf16, #ascend<space gm>> to memref<32x64xf16, strided<[64, 1], offset: ?>, #ascend<space gm>>
      ascend.copy %as, %l1a {layout = #ascend.layout<nd2nz>} : memref<32x64xf16, strided<[64, 1], offset: ?>, #ascend<space gm>>, memref<32x64xf16, #ascend<space l1>>
      ascend.copy %l1a, %l0a : memref<32x64xf16, #ascend<space l1>>, memref<32x64xf16, #ascend<space l0a>>
      ascend.copy %l1b, %l0b : memref<64x128xf16, #ascend<space l1>>, memref<64x128xf16, #ascend<space l0b>>
      ascend.mmad %l0a, %l0b, %l0c {init = true} : memref<32x64xf16, #ascend<space l0a>>, memref<64x128xf16, #ascend<space l0b>>, memref<32x128xf32, #ascend<space l0c>>
      ascend.copy %l0c, %ws : memref<32x128xf32, #ascend<space l0c>>, memref<32x128xf32, #ascend<space gm>>
      ascend.copy %ws, %u : memref<32x128xf32, #ascend<space gm>>, memref<32x128xf32, #ascend<space ub>>
      %zs = memref.subview %z[%r, 0] [32, 128] [1, 1] : memref<256x128xf32, #ascend<space gm>> to memref<32x128xf32, strided<[128, 1], offset: ?>, #ascend<space gm>>
      scf.if %is_relu {
        ascend.vrelu %u, %v : memref<32x128xf32, #ascend<space ub>>, memref<32x128xf32, #ascend<space ub>>
        ascend.copy %v, %zs : memref<32x128xf32, #ascend<space ub>>, memref<32x128xf32, strided<[128, 1], offset: ?>, #ascend<space gm>>
      } else {
        ascend.copy %u, %zs : memref<32x128xf32, #ascend<space ub>>, memref<32x128xf32, strided<[128, 1], offset: ?>, #ascend<space gm>>
      }
    }
    ascend.return
  }
  func.func @main(%a: memref<256x64xf16, #ascend<space gm>> {onnx.name = "a"}, %b: memref<64x128xf16, #ascend<space gm>> {onnx.name = "b"}, %g: memref<2xi64, #ascend<space gm>> {onnx.name = "g"}) -> (memref<256x128xf32, #ascend<space gm>> {onnx.name = "z"}) {
    %z = ascend.alloc : memref<256x128xf32, #ascend<space gm>>
    ascend.launch @mm_dyn(%a, %b, %g, %z) : memref<256x64xf16, #ascend<space gm>>, memref<64x128xf16, #ascend<space gm>>, memref<2xi64, #ascend<space gm>>, memref<256x128xf32, #ascend<space gm>>
    func.return %z : memref<256x128xf32, #ascend<space gm>>
  }
}
