// RUN: ascendir-opt %s | filecheck %s
// RUN: ascendir-opt %s | ascendir-opt | filecheck %s

// The collectives of a sharded (SPMD) module: types are one rank's.

// CHECK:      %a = nn.all_reduce %x {group = #ascend.device_group<[0, 1]>} : (tensor<4x8xf16>) -> tensor<4x8xf16>
// CHECK-NEXT: %b = nn.all_gather %a {group = #ascend.device_group<[0, 1]>, axis = 0 : i64} : (tensor<4x8xf16>) -> tensor<8x8xf16>
// CHECK-NEXT: %c = nn.reduce_scatter %b {group = #ascend.device_group<[0, 1]>, axis = 0 : i64} : (tensor<8x8xf16>) -> tensor<4x8xf16>
// CHECK-NEXT: %d = nn.all_to_all %b {group = #ascend.device_group<[3, 2]>, split_axis = 0 : i64, concat_axis = 1 : i64} : (tensor<8x8xf16>) -> tensor<4x16xf16>
func.func @main(%x: tensor<4x8xf16>) -> tensor<4x16xf16> {
  %a = nn.all_reduce %x {group = #ascend.device_group<[0, 1]>} : (tensor<4x8xf16>) -> tensor<4x8xf16>
  %b = nn.all_gather %a {group = #ascend.device_group<[0, 1]>, axis = 0 : i64} : (tensor<4x8xf16>) -> tensor<8x8xf16>
  %c = nn.reduce_scatter %b {group = #ascend.device_group<[0, 1]>, axis = 0 : i64} : (tensor<8x8xf16>) -> tensor<4x8xf16>
  %d = nn.all_to_all %b {group = #ascend.device_group<[3, 2]>, split_axis = 0 : i64, concat_axis = 1 : i64} : (tensor<8x8xf16>) -> tensor<4x16xf16>
  func.return %d : tensor<4x16xf16>
}
