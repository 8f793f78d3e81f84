// RUN: ascendir-opt %s --split-input-file --verify-diagnostics | filecheck %s
// RUN: not ascendir-opt %s --split-input-file 2>&1 | filecheck %s --check-prefix=ERR

// `subblock` names the AIV of a 910B group that runs an op or owns a UB buffer: the integer 0 or
// 1, and 1 only in a mix kernel (an aiv kernel's block is one vector core). Anything else used to
// verify: `subblock = 2` was an IndexError in the interpreter and insert-sync ("internal error"),
// a string an AttributeError, and an aiv kernel's `subblock = 1` buffers got a second UB of
// their own (the capacity check counts UB per subblock), so 256 KiB of UB ran on a 192 KiB 910B2.

// CHECK: ascend.kernel @two: ascend.vadd has subblock = 2 : i64; it names the AIV of its group: 0 or 1
// ERR: ascendir-opt: error: ascend.kernel @two: ascend.vadd has subblock = 2 : i64; it names the AIV of its group: 0 or 1
// ERR-NOT: error
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @two() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<mix>} {
    %a = ascend.alloc : memref<16x32xf32, #ascend<space ub>>
    ascend.vadd %a, %a, %a {subblock = 2 : i64} : memref<16x32xf32, #ascend<space ub>>, memref<16x32xf32, #ascend<space ub>>, memref<16x32xf32, #ascend<space ub>>
    ascend.return
  }
}

// -----

// (subblock is a declared IntegerAttr attribute: IRDL rejects a string, printing the op)
// CHECK: "one" should be of base attribute integer
// CHECK: "ascend.alloc"() {subblock = "one"}
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @text() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<mix>} {
    %a = ascend.alloc {subblock = "one"} : memref<16x32xf32, #ascend<space ub>>
    ascend.return
  }
}

// -----

// CHECK: ascend.kernel @negative: ascend.alloc has subblock = -1 : i64; it names the AIV of its group: 0 or 1
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @negative() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<mix>} {
    %a = ascend.alloc {subblock = -1 : i64} : memref<16x32xf32, #ascend<space ub>>
    ascend.return
  }
}

// -----

// CHECK: ascend.kernel @vec: ascend.alloc has subblock = 1 in an aiv kernel; only a mix kernel has a second AIV (an aiv kernel's block runs on one vector core)
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @vec(%x: memref<256x128xf32, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %a = ascend.alloc : memref<256x128xf32, #ascend<space ub>>
    %b = ascend.alloc {subblock = 1 : i64} : memref<256x128xf32, #ascend<space ub>>
    ascend.copy %x, %a : memref<256x128xf32, #ascend<space gm>>, memref<256x128xf32, #ascend<space ub>>
    ascend.copy %x, %b {subblock = 1 : i64} : memref<256x128xf32, #ascend<space gm>>, memref<256x128xf32, #ascend<space ub>>
    ascend.return
  }
}

// -----

// An explicit subblock = 0 in a mix kernel, and subblock = 1 in one, verify.
// CHECK-LABEL: ascend.kernel @fine
// CHECK: ascend.vadd %{{.*}}, %{{.*}}, %{{.*}} {subblock = 0 : i64}
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @fine() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<mix>} {
    %a = ascend.alloc {subblock = 0 : i64} : memref<16x32xf32, #ascend<space ub>>
    %b = ascend.alloc {subblock = 1 : i64} : memref<16x32xf32, #ascend<space ub>>
    ascend.vadd %a, %a, %a {subblock = 0 : i64} : memref<16x32xf32, #ascend<space ub>>, memref<16x32xf32, #ascend<space ub>>, memref<16x32xf32, #ascend<space ub>>
    ascend.vadd %b, %b, %b {subblock = 1 : i64} : memref<16x32xf32, #ascend<space ub>>, memref<16x32xf32, #ascend<space ub>>, memref<16x32xf32, #ascend<space ub>>
    ascend.return
  }
}

// -----

// AIV 1 has a UB of its own and nothing else: an L1 buffer tagged subblock = 1 used to be
// counted (and placed by plan-memory, at offset 0 again) in a second L1, so 768 KiB of L1 ran
// on a 512 KiB 910B2.
// CHECK: ascend.kernel @l1: ascend.alloc in l1 has subblock = 1; only UB is per AIV (memref<512x384xf16, #ascend<space l1>>)
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @l1(%x: memref<512x384xf16, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<mix>} {
    %a = ascend.alloc : memref<512x384xf16, #ascend<space l1>>
    %b = ascend.alloc {subblock = 1 : i64} : memref<512x384xf16, #ascend<space l1>>
    ascend.copy %x, %a {layout = #ascend.layout<nd2nz>} : memref<512x384xf16, #ascend<space gm>>, memref<512x384xf16, #ascend<space l1>>
    ascend.copy %x, %b {layout = #ascend.layout<nd2nz>, subblock = 1 : i64} : memref<512x384xf16, #ascend<space gm>>, memref<512x384xf16, #ascend<space l1>>
    ascend.return
  }
}

// -----

// A flag's `units` (which units it joins) is an #ascend.flag_units: a string (the old spelling)
// was a KeyError / ValueError / AttributeError ("internal error") in the interpreter and
// insert-sync. (An unknown unit in #ascend.flag_units is a parse error: invalid_parse.mlir.)
// CHECK: "aic->foo" should be of base attribute ascend.flag_units
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @units() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<mix>} {
    ascend.set_flag MTE2 -> V, 0 {units = "aic->foo"}
    ascend.wait_flag MTE2 -> V, 0 {units = "aic->foo"}
    ascend.return
  }
}

// -----

// (units is a declared #ascend.flag_units attribute: IRDL rejects an integer, printing the op)
// CHECK: 5 : i64 should be of base attribute ascend.flag_units
// CHECK: "ascend.wait_flag"() <{src = #ascend.pipe<MTE2>, dst = #ascend.pipe<V>, event = 1 : i64}> {units = 5 : i64}
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @units_int() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<mix>} {
    ascend.wait_flag MTE2 -> V, 1 {units = 5 : i64}
    ascend.return
  }
}

// -----

// CHECK: ascend.kernel @units_aiv: ascend.set_flag joins aiv1 -> aiv1 in an aiv kernel; only a mix kernel has a second AIV
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @units_aiv() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    ascend.set_flag MTE2 -> V, 0 {units = #ascend.flag_units<aiv1 -> aiv1>}
    ascend.wait_flag MTE2 -> V, 0 {units = #ascend.flag_units<aiv1 -> aiv1>}
    ascend.return
  }
}

// -----

// AIV 1 runs vector-unit work only: the cube, the copies into or out of the AIC's buffers
// (GM -> L1 on MTE2, L1 -> L0 on MTE1, FixPipe out of L0C) run on the AIC whatever `subblock`
// says, and a subblock = 1 on them used to be accepted and silently ignored.
// CHECK: ascend.kernel @mmad: ascend.mmad has subblock = 1, but it runs on the AIC; only vector-unit ops run on an AIV
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @mmad() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<mix>} {
    %a = ascend.alloc : memref<16x16xf16, #ascend<space l0a>>
    %b = ascend.alloc : memref<16x16xf16, #ascend<space l0b>>
    %c = ascend.alloc : memref<16x16xf32, #ascend<space l0c>>
    ascend.mmad %a, %b, %c {init = true, subblock = 1 : i64} : memref<16x16xf16, #ascend<space l0a>>, memref<16x16xf16, #ascend<space l0b>>, memref<16x16xf32, #ascend<space l0c>>
    ascend.return
  }
}

// -----

// CHECK: ascend.kernel @mte1: ascend.copy l1 -> l0a has subblock = 1, but it runs on the AIC; only vector-unit ops run on an AIV
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @mte1() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<mix>} {
    %a = ascend.alloc : memref<16x16xf16, #ascend<space l1>>
    %b = ascend.alloc : memref<16x16xf16, #ascend<space l0a>>
    ascend.copy %a, %b {subblock = 1 : i64} : memref<16x16xf16, #ascend<space l1>>, memref<16x16xf16, #ascend<space l0a>>
    ascend.return
  }
}

// -----

// CHECK: ascend.kernel @fixpipe: ascend.copy l0c -> gm has subblock = 1, but it runs on the AIC; only vector-unit ops run on an AIV
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @fixpipe(%y: memref<16x16xf32, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<mix>} {
    %c = ascend.alloc : memref<16x16xf32, #ascend<space l0c>>
    ascend.copy %c, %y {subblock = 1 : i64} : memref<16x16xf32, #ascend<space l0c>>, memref<16x16xf32, #ascend<space gm>>
    ascend.return
  }
}

// -----

// CHECK: ascend.kernel @mte2_l1: ascend.copy gm -> l1 has subblock = 1, but it runs on the AIC; only vector-unit ops run on an AIV
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @mte2_l1(%x: memref<16x16xf16, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<mix>} {
    %a = ascend.alloc : memref<16x16xf16, #ascend<space l1>>
    ascend.copy %x, %a {subblock = 1 : i64} : memref<16x16xf16, #ascend<space gm>>, memref<16x16xf16, #ascend<space l1>>
    ascend.return
  }
}

// -----

// The AIV's own copies (GM <-> UB) on AIV 1 verify.
// CHECK-LABEL: ascend.kernel @aiv1_copies
// CHECK: ascend.copy %{{.*}}, %{{.*}} {subblock = 1 : i64}
// CHECK: ascend.copy %{{.*}}, %{{.*}} {subblock = 1 : i64}
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @aiv1_copies(%x: memref<16x16xf16, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<mix>} {
    %a = ascend.alloc {subblock = 1 : i64} : memref<16x16xf16, #ascend<space ub>>
    ascend.copy %x, %a {subblock = 1 : i64} : memref<16x16xf16, #ascend<space gm>>, memref<16x16xf16, #ascend<space ub>>
    ascend.copy %a, %x {subblock = 1 : i64} : memref<16x16xf16, #ascend<space ub>>, memref<16x16xf16, #ascend<space gm>>
    ascend.return
  }
}
