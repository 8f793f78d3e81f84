// RUN: ascendir-opt %s -p insert-sync | filecheck %s --check-prefix=APART
// RUN: ascendir-opt %s -p plan-memory,insert-sync | filecheck %s --check-prefix=SHARED

// Two phases of load (MTE2) -> exp (V) -> store (MTE3), on %a/%b then %c/%d. Apart, only each
// phase's RAW hand-offs are needed. plan-memory puts %c on the bytes of %a and %d on those of %b
// (their lifetimes do not overlap), so the second load must wait until V has read %a, and the
// second exp until MTE3 has stored %b: insert-sync adds V -> MTE2 and MTE3 -> V. Hand-offs of
// one pipe pair share an event id.
// APART-NOT:  ascend.set_flag V -> MTE2
// APART-NOT:  ascend.set_flag MTE3 -> V
// SHARED:      %[[A:.*]] = ascend.alloc {offset = 0 : i64}
// SHARED-NEXT: %[[B:.*]] = ascend.alloc {offset = 65536 : i64}
// SHARED-NEXT: %[[C:.*]] = ascend.alloc {offset = 0 : i64}
// SHARED-NEXT: %[[D:.*]] = ascend.alloc {offset = 65536 : i64}
// SHARED:      ascend.copy %[[B]], %y
// SHARED-NEXT: ascend.set_flag V -> MTE2, 0
// SHARED-NEXT: ascend.wait_flag V -> MTE2, 0
// SHARED-NEXT: ascend.copy %x2, %[[C]]
// SHARED:      ascend.set_flag MTE3 -> V, 0
// SHARED-NEXT: ascend.wait_flag MTE3 -> V, 0
// SHARED-NEXT: ascend.set_flag MTE2 -> V, 0
// SHARED-NEXT: ascend.wait_flag MTE2 -> V, 0
// SHARED-NEXT: ascend.vexp %[[C]], %[[D]]
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">, ascend.target = #ascend.target<"ascend910b2">} {
  ascend.kernel @phases(%x: memref<64x256xf32, #ascend<space gm>>, %y: memref<64x256xf32, #ascend<space gm>>, %x2: memref<64x256xf32, #ascend<space gm>>, %y2: memref<64x256xf32, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %a = ascend.alloc : memref<64x256xf32, #ascend<space ub>>
    %b = ascend.alloc : memref<64x256xf32, #ascend<space ub>>
    %c = ascend.alloc : memref<64x256xf32, #ascend<space ub>>
    %d = ascend.alloc : memref<64x256xf32, #ascend<space ub>>
    ascend.copy %x, %a : memref<64x256xf32, #ascend<space gm>>, memref<64x256xf32, #ascend<space ub>>
    ascend.vexp %a, %b : memref<64x256xf32, #ascend<space ub>>, memref<64x256xf32, #ascend<space ub>>
    ascend.copy %b, %y : memref<64x256xf32, #ascend<space ub>>, memref<64x256xf32, #ascend<space gm>>
    ascend.copy %x2, %c : memref<64x256xf32, #ascend<space gm>>, memref<64x256xf32, #ascend<space ub>>
    ascend.vexp %c, %d : memref<64x256xf32, #ascend<space ub>>, memref<64x256xf32, #ascend<space ub>>
    ascend.copy %d, %y2 : memref<64x256xf32, #ascend<space ub>>, memref<64x256xf32, #ascend<space gm>>
    ascend.return
  }
}
