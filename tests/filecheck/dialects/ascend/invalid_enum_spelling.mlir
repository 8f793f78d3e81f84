// RUN: ascendir-opt %s --split-input-file --parsing-diagnostics | filecheck %s

// An enum value has one spelling, the printer's (dialects/enum_attr.py): bare when it is an
// identifier, so a quoted pipe, core type, space, predicate or layout is an error (it used to
// parse as a second spelling of the same value); quoted only when it cannot be an identifier
// (#ascend.arch<"dav-c220">). Unknown values of the newer enum attributes fail the same way.

// CHECK: #ascend.pipe V is written bare, not as a string "V"
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    "ascend.set_flag"() <{src = #ascend.pipe<"V">, dst = #ascend.pipe<MTE3>, event = 0 : i64}> : () -> ()
    ascend.return
  }
}

// -----

// CHECK: pipe MTE2 is written bare, not as a string "MTE2"
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    ascend.set_flag "MTE2" -> V, 0
    ascend.return
  }
}

// -----

// CHECK: pipe ALL is written bare, not as a string "ALL"
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    ascend.pipe_barrier "ALL"
    ascend.return
  }
}

// -----

// CHECK: #ascend.core_type mix is written bare, not as a string "mix"
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<"mix">} {
    ascend.return
  }
}

// -----

// CHECK: #ascend.space ub is written bare, not as a string "ub"
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %a = ascend.alloc : memref<16x64xf32, #ascend<space "ub">>
    ascend.return
  }
}

// -----

// CHECK: #ascend.cmp gt is written bare, not as a string "gt"
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %a = ascend.alloc : memref<16x64xf32, #ascend<space ub>>
    %m = ascend.alloc : memref<16x64xi1, #ascend<space ub>>
    ascend.vcmp "gt" %a, %a, %m : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>, memref<16x64xi1, #ascend<space ub>>
    ascend.return
  }
}

// -----

// CHECK: #ascend.layout nd2nz is written bare, not as a string "nd2nz"
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k(%g: memref<16x16xf16, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aic>} {
    %a = ascend.alloc : memref<16x16xf16, #ascend<space l1>>
    ascend.copy %g, %a {layout = #ascend.layout<"nd2nz">} : memref<16x16xf16, #ascend<space gm>>, memref<16x16xf16, #ascend<space l1>>
    ascend.return
  }
}

// -----

// CHECK: flag unit aiv1 is written bare, not as a string "aiv1"
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<mix>} {
    ascend.set_flag FIX -> MTE2, 1 {units = #ascend.flag_units<aic -> "aiv1">}
    ascend.return
  }
}

// -----

// CHECK: unknown flag unit aiv2 (expected one of aic, aiv, aiv0, aiv1)
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<mix>} {
    ascend.set_flag FIX -> MTE2, 1 {units = #ascend.flag_units<aic -> aiv2>}
    ascend.return
  }
}

// -----

// CHECK: unknown #ascend.arch dav-x999 (expected one of dav-c220, dav-c100, dav-m200)
builtin.module attributes {ascend.arch = #ascend.arch<"dav-x999">} {
}

// -----

// CHECK: #ascend.target: the chip name must not be empty
builtin.module attributes {ascend.target = #ascend.target<"">} {
}

// -----

// CHECK: unknown #ascend.round_mode even (expected one of up, down, nearest)
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %a = ascend.alloc : memref<16x64xf32, #ascend<space ub>>
    %d = ascend.alloc : memref<16x64xf8E8M0FNU, #ascend<space ub>>
    ascend.vcast %a, %d {round_mode = #ascend.round_mode<even>} : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf8E8M0FNU, #ascend<space ub>>
    ascend.return
  }
}

// -----

// An arch written bare lexes as `dav`, `-`, `c220`: the message names the quoted spelling
// (it used to say "unknown #ascend.arch dav").
// CHECK: #ascend.arch dav-c220 is written as a string "dav-c220" (a hyphen is no identifier character)
builtin.module attributes {ascend.arch = #ascend.arch<dav-c220>} {
}
