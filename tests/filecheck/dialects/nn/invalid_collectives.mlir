// RUN: ascendir-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Every verifier error of the collectives (collectives.py) and #ascend.device_group.

// CHECK: #ascend.device_group: a group holds at least one device
func.func @main(%x: tensor<4x8xf16>) {
  %a = nn.all_reduce %x {group = #ascend.device_group<[]>} : (tensor<4x8xf16>) -> tensor<4x8xf16>
  func.return
}

// -----

// CHECK: #ascend.device_group: device -1 is negative
func.func @main(%x: tensor<4x8xf16>) {
  %a = nn.all_reduce %x {group = #ascend.device_group<[0, -1]>} : (tensor<4x8xf16>) -> tensor<4x8xf16>
  func.return
}

// -----

// CHECK: #ascend.device_group: a device is listed twice in [1, 1]
func.func @main(%x: tensor<4x8xf16>) {
  %a = nn.all_reduce %x {group = #ascend.device_group<[1, 1]>} : (tensor<4x8xf16>) -> tensor<4x8xf16>
  func.return
}

// -----

// CHECK: nn.all_reduce: the result keeps the operand's element type
func.func @main(%x: tensor<4x8xf16>) {
  %a = nn.all_reduce %x {group = #ascend.device_group<[0, 1]>} : (tensor<4x8xf16>) -> tensor<4x8xf32>
  func.return
}

// -----

// CHECK: nn.all_gather: over 3 devices, operand [4, 8] gives result [12, 8], not [8, 8]
func.func @main(%x: tensor<4x8xf16>) {
  %a = nn.all_gather %x {group = #ascend.device_group<[0, 1, 2]>, axis = 0 : i64} : (tensor<4x8xf16>) -> tensor<8x8xf16>
  func.return
}

// -----

// CHECK: nn.all_gather: axis 2 out of range for rank 2
func.func @main(%x: tensor<4x8xf16>) {
  %a = nn.all_gather %x {group = #ascend.device_group<[0, 1]>, axis = 2 : i64} : (tensor<4x8xf16>) -> tensor<8x8xf16>
  func.return
}

// -----

// CHECK: nn.reduce_scatter: scattered dim 1 (8) does not split over 3 devices
func.func @main(%x: tensor<4x8xf16>) {
  %a = nn.reduce_scatter %x {group = #ascend.device_group<[0, 1, 2]>, axis = 1 : i64} : (tensor<4x8xf16>) -> tensor<4x2xf16>
  func.return
}

// -----

// CHECK: nn.all_to_all: split_axis 5 out of range for rank 2
func.func @main(%x: tensor<8x8xf16>) {
  %a = nn.all_to_all %x {group = #ascend.device_group<[0, 1]>, split_axis = 5 : i64, concat_axis = 1 : i64} : (tensor<8x8xf16>) -> tensor<4x16xf16>
  func.return
}

// -----

// CHECK: nn.all_to_all: over 2 devices, operand [8, 8] gives result [4, 16], not [8, 8]
func.func @main(%x: tensor<8x8xf16>) {
  %a = nn.all_to_all %x {group = #ascend.device_group<[0, 1]>, split_axis = 0 : i64, concat_axis = 1 : i64} : (tensor<8x8xf16>) -> tensor<8x8xf16>
  func.return
}
