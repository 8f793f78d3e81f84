// RUN: ascendir-opt %s -p convert-nn-to-ascend,plan-memory | filecheck %s

// A chain of four launches (of two kernels: identical ops share one): the intermediates of kernels 1 and 3 are never live at the same
// launch, so they share arena offset 0; the result is an output, outside the arena. Footprint:
// 32 KiB input + 32 KiB output + a 64 KiB arena (three 32 KiB intermediates without reuse).
// CHECK:      func.func @main
// CHECK-SAME: ascend.gm_footprint = {weights = 0 : i64, inputs = 32768 : i64, outputs = 32768 : i64, arena = 65536 : i64, total = 131072 : i64, live_peak = 98304 : i64}
// CHECK:      %[[T1:.*]] = ascend.alloc {offset = 0 : i64} : memref<64x256xf16, #ascend<space gm>>
// CHECK:      ascend.launch @relu_0
// CHECK:      %[[T2:.*]] = ascend.alloc {offset = 32768 : i64} : memref<64x256xf16, #ascend<space gm>>
// CHECK:      ascend.launch @exp_0
// CHECK:      %[[T3:.*]] = ascend.alloc {offset = 0 : i64} : memref<64x256xf16, #ascend<space gm>>
// CHECK:      ascend.launch @relu_0
// CHECK:      %[[OUT:.*]] = ascend.alloc : memref<64x256xf16, #ascend<space gm>>
// CHECK:      ascend.launch @exp_0
// CHECK:      func.return %[[OUT]]
func.func @main(%x: tensor<64x256xf16>) -> tensor<64x256xf16> {
  %a = nn.relu %x : (tensor<64x256xf16>) -> tensor<64x256xf16>
  %b = nn.exp %a : (tensor<64x256xf16>) -> tensor<64x256xf16>
  %c = nn.relu %b : (tensor<64x256xf16>) -> tensor<64x256xf16>
  %d = nn.exp %c : (tensor<64x256xf16>) -> tensor<64x256xf16>
  func.return %d : tensor<64x256xf16>
}
