// RUN: ascendir-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Every verifier error of expert parallelism's exchanges (moe_distribute.py).

// CHECK: nn.moe_distribute_dispatch: 3 experts do not split over 2 devices
func.func @main(%x: tensor<4x8xf16>, %ids: tensor<4xi64>) {
  %ex, %eids, %offs, %idx = nn.moe_distribute_dispatch %x, %ids {group = #ascend.device_group<[0, 1]>, experts = 3 : i64} : (tensor<4x8xf16>, tensor<4xi64>) -> (tensor<8x8xf16>, tensor<8xi64>, tensor<2x2xi64>, tensor<4xi64>)
  func.return
}

// -----

// CHECK: nn.moe_distribute_dispatch: expert_ids must be i64, got i32
func.func @main(%x: tensor<4x8xf16>, %ids: tensor<4xi32>) {
  %ex, %eids, %offs, %idx = nn.moe_distribute_dispatch %x, %ids {group = #ascend.device_group<[0, 1]>, experts = 4 : i64} : (tensor<4x8xf16>, tensor<4xi32>) -> (tensor<8x8xf16>, tensor<8xi64>, tensor<2x3xi64>, tensor<4xi64>)
  func.return
}

// -----

// CHECK: nn.moe_distribute_dispatch: x must be [P, H] and expert_ids [P], got [4, 8] and [5]
func.func @main(%x: tensor<4x8xf16>, %ids: tensor<5xi64>) {
  %ex, %eids, %offs, %idx = nn.moe_distribute_dispatch %x, %ids {group = #ascend.device_group<[0, 1]>, experts = 4 : i64} : (tensor<4x8xf16>, tensor<5xi64>) -> (tensor<8x8xf16>, tensor<8xi64>, tensor<2x3xi64>, tensor<4xi64>)
  func.return
}

// -----

// CHECK: nn.moe_distribute_dispatch: results must be [[8, 8], [8], [2, 3], [4]], got [[8, 8], [8], [2, 2], [4]]
func.func @main(%x: tensor<4x8xf16>, %ids: tensor<4xi64>) {
  %ex, %eids, %offs, %idx = nn.moe_distribute_dispatch %x, %ids {group = #ascend.device_group<[0, 1]>, experts = 4 : i64} : (tensor<4x8xf16>, tensor<4xi64>) -> (tensor<8x8xf16>, tensor<8xi64>, tensor<2x2xi64>, tensor<4xi64>)
  func.return
}

// -----

// CHECK: nn.moe_distribute_dispatch: expand_x keeps x's element type
func.func @main(%x: tensor<4x8xf16>, %ids: tensor<4xi64>) {
  %ex, %eids, %offs, %idx = nn.moe_distribute_dispatch %x, %ids {group = #ascend.device_group<[0, 1]>, experts = 4 : i64} : (tensor<4x8xf16>, tensor<4xi64>) -> (tensor<8x8xf32>, tensor<8xi64>, tensor<2x3xi64>, tensor<4xi64>)
  func.return
}

// -----

// CHECK: nn.moe_distribute_combine: expand_y [6, 8], offsets [2, 3] and expand_idx [4] do not fit 2 devices
func.func @main(%ey: tensor<6x8xf16>, %offs: tensor<2x3xi64>, %idx: tensor<4xi64>) {
  %y = nn.moe_distribute_combine %ey, %offs, %idx {group = #ascend.device_group<[0, 1]>, experts = 4 : i64} : (tensor<6x8xf16>, tensor<2x3xi64>, tensor<4xi64>) -> tensor<4x8xf16>
  func.return
}

// -----

// CHECK: nn.moe_distribute_combine: the result must be [4, 8] of expand_y's element type
func.func @main(%ey: tensor<8x8xf16>, %offs: tensor<2x3xi64>, %idx: tensor<4xi64>) {
  %y = nn.moe_distribute_combine %ey, %offs, %idx {group = #ascend.device_group<[0, 1]>, experts = 4 : i64} : (tensor<8x8xf16>, tensor<2x3xi64>, tensor<4xi64>) -> tensor<4x8xf32>
  func.return
}
