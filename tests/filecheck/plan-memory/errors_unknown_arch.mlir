// RUN: not ascendir-opt %s -p plan-memory 2>&1 | filecheck %s

// An arch that is no #ascend.arch fails on one line naming it (such a module used to be planned
// for the default 910B2; now the dialect knows its architectures).
// CHECK: ascendir-opt: error: {{.*}}unknown #ascend.arch dav-x999 (expected one of dav-c220, dav-c100, dav-m200)
// CHECK-NOT: Traceback
builtin.module attributes {ascend.arch = #ascend.arch<"dav-x999">} {
  ascend.kernel @k(%x: memref<16x16xf16, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aic>} {
    ascend.return
  }
}
