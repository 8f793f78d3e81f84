// RUN: not ascendir-opt %s -p plan-memory 2>&1 | filecheck %s

// A module without `ascend.target` whose arch no shipped target has fails on one line naming the
// arch (it used to be planned for the default 910B2).
// CHECK: ascendir-opt: error: ascend.arch = "dav-x999" is the arch of no shipped target (they have dav-c100, dav-c220, dav-m200)
// CHECK-NOT: Traceback
builtin.module attributes {ascend.arch = "dav-x999"} {
  ascend.kernel @k(%x: memref<16x16xf16, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aic>} {
    ascend.return
  }
}
