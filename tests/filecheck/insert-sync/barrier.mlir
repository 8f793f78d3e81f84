// RUN: ascendir-opt %s -p insert-sync | filecheck %s

// @one (AIV only): load, pipe_barrier ALL, relu, pipe_barrier ALL, store. Each barrier orders
// every pipe after everything before it, also a pipe whose first op comes after the barrier (V,
// MTE3 here): no flag is needed.
// CHECK-LABEL: ascend.kernel @one
// CHECK-NOT:   ascend.set_flag
// CHECK:       ascend.return
//
// @mix (910B mix kernel): FixPipe writes the workspace, pipe_barrier ALL, AIV 0 loads it. A
// barrier orders the pipes of the unit that runs it, not the other unit's (the AIC and the AIV
// run their own instruction streams): the FIX -> MTE2 hand-off across units is still needed.
// CHECK-LABEL: ascend.kernel @mix
// CHECK:       ascend.copy %{{.*}}, %[[WS:.*]] :
// CHECK-NEXT:  ascend.pipe_barrier ALL
// CHECK-NEXT:  ascend.set_flag FIX -> MTE2, 0 {units = #ascend.flag_units<aic -> aiv>}
// CHECK-NEXT:  ascend.wait_flag FIX -> MTE2, 0 {units = #ascend.flag_units<aic -> aiv>}
// CHECK-NEXT:  ascend.copy %[[WS]], %{{.*}} :
// CHECK-NOT:   ascend.set_flag
// CHECK:       ascend.return
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @one(%x: memref<64x128xf32, #ascend<space gm>>, %z: memref<64x128xf32, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %u = ascend.alloc : memref<64x128xf32, #ascend<space ub>>
    %v = ascend.alloc : memref<64x128xf32, #ascend<space ub>>
    %b = ascend.block_idx : index
    ascend.copy %x, %u : memref<64x128xf32, #ascend<space gm>>, memref<64x128xf32, #ascend<space ub>>
    ascend.pipe_barrier ALL
    ascend.vrelu %u, %v : memref<64x128xf32, #ascend<space ub>>, memref<64x128xf32, #ascend<space ub>>
    ascend.pipe_barrier ALL
    ascend.copy %v, %z : memref<64x128xf32, #ascend<space ub>>, memref<64x128xf32, #ascend<space gm>>
    ascend.return
  }
  ascend.kernel @mix(%z: memref<64x128xf32, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<mix>} {
    %l0c = ascend.alloc : memref<64x128xf32, #ascend<space l0c>>
    %ws = ascend.alloc : memref<64x128xf32, #ascend<space gm>>
    %u = ascend.alloc : memref<64x128xf32, #ascend<space ub>>
    %b = ascend.block_idx : index
    ascend.copy %l0c, %ws : memref<64x128xf32, #ascend<space l0c>>, memref<64x128xf32, #ascend<space gm>>
    ascend.pipe_barrier ALL
    ascend.copy %ws, %u : memref<64x128xf32, #ascend<space gm>>, memref<64x128xf32, #ascend<space ub>>
    ascend.pipe_barrier ALL
    ascend.copy %u, %z : memref<64x128xf32, #ascend<space ub>>, memref<64x128xf32, #ascend<space gm>>
    ascend.return
  }
}
