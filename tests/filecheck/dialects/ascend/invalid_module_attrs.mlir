// RUN: ascendir-opt %s --split-input-file --verify-diagnostics | filecheck %s

// The module's architecture and chip are declared attributes (#ascend.arch, #ascend.target),
// checked by every ascend.kernel's verifier; the old string spellings are errors, since nothing
// else read them as what they mean. (An unknown arch is a parse error: invalid_enum_spelling.mlir.)

// CHECK: ascend.arch = "dav-c220" must be one of #ascend.arch<"dav-c220">, #ascend.arch<"dav-c100">, #ascend.arch<"dav-m200">
builtin.module attributes {ascend.arch = "dav-c220"} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    ascend.return
  }
}

// -----

// CHECK: ascend.target = "ascend910b2" must be an #ascend.target<"NAME">
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">, ascend.target = "ascend910b2"} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    ascend.return
  }
}

// -----

// A string where an enum attribute is declared: IRDL names the value and the attribute it needs.
// CHECK: "V" should be of base attribute ascend.pipe
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    "ascend.set_flag"() <{src = "V", dst = #ascend.pipe<MTE3>, event = 0 : i64}> : () -> ()
    ascend.return
  }
}

// -----

// CHECK: "nd2nz" should be of base attribute ascend.layout
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k(%g: memref<16x16xf16, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aic>} {
    %a = ascend.alloc : memref<16x16xf16, #ascend<space l1>>
    ascend.copy %g, %a {layout = "nd2nz"} : memref<16x16xf16, #ascend<space gm>>, memref<16x16xf16, #ascend<space l1>>
    ascend.return
  }
}
