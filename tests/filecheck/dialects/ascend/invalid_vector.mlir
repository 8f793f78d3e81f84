// RUN: ascendir-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Every verifier error of the vector ops (ops_vector.py) and of a cast's mode (cast_mode.py).

// CHECK: ascend.vadd: vector ops read and write UB only, got gm
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k(%x: memref<16x64xf32, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    ascend.vadd %x, %x, %x : memref<16x64xf32, #ascend<space gm>>, memref<16x64xf32, #ascend<space gm>>, memref<16x64xf32, #ascend<space gm>>
    ascend.return
  }
}

// -----

// CHECK: ascend.vadd: operand memref<16x32xf32, #ascend<space ub>> does not broadcast to memref<16x64xf32, #ascend<space ub>>
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %a = ascend.alloc : memref<16x32xf32, #ascend<space ub>>
    %d = ascend.alloc : memref<16x64xf32, #ascend<space ub>>
    ascend.vadd %a, %d, %d : memref<16x32xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
    ascend.return
  }
}

// -----

// CHECK: ascend.vexp: element types differ (memref<16x64xf16, #ascend<space ub>> vs memref<16x64xf32, #ascend<space ub>>)
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %a = ascend.alloc : memref<16x64xf16, #ascend<space ub>>
    %d = ascend.alloc : memref<16x64xf32, #ascend<space ub>>
    ascend.vexp %a, %d : memref<16x64xf16, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
    ascend.return
  }
}

// -----

// CHECK: ascend.vblock_reduce_max: dest must be the source shape with the last dim divided by 8 (elements per 32-B block), source last dim a multiple of it
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %a = ascend.alloc : memref<16x64xf32, #ascend<space ub>>
    %d = ascend.alloc : memref<16x4xf32, #ascend<space ub>>
    ascend.vblock_reduce_max %a, %d : memref<16x64xf32, #ascend<space ub>>, memref<16x4xf32, #ascend<space ub>>
    ascend.return
  }
}

// -----

// CHECK: ascend.vblock_reduce_sum: element types differ
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %a = ascend.alloc : memref<16x64xf32, #ascend<space ub>>
    %d = ascend.alloc : memref<16x8xf16, #ascend<space ub>>
    ascend.vblock_reduce_sum %a, %d : memref<16x64xf32, #ascend<space ub>>, memref<16x8xf16, #ascend<space ub>>
    ascend.return
  }
}

// -----

// CHECK: ascend.vreduce_sum: dest must be the source shape with last dim 1
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %a = ascend.alloc : memref<16x64xf32, #ascend<space ub>>
    %d = ascend.alloc : memref<16x2xf32, #ascend<space ub>>
    ascend.vreduce_sum %a, %d : memref<16x64xf32, #ascend<space ub>>, memref<16x2xf32, #ascend<space ub>>
    ascend.return
  }
}

// -----

// CHECK: ascend.vreduce_max: element types differ
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %a = ascend.alloc : memref<16x64xf32, #ascend<space ub>>
    %d = ascend.alloc : memref<16x1xf16, #ascend<space ub>>
    ascend.vreduce_max %a, %d : memref<16x64xf32, #ascend<space ub>>, memref<16x1xf16, #ascend<space ub>>
    ascend.return
  }
}

// -----

// CHECK: ascend.vcast: source does not broadcast to dest
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %a = ascend.alloc : memref<16x64xf32, #ascend<space ub>>
    %d = ascend.alloc : memref<8x64xf16, #ascend<space ub>>
    ascend.vcast %a, %d : memref<16x64xf32, #ascend<space ub>>, memref<8x64xf16, #ascend<space ub>>
    ascend.return
  }
}

// -----

// CHECK: ascend.vcmp: operand does not broadcast to dest
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %a = ascend.alloc : memref<16x64xf32, #ascend<space ub>>
    %m = ascend.alloc : memref<8x64xi1, #ascend<space ub>>
    ascend.vcmp lt %a, %a, %m : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>, memref<8x64xi1, #ascend<space ub>>
    ascend.return
  }
}

// -----

// CHECK: ascend.vsel: operand does not broadcast to dest
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %a = ascend.alloc : memref<16x64xf32, #ascend<space ub>>
    %m = ascend.alloc : memref<16x64xi1, #ascend<space ub>>
    %d = ascend.alloc : memref<8x64xf32, #ascend<space ub>>
    ascend.vsel %m, %a, %a, %d : memref<16x64xi1, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>, memref<8x64xf32, #ascend<space ub>>
    ascend.return
  }
}

// -----

// CHECK: ascend.vtranspose: perm must be a list of integers
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %a = ascend.alloc : memref<16x64xf32, #ascend<space ub>>
    %t = ascend.alloc : memref<64x16xf32, #ascend<space ub>>
    ascend.vtranspose %a, %t {perm = [1 : f32, 0 : i64]} : memref<16x64xf32, #ascend<space ub>>, memref<64x16xf32, #ascend<space ub>>
    ascend.return
  }
}

// -----

// CHECK: ascend.vtranspose: dest shape must be the permuted source shape
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %a = ascend.alloc : memref<16x64xf32, #ascend<space ub>>
    ascend.vtranspose %a, %a {perm = [1 : i64, 0 : i64]} : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
    ascend.return
  }
}

// -----

// CHECK: ascend.varange: writes UB only
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k(%x: memref<16x64xf32, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %c = arith.constant 0 : index
    ascend.varange %c, %x : memref<16x64xf32, #ascend<space gm>>
    ascend.return
  }
}

// -----

// CHECK: ascend.vcast: saturate applies to float 8 results only, not f16
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %a = ascend.alloc : memref<16x64xf32, #ascend<space ub>>
    %d = ascend.alloc : memref<16x64xf16, #ascend<space ub>>
    ascend.vcast %a, %d {saturate = false} : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf16, #ascend<space ub>>
    ascend.return
  }
}

// -----

// CHECK: ascend.vcast: round_mode applies to f8E8M0FNU results only, not f16
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %a = ascend.alloc : memref<16x64xf32, #ascend<space ub>>
    %d = ascend.alloc : memref<16x64xf16, #ascend<space ub>>
    ascend.vcast %a, %d {round_mode = #ascend.round_mode<down>} : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf16, #ascend<space ub>>
    ascend.return
  }
}

// -----

// A round mode written as a string (an unknown one in #ascend.round_mode is a parse error:
// invalid_parse.mlir)
// CHECK: "even" should be of base attribute ascend.round_mode
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %a = ascend.alloc : memref<16x64xf32, #ascend<space ub>>
    %d = ascend.alloc : memref<16x64xf8E8M0FNU, #ascend<space ub>>
    ascend.vcast %a, %d {round_mode = "even"} : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf8E8M0FNU, #ascend<space ub>>
    ascend.return
  }
}
