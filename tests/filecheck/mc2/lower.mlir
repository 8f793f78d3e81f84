// RUN: ascendir-opt %s -p 'fuse-matmul-allreduce{chunks=2},convert-nn-to-ascend' | filecheck %s

// MatmulAllReduce in 2 row chunks: chunk 0's all_reduce comm kernel runs in the background
// (ascend.async) beside chunk 1's matmul (ascend.overlap = 1), chunk 1's all_reduce joins; then
// the residual add. The chunks are views of row blocks of the operands (host memref.subview).
// CHECK-LABEL: func.func @main
// CHECK:         memref.subview
// CHECK:         ascend.launch @mc2_matmul_0
// CHECK-NOT:     ascend.overlap
// CHECK:         ascend.launch @mc2_all_reduce_0({{.*}}) {ascend.async}
// CHECK:         ascend.launch @mc2_matmul_1({{.*}}) {ascend.overlap = 1 : i64}
// CHECK:         ascend.launch @mc2_all_reduce_1({{.*}}) :
// CHECK:         ascend.launch @add_0
func.func @main(%x: tensor<1x64x32xf16>, %w: tensor<32x64xf16>, %r: tensor<1x64x64xf16>) -> tensor<1x64x64xf16> {
  %m = nn.matmul %x, %w : (tensor<1x64x32xf16>, tensor<32x64xf16>) -> tensor<1x64x64xf16>
  %s = nn.all_reduce %m {group = #ascend.device_group<[0, 1]>} : (tensor<1x64x64xf16>) -> tensor<1x64x64xf16>
  %o = nn.add %s, %r : (tensor<1x64x64xf16>, tensor<1x64x64xf16>) -> tensor<1x64x64xf16>
  func.return %o : tensor<1x64x64xf16>
}
