// RUN: ascendir-opt %s -p insert-sync | filecheck %s

// A mix kernel for 910A (dav-c100): cube and vector share one core, so it is analysed as one unit,
// and its flags name no units (the interpreter runs it on one set of pipes).
// CHECK:      ascend.set_flag MTE2 -> V, 0{{$}}
// CHECK-NEXT: ascend.wait_flag MTE2 -> V, 0{{$}}
// CHECK-NEXT: ascend.vrelu
// CHECK-NEXT: ascend.set_flag V -> MTE3, 0{{$}}
// CHECK-NEXT: ascend.wait_flag V -> MTE3, 0{{$}}
// CHECK-NOT:  units
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c100">} {
  ascend.kernel @relu(%x: memref<64x128xf32, #ascend<space gm>>, %z: memref<64x128xf32, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<mix>} {
    %u = ascend.alloc : memref<64x128xf32, #ascend<space ub>>
    %v = ascend.alloc : memref<64x128xf32, #ascend<space ub>>
    %b = ascend.block_idx : index
    ascend.copy %x, %u : memref<64x128xf32, #ascend<space gm>>, memref<64x128xf32, #ascend<space ub>>
    ascend.vrelu %u, %v : memref<64x128xf32, #ascend<space ub>>, memref<64x128xf32, #ascend<space ub>>
    ascend.copy %v, %z : memref<64x128xf32, #ascend<space ub>>, memref<64x128xf32, #ascend<space gm>>
    ascend.return
  }
}
