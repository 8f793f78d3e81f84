// RUN: ascendir-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Every verifier error of the communication ops (ops_comm.py).

// CHECK: ascend.remote_copy: source must be a GM memref, got ub
builtin.module {
  ascend.kernel @k(%y: memref<8xf16, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %u = ascend.alloc : memref<8xf16, #ascend<space ub>>
    %r = ascend.group_rank {group = #ascend.device_group<[0, 1]>} : index
    ascend.remote_copy %u, %y, %r {group = #ascend.device_group<[0, 1]>} : memref<8xf16, #ascend<space ub>>, memref<8xf16, #ascend<space gm>>
    ascend.return
  }
}

// -----

// CHECK: ascend.remote_copy: dest must be a GM memref, got ub
builtin.module {
  ascend.kernel @k(%y: memref<8xf16, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %u = ascend.alloc : memref<8xf16, #ascend<space ub>>
    %r = ascend.group_rank {group = #ascend.device_group<[0, 1]>} : index
    ascend.remote_copy %y, %u, %r {group = #ascend.device_group<[0, 1]>} : memref<8xf16, #ascend<space gm>>, memref<8xf16, #ascend<space ub>>
    ascend.return
  }
}

// -----

// CHECK: ascend.remote_copy: element types differ (f16 vs f32)
builtin.module {
  ascend.kernel @k(%x: memref<8xf16, #ascend<space gm>>, %y: memref<8xf32, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %r = ascend.group_rank {group = #ascend.device_group<[0, 1]>} : index
    ascend.remote_copy %x, %y, %r {group = #ascend.device_group<[0, 1]>} : memref<8xf16, #ascend<space gm>>, memref<8xf32, #ascend<space gm>>
    ascend.return
  }
}

// -----

// CHECK: ascend.remote_copy: source [2, 8] and dest [1, 8] hold different chunks (shapes differ beyond unit dims)
builtin.module {
  ascend.kernel @k(%x: memref<2x8xf16, #ascend<space gm>>, %y: memref<1x8xf16, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %r = ascend.group_rank {group = #ascend.device_group<[0, 1]>} : index
    ascend.remote_copy %x, %y, %r {group = #ascend.device_group<[0, 1]>} : memref<2x8xf16, #ascend<space gm>>, memref<1x8xf16, #ascend<space gm>>
    ascend.return
  }
}

// -----

// CHECK: ascend.comm_reduce: stack must be a GM memref, got ub
builtin.module {
  ascend.kernel @k(%y: memref<8xf16, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %u = ascend.alloc : memref<2x8xf16, #ascend<space ub>>
    ascend.comm_reduce %u, %y : memref<2x8xf16, #ascend<space ub>>, memref<8xf16, #ascend<space gm>>
    ascend.return
  }
}

// -----

// CHECK: ascend.comm_reduce: dest must be a GM memref, got ub
builtin.module {
  ascend.kernel @k(%s: memref<2x8xf16, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %u = ascend.alloc : memref<8xf16, #ascend<space ub>>
    ascend.comm_reduce %s, %u : memref<2x8xf16, #ascend<space gm>>, memref<8xf16, #ascend<space ub>>
    ascend.return
  }
}

// -----

// CHECK: ascend.comm_reduce: the stack needs a leading axis of rows
builtin.module {
  ascend.kernel @k(%s: memref<f16, #ascend<space gm>>, %y: memref<f16, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    ascend.comm_reduce %s, %y : memref<f16, #ascend<space gm>>, memref<f16, #ascend<space gm>>
    ascend.return
  }
}

// -----

// CHECK: ascend.comm_reduce: element types differ (f16 vs f32)
builtin.module {
  ascend.kernel @k(%s: memref<2x8xf16, #ascend<space gm>>, %y: memref<8xf32, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    ascend.comm_reduce %s, %y : memref<2x8xf16, #ascend<space gm>>, memref<8xf32, #ascend<space gm>>
    ascend.return
  }
}

// -----

// CHECK: ascend.comm_reduce: a row of stack [2, 8] and dest [16] differ
builtin.module {
  ascend.kernel @k(%s: memref<2x8xf16, #ascend<space gm>>, %y: memref<16xf16, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    ascend.comm_reduce %s, %y : memref<2x8xf16, #ascend<space gm>>, memref<16xf16, #ascend<space gm>>
    ascend.return
  }
}

// -----

// CHECK: #ascend.device_group: a device is listed twice in [0, 0]
builtin.module {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %r = ascend.group_rank {group = #ascend.device_group<[0, 0]>} : index
    ascend.return
  }
}
