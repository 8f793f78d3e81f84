// RUN: ascendir-opt %s --split-input-file --parsing-diagnostics | filecheck %s

// Parse errors of the ascend dialect's custom syntax and typed attributes: ascend.kernel's
// attribute dictionary, bare pipe names, enum attribute values.

// CHECK: ascend.kernel needs a body
builtin.module {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>}
}

// -----

// CHECK: ascend.kernel needs block_dim and core_type attributes
builtin.module {
  ascend.kernel @k() attributes {block_dim = 1 : i64} {
    ascend.return
  }
}

// -----

// CHECK: ascend.kernel @k: block_dim must be an integer, got "two"
builtin.module {
  ascend.kernel @k() attributes {block_dim = "two", core_type = #ascend.core_type<aiv>} {
    ascend.return
  }
}

// -----

// CHECK: ascend.kernel @k: core_type must be #ascend.core_type<aic|aiv|mix>, got "aiv"
builtin.module {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = "aiv"} {
    ascend.return
  }
}

// -----

// CHECK: unknown #ascend.core_type cube (expected one of aic, aiv, mix)
builtin.module {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<cube>} {
    ascend.return
  }
}

// -----

// CHECK: unknown pipe MTE4 (expected one of S, V, M, MTE1, MTE2, MTE3, FIX)
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    ascend.set_flag MTE4 -> V, 0
    ascend.return
  }
}

// -----

// CHECK: unknown pipe all (expected one of S, V, M, MTE1, MTE2, MTE3, FIX, ALL)
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    ascend.pipe_barrier all
    ascend.return
  }
}

// -----

// CHECK: unknown #ascend.cmp lg (expected one of eq, ne, lt, le, gt, ge)
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %a = ascend.alloc : memref<16x64xf32, #ascend<space ub>>
    %m = ascend.alloc : memref<16x64xi1, #ascend<space ub>>
    ascend.vcmp lg %a, %a, %m : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>, memref<16x64xi1, #ascend<space ub>>
    ascend.return
  }
}

// -----

// CHECK: unknown #ascend.layout zn (expected one of nd, nd2nz, nz2nd, nz)
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %a = ascend.alloc : memref<16x16xf32, #ascend<space ub>>
    ascend.copy %a, %a {layout = #ascend.layout<zn>} : memref<16x16xf32, #ascend<space ub>>, memref<16x16xf32, #ascend<space ub>>
    ascend.return
  }
}
