// RUN: ascendir-opt %s --split-input-file --verify-diagnostics | filecheck %s

// plan-memory's `offset` and double-buffer's `ascend.slot` on an ascend.alloc are integers: a
// string was an AttributeError ("internal error") in ascendir run and insert-sync, a float an
// "aligned to 32 B (offset % 32 = 1.5)" error. Both are declared IntegerAttr attributes of the op,
// so IRDL rejects other values; the diagnostic prints the op with the attribute.

// CHECK: "x" should be of base attribute integer
// CHECK: "ascend.alloc"() {offset = "x"}
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %a = ascend.alloc {offset = "x"} : memref<16x32xf32, #ascend<space ub>>
    ascend.return
  }
}

// -----

// CHECK: 1.500000e+00 : f32 should be of base attribute integer
// CHECK: "ascend.alloc"() {offset = 1.500000e+00 : f32}
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %a = ascend.alloc {offset = 1.5 : f32} : memref<16x32xf32, #ascend<space ub>>
    ascend.return
  }
}

// -----

// CHECK: "z" should be of base attribute integer
// CHECK: "ascend.alloc"() {ascend.slot = "z"}
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %a = ascend.alloc {ascend.slot = "z"} : memref<16x32xf32, #ascend<space ub>>
    ascend.return
  }
}

// -----

// CHECK-LABEL: ascend.kernel @fine
// CHECK: ascend.alloc {offset = 32 : i64, ascend.slot = 1 : i64}
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @fine() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %a = ascend.alloc {offset = 32 : i64, ascend.slot = 1 : i64} : memref<16x32xf32, #ascend<space ub>>
    ascend.return
  }
}
