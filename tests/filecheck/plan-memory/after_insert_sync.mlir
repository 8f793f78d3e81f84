// RUN: ascendir-opt %s -p insert-sync,plan-memory 2>%t.err | filecheck %s
// RUN: filecheck %s --check-prefix=NOTE --input-file %t.err
// RUN: ascendir-opt %s -p double-buffer,insert-sync,plan-memory 2>/dev/null | filecheck %s

// Planned after insert-sync: y's tile %c takes the bytes of x's tile %a (dead after the first
// vexp) and the result %d those of %b (dead after its store). The flags insert-sync placed for
// the unshared buffers do not order those reuses: plan-memory used to leave the kernel with the
// V -> MTE2 (vexp reads %a, MTE2 overwrites it as %c) and MTE3 -> V (store reads %b, vexp
// overwrites it as %d) races that `ascendir run` reports. A kernel that had flags before
// planning and whose buffers now share bytes gets the flags the sharing needs, with a note.
// (tests/test_insert_sync.py runs the result.)
// CHECK:      %[[A:.*]] = ascend.alloc {offset = 0 : i64}
// CHECK-NEXT: %[[B:.*]] = ascend.alloc {offset = 32768 : i64}
// CHECK-NEXT: %[[C:.*]] = ascend.alloc {offset = 0 : i64}
// CHECK-NEXT: %[[D:.*]] = ascend.alloc {offset = 32768 : i64}
// CHECK:      ascend.vexp %[[A]], %[[B]]
// CHECK:      ascend.set_flag V -> MTE2, [[E:[0-9]]]
// CHECK-NEXT: ascend.wait_flag V -> MTE2, [[E]]
// CHECK-NEXT: ascend.copy %y, %[[C]]
// CHECK:      ascend.set_flag MTE3 -> V, [[F:[0-9]]]
// CHECK-NEXT: ascend.wait_flag MTE3 -> V, [[F]]
// CHECK-NEXT: ascend.vexp %[[C]], %[[D]]
// NOTE: ascendir-opt: note: plan-memory: kernel @k: 2 flag pairs added: it had sync flags already and its buffers now share bytes (the last use of one must precede the first write of the next; insert-sync's analysis)
// NOTE-EMPTY:
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k(%x: memref<64x128xf32, #ascend<space gm>>, %y: memref<64x128xf32, #ascend<space gm>>, %z: memref<64x128xf32, #ascend<space gm>>, %z2: memref<64x128xf32, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %a = ascend.alloc : memref<64x128xf32, #ascend<space ub>>
    %b = ascend.alloc : memref<64x128xf32, #ascend<space ub>>
    %c = ascend.alloc : memref<64x128xf32, #ascend<space ub>>
    %d = ascend.alloc : memref<64x128xf32, #ascend<space ub>>
    ascend.copy %x, %a : memref<64x128xf32, #ascend<space gm>>, memref<64x128xf32, #ascend<space ub>>
    ascend.vexp %a, %b : memref<64x128xf32, #ascend<space ub>>, memref<64x128xf32, #ascend<space ub>>
    ascend.copy %b, %z : memref<64x128xf32, #ascend<space ub>>, memref<64x128xf32, #ascend<space gm>>
    ascend.copy %y, %c : memref<64x128xf32, #ascend<space gm>>, memref<64x128xf32, #ascend<space ub>>
    ascend.vexp %c, %d : memref<64x128xf32, #ascend<space ub>>, memref<64x128xf32, #ascend<space ub>>
    ascend.copy %d, %z2 : memref<64x128xf32, #ascend<space ub>>, memref<64x128xf32, #ascend<space gm>>
    ascend.return
  }
  func.func @main(%x: memref<64x128xf32, #ascend<space gm>> {onnx.name = "x"}, %y: memref<64x128xf32, #ascend<space gm>> {onnx.name = "y"}) -> (memref<64x128xf32, #ascend<space gm>> {onnx.name = "z"}, memref<64x128xf32, #ascend<space gm>> {onnx.name = "z2"}) {
    %z = ascend.alloc : memref<64x128xf32, #ascend<space gm>>
    %z2 = ascend.alloc : memref<64x128xf32, #ascend<space gm>>
    ascend.launch @k(%x, %y, %z, %z2) : memref<64x128xf32, #ascend<space gm>>, memref<64x128xf32, #ascend<space gm>>, memref<64x128xf32, #ascend<space gm>>, memref<64x128xf32, #ascend<space gm>>
    func.return %z, %z2 : memref<64x128xf32, #ascend<space gm>>, memref<64x128xf32, #ascend<space gm>>
  }
}
