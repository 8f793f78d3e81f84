// RUN: ascendir-opt %s | ascendir-opt | filecheck %s
// RUN: ascendir-opt %s --print-op-generic | ascendir-opt | filecheck %s

// Round trip of the communication ops (ops_comm.py).

// CHECK:      %r = ascend.group_rank {group = #ascend.device_group<[0, 1]>} : index
// CHECK-NEXT: %row = memref.subview
// CHECK-NEXT: ascend.notify_record %r {group = #ascend.device_group<[0, 1]>}
// CHECK-NEXT: ascend.notify_wait %r {group = #ascend.device_group<[0, 1]>}
// CHECK-NEXT: ascend.remote_copy %row, %y, %r {group = #ascend.device_group<[0, 1]>} : memref<1x8xf16, strided<[8, 1], offset: ?>, #ascend<space gm>>, memref<8xf16, #ascend<space gm>>
// CHECK-NEXT: ascend.comm_reduce %s, %y : memref<2x8xf16, #ascend<space gm>>, memref<8xf16, #ascend<space gm>>
builtin.module {
  ascend.kernel @k(%x: memref<2x8xf16, #ascend<space gm>>, %y: memref<8xf16, #ascend<space gm>>, %s: memref<2x8xf16, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %r = ascend.group_rank {group = #ascend.device_group<[0, 1]>} : index
    %row = memref.subview %x[%r, 0] [1, 8] [1, 1] : memref<2x8xf16, #ascend<space gm>> to memref<1x8xf16, strided<[8, 1], offset: ?>, #ascend<space gm>>
    ascend.notify_record %r {group = #ascend.device_group<[0, 1]>}
    ascend.notify_wait %r {group = #ascend.device_group<[0, 1]>}
    ascend.remote_copy %row, %y, %r {group = #ascend.device_group<[0, 1]>} : memref<1x8xf16, strided<[8, 1], offset: ?>, #ascend<space gm>>, memref<8xf16, #ascend<space gm>>
    ascend.comm_reduce %s, %y : memref<2x8xf16, #ascend<space gm>>, memref<8xf16, #ascend<space gm>>
    ascend.return
  }
}
