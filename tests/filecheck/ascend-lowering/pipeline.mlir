// RUN: ascendir-opt %s -p ascend-lowering | filecheck %s
// RUN: ascendir-opt %s -p 'ascend-lowering{target=ascend910a}' | filecheck %s --check-prefix=C100
// RUN: not ascendir-opt %s -p 'ascend-lowering{tiling="m=16"}' 2>&1 | filecheck %s --check-prefix=ERR

// The named pipeline is the whole lowering, as `ascendir compile` runs it: the constant stays
// an inline ascend.weight (no WeightStore in ascendir-opt's session), every kernel is planned
// (offsets on its on-chip allocs) and synchronized (flags), and @main carries the GM footprint.

// CHECK: builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">, ascend.target = #ascend.target<"ascend910b2">}
// CHECK: ascend.kernel @add_0
// CHECK: ascend.alloc {offset = 0 : i64} : memref<1x4xf32, #ascend<space ub>>
// CHECK: ascend.set_flag MTE2 -> V
// CHECK: func.func @main{{.*}}ascend.gm_footprint
// CHECK: ascend.weight @inline_const_0 {value = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00]>
// CHECK: ascend.launch @add_0

// C100: builtin.module attributes {ascend.arch = #ascend.arch<"dav-c100">, ascend.target = #ascend.target<"ascend910a">}

// ERR: ascendir-opt: error: bad pass pipeline 'ascend-lowering{tiling="m=16"}': ascend-lowering takes the options 'target' and 'topology', not 'tiling'
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c = nn.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %y = nn.add %x, %c : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}
