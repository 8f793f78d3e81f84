// RUN: ascendir-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Verifier errors of set_flag / wait_flag (ops_sync.py); their units rules are in
// invalid_flag_units_pipes.mlir and invalid_subblock_attr.mlir.

// CHECK: ascend.set_flag: src and dst pipes must differ (use pipe_barrier)
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    ascend.set_flag V -> V, 0
    ascend.return
  }
}

// -----

// CHECK: ascend.wait_flag: event id must be in [0, 8) (S6 EVENT_ID0-7)
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    ascend.wait_flag MTE2 -> V, 8
    ascend.return
  }
}
