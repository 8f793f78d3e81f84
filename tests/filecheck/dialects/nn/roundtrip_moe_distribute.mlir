// RUN: ascendir-opt %s | filecheck %s
// RUN: ascendir-opt %s | ascendir-opt | filecheck %s

// Expert parallelism's exchanges (shard-expert-parallel): 4 experts over 2 devices, 4 routed
// pairs per device; types are one rank's.

// CHECK:      %ex, %eids, %offs, %idx = nn.moe_distribute_dispatch %x, %ids {group = #ascend.device_group<[0, 1]>, experts = 4 : i64} : (tensor<4x8xf16>, tensor<4xi64>) -> (tensor<8x8xf16>, tensor<8xi64>, tensor<2x3xi64>, tensor<4xi64>)
// CHECK-NEXT: %y = nn.moe_distribute_combine %ex, %offs, %idx {group = #ascend.device_group<[0, 1]>, experts = 4 : i64} : (tensor<8x8xf16>, tensor<2x3xi64>, tensor<4xi64>) -> tensor<4x8xf16>
func.func @main(%x: tensor<4x8xf16>, %ids: tensor<4xi64>) -> tensor<4x8xf16> {
  %ex, %eids, %offs, %idx = nn.moe_distribute_dispatch %x, %ids {group = #ascend.device_group<[0, 1]>, experts = 4 : i64} : (tensor<4x8xf16>, tensor<4xi64>) -> (tensor<8x8xf16>, tensor<8xi64>, tensor<2x3xi64>, tensor<4xi64>)
  %y = nn.moe_distribute_combine %ex, %offs, %idx {group = #ascend.device_group<[0, 1]>, experts = 4 : i64} : (tensor<8x8xf16>, tensor<2x3xi64>, tensor<4xi64>) -> tensor<4x8xf16>
  func.return %y : tensor<4x8xf16>
}
