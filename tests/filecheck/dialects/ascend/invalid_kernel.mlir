// RUN: ascendir-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Every verifier error of the kernel and buffer ops (ops_kernel.py) and of memory spaces
// (attrs.py space_of). The kernel's subblock / flag-unit rules: invalid_subblock_*.mlir,
// invalid_flag_units_pipes.mlir.

// CHECK: ascend.kernel: arguments must be GM memrefs, got memref<16x16xf32, #ascend<space ub>>
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k(%x: memref<16x16xf32, #ascend<space ub>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {

    ascend.return
  }
}

// -----

// CHECK: ascend.kernel: block arguments must match the function type
"builtin.module"() ({
  "ascend.kernel"() <{sym_name = "k", function_type = (memref<16xf32, #ascend<space gm>>) -> (), block_dim = 1 : i64, core_type = #ascend.core_type<aiv>}> ({
    "ascend.return"() : () -> ()
  }) : () -> ()
}) : () -> ()

// -----

// CHECK: ascend.kernel: body must be one block, got 0
"builtin.module"() ({
  "ascend.kernel"() <{sym_name = "k", function_type = (memref<16xf32, #ascend<space gm>>) -> (), block_dim = 1 : i64, core_type = #ascend.core_type<aiv>}> ({
  }) : () -> ()
}) : () -> ()

// -----

// CHECK: ascend.kernel: block_dim must be >= 1
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 0 : i64, core_type = #ascend.core_type<aiv>} {

    ascend.return
  }
}

// -----

// CHECK: ascend.kernel: block_dim must be <= 65535, got 4611686018427387904
builtin.module attributes {ascend.arch = "dav-c220"} {
  ascend.kernel @k() attributes {block_dim = 4611686018427387904 : i64, core_type = #ascend.core_type<aiv>} {

    ascend.return
  }
}

// -----

// CHECK: ascend.kernel: body must end in ascend.return
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {

    nn.yield :
  }
}

// -----

// CHECK: ascend.alloc: buffers have static shapes
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %a = ascend.alloc : memref<?x16xf32, #ascend<space ub>>
    ascend.return
  }
}

// -----

// CHECK: expected a memref in an #ascend<space>, got memref<16x16xf32>
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %a = ascend.alloc : memref<16x16xf32>
    ascend.return
  }
}

// -----

// CHECK: ascend.weight: weights live in GM
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %w = ascend.weight @w : memref<16x16xf32, #ascend<space ub>>
    ascend.return
  }
}

// -----

// CHECK: ascend.weight: value of type tensor<2x2xf32> does not match the result memref<2x3xf32, #ascend<space gm>>
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %w = ascend.weight @w {value = dense<1.0> : tensor<2x2xf32>} : memref<2x3xf32, #ascend<space gm>>
    ascend.return
  }
}

// -----

// CHECK: ascend.view: element type and count must be preserved
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k(%x: memref<16x16xf32, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %v = ascend.view %x : memref<16x16xf32, #ascend<space gm>> to memref<16x8xf32, #ascend<space gm>>
    ascend.return
  }
}

// -----

// CHECK: ascend.view: views are of GM buffers
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %a = ascend.alloc : memref<16x16xf32, #ascend<space ub>>
    %v = ascend.view %a : memref<16x16xf32, #ascend<space ub>> to memref<256xf32, #ascend<space ub>>
    ascend.return
  }
}

// -----

// The ONNX node(s) of a launch are a string.
// CHECK: Operation does not verify: 3 : i64 should be of base attribute string
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    ascend.return
  }
  func.func @main() {
    ascend.launch @k() {onnx.node = 3 : i64} : 
    func.return
  }
}
