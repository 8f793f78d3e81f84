// RUN: ascendir-opt %s | ascendir-opt | filecheck %s
// RUN: ascendir-opt %s --print-op-generic | ascendir-opt | filecheck %s

// Round trip of the sync ops (ops_sync.py): set_flag / wait_flag with bare typed pipes and declared
// units / subblock, pipe_barrier on ALL and on one pipe.

// CHECK:      builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
// CHECK-NEXT: ascend.kernel @sync() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<mix>} {
// CHECK-NEXT: ascend.set_flag MTE2 -> MTE1, 0
// CHECK-NEXT: ascend.wait_flag MTE2 -> MTE1, 0
// CHECK-NEXT: ascend.set_flag MTE1 -> M, 7
// CHECK-NEXT: ascend.wait_flag MTE1 -> M, 7
// CHECK-NEXT: ascend.set_flag FIX -> MTE2, 1 {units = #ascend.flag_units<aic -> aiv1>}
// CHECK-NEXT: ascend.wait_flag FIX -> MTE2, 1 {units = #ascend.flag_units<aic -> aiv1>}
// CHECK-NEXT: ascend.set_flag V -> MTE3, 2 {subblock = 1 : i64}
// CHECK-NEXT: ascend.wait_flag V -> MTE3, 2 {subblock = 1 : i64}
// CHECK-NEXT: ascend.set_flag S -> V, 3
// CHECK-NEXT: ascend.wait_flag S -> V, 3
// CHECK-NEXT: ascend.pipe_barrier ALL
// CHECK-NEXT: ascend.pipe_barrier V
// CHECK-NEXT: ascend.pipe_barrier MTE3 {subblock = 1 : i64}
// CHECK-NEXT: ascend.return
// CHECK-NEXT: }
// CHECK-NEXT: }
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @sync() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<mix>} {
    ascend.set_flag MTE2 -> MTE1, 0
    ascend.wait_flag MTE2 -> MTE1, 0
    ascend.set_flag MTE1 -> M, 7
    ascend.wait_flag MTE1 -> M, 7
    ascend.set_flag FIX -> MTE2, 1 {units = #ascend.flag_units<aic -> aiv1>}
    ascend.wait_flag FIX -> MTE2, 1 {units = #ascend.flag_units<aic -> aiv1>}
    ascend.set_flag V -> MTE3, 2 {subblock = 1 : i64}
    ascend.wait_flag V -> MTE3, 2 {subblock = 1 : i64}
    ascend.set_flag S -> V, 3
    ascend.wait_flag S -> V, 3
    ascend.pipe_barrier ALL
    ascend.pipe_barrier V
    ascend.pipe_barrier MTE3 {subblock = 1 : i64}
    ascend.return
  }
}
