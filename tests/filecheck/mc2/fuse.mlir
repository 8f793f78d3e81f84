// RUN: ascendir-opt %s --split-input-file -p 'fuse-matmul-allreduce,fuse-allgather-matmul,fuse-matmul-reducescatter' | filecheck %s

// Row-parallel matmul + bias, its all_reduce and the residual add: one matmul_all_reduce region.
// CHECK-LABEL: func.func @matmul_all_reduce
// CHECK-NEXT:    %[[F:.*]] = nn.fused(%x, %w, %b, %r) {kind = #nn.fused_kind<matmul_all_reduce>}
// CHECK:           nn.matmul
// CHECK-NEXT:      nn.add
// CHECK-NEXT:      nn.all_reduce
// CHECK-NEXT:      nn.add
// CHECK-NEXT:      nn.yield
// CHECK:         func.return %[[F]]
func.func @matmul_all_reduce(%x: tensor<1x64x32xf16>, %w: tensor<32x64xf16>, %b: tensor<64xf16>, %r: tensor<1x64x64xf16>) -> tensor<1x64x64xf16> {
  %m = nn.matmul %x, %w : (tensor<1x64x32xf16>, tensor<32x64xf16>) -> tensor<1x64x64xf16>
  %y = nn.add %m, %b : (tensor<1x64x64xf16>, tensor<64xf16>) -> tensor<1x64x64xf16>
  %s = nn.all_reduce %y {group = #ascend.device_group<[0, 1]>} : (tensor<1x64x64xf16>) -> tensor<1x64x64xf16>
  %o = nn.add %s, %r : (tensor<1x64x64xf16>, tensor<1x64x64xf16>) -> tensor<1x64x64xf16>
  func.return %o : tensor<1x64x64xf16>
}

// -----

// Sequence parallelism: the gathered rows feed two projections; the first joins the
// all_gather_matmul region, whose second result (gatherOut) feeds the other. The row-parallel
// matmul and its reduce_scatter become a matmul_reduce_scatter region.
// CHECK-LABEL: func.func @sequence_parallel
// CHECK:         %[[Q:.*]], %[[G:.*]] = nn.fused(%x, %wq) {kind = #nn.fused_kind<all_gather_matmul>}
// CHECK:           nn.all_gather
// CHECK-NEXT:      nn.matmul
// CHECK-NEXT:      nn.yield
// CHECK:         nn.matmul %[[G]], %wk
// CHECK:         nn.fused({{.*}}) {kind = #nn.fused_kind<matmul_reduce_scatter>}
// CHECK:           nn.matmul
// CHECK-NEXT:      nn.reduce_scatter
// CHECK-NEXT:      nn.yield
func.func @sequence_parallel(%x: tensor<1x32x32xf16>, %wq: tensor<32x16xf16>, %wk: tensor<32x16xf16>, %wo: tensor<16x32xf16>) -> tensor<1x32x32xf16> {
  %g = nn.all_gather %x {group = #ascend.device_group<[0, 1]>, axis = 1 : i64} : (tensor<1x32x32xf16>) -> tensor<1x64x32xf16>
  %q = nn.matmul %g, %wq : (tensor<1x64x32xf16>, tensor<32x16xf16>) -> tensor<1x64x16xf16>
  %k = nn.matmul %g, %wk : (tensor<1x64x32xf16>, tensor<32x16xf16>) -> tensor<1x64x16xf16>
  %a = nn.add %q, %k : (tensor<1x64x16xf16>, tensor<1x64x16xf16>) -> tensor<1x64x16xf16>
  %o = nn.matmul %a, %wo : (tensor<1x64x16xf16>, tensor<16x32xf16>) -> tensor<1x64x32xf16>
  %s = nn.reduce_scatter %o {group = #ascend.device_group<[0, 1]>, axis = 1 : i64} : (tensor<1x64x32xf16>) -> tensor<1x32x32xf16>
  func.return %s : tensor<1x32x32xf16>
}

// -----

// A batch axis before the sequence axis: the shards are not blocks of whole rows, nothing fused.
// CHECK-LABEL: func.func @batch_first
// CHECK-NOT:     nn.fused
func.func @batch_first(%x: tensor<2x16x32xf16>, %w: tensor<32x16xf16>) -> tensor<2x32x16xf16> {
  %g = nn.all_gather %x {group = #ascend.device_group<[0, 1]>, axis = 1 : i64} : (tensor<2x16x32xf16>) -> tensor<2x32x32xf16>
  %q = nn.matmul %g, %w : (tensor<2x32x32xf16>, tensor<32x16xf16>) -> tensor<2x32x16xf16>
  func.return %q : tensor<2x32x16xf16>
}
