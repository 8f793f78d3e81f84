// RUN: not ascendir-opt %s -p "convert-nn-to-ascend{target=ascend910b4},plan-memory" 2>&1 | filecheck %s
// RUN: ascendir-opt %s -p "convert-nn-to-ascend{target=ascend910b2},plan-memory" | filecheck %s --check-prefix=B2

// exp(relu(x)) on 65536 x 65536 f32: the 16 GiB input, the 16 GiB intermediate (the arena) and
// the 16 GiB output are in GM together. 48 GiB exceed the 32 GiB HBM of a 910B4: plan-memory
// fails, naming the footprint, its parts, the capacity and the target. The 64 GiB of a 910B2
// hold it.
// CHECK:      ascendir-opt: error: plan-memory: @main needs 51539607552 B of GM (weights 0 + inputs 17179869184 + outputs 17179869184 + arena 17179869184), more than the 34359738368 B of HBM on ascend910b4
// CHECK-EMPTY:
// B2:         ascend.gm_footprint = {weights = 0 : i64, inputs = 17179869184 : i64, outputs = 17179869184 : i64, arena = 17179869184 : i64, total = 51539607552 : i64
func.func @main(%x: tensor<65536x65536xf32>) -> tensor<65536x65536xf32> {
  %r = nn.relu %x : (tensor<65536x65536xf32>) -> tensor<65536x65536xf32>
  %y = nn.exp %r : (tensor<65536x65536xf32>) -> tensor<65536x65536xf32>
  func.return %y : tensor<65536x65536xf32>
}
