// RUN: ascendir-opt %s --split-input-file -p fuse-moe-gating | filecheck %s

// Mixtral's router: softmax, top-2, the two weights renormalised: one region yielding the
// weights and the expert ids.
// CHECK-LABEL: func.func @softmax_topk_renorm
// CHECK-NEXT:    %[[W:.*]], %[[I:.*]] = nn.fused(%x) {kind = #nn.fused_kind<moe_gating>}
// CHECK-NEXT:    ^{{.*}}(%[[X:.*]]: tensor<64x8xf32>):
// CHECK-NEXT:      %[[P:.*]] = nn.softmax %[[X]] {axis = 1 : i64}
// CHECK-NEXT:      %[[V:.*]], %[[IDX:.*]] = nn.topk %[[P]] {k = 2 : i64, axis = 1 : i64, largest = true}
// CHECK-NEXT:      %[[S:.*]] = nn.reduce_sum %[[V]]
// CHECK-NEXT:      %[[D:.*]] = nn.div %[[V]], %[[S]]
// CHECK-NEXT:      nn.yield %[[D]], %[[IDX]]
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[W]], %[[I]]
func.func @softmax_topk_renorm(%x: tensor<64x8xf32>) -> (tensor<64x2xf32>, tensor<64x2xi64>) {
  %p = nn.softmax %x {axis = 1 : i64} : (tensor<64x8xf32>) -> tensor<64x8xf32>
  %v, %i = nn.topk %p {k = 2 : i64, axis = 1 : i64, largest = true} : (tensor<64x8xf32>) -> (tensor<64x2xf32>, tensor<64x2xi64>)
  %s = nn.reduce_sum %v {axes = array<i64: 1>, keepdims = true} : (tensor<64x2xf32>) -> tensor<64x1xf32>
  %w = nn.div %v, %s : (tensor<64x2xf32>, tensor<64x1xf32>) -> tensor<64x2xf32>
  func.return %w, %i : tensor<64x2xf32>, tensor<64x2xi64>
}

// -----

// Qwen2-MoE's router (no renormalisation), sigmoid scores: the top-k values are the weights.
// CHECK-LABEL: func.func @sigmoid_topk
// CHECK-NEXT:    %[[W:.*]], %[[I:.*]] = nn.fused(%x) {kind = #nn.fused_kind<moe_gating>}
// CHECK:           nn.sigmoid
// CHECK-NEXT:      %[[V:.*]], %[[IDX:.*]] = nn.topk
// CHECK-NEXT:      nn.yield %[[V]], %[[IDX]]
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[M:.*]] = nn.mul %[[W]], %[[W]]
func.func @sigmoid_topk(%x: tensor<16x60xf16>) -> (tensor<16x4xf16>, tensor<16x4xi64>) {
  %p = nn.sigmoid %x : (tensor<16x60xf16>) -> tensor<16x60xf16>
  %v, %i = nn.topk %p {k = 4 : i64, axis = 1 : i64, largest = true} : (tensor<16x60xf16>) -> (tensor<16x4xf16>, tensor<16x4xi64>)
  %m = nn.mul %v, %v : (tensor<16x4xf16>, tensor<16x4xf16>) -> tensor<16x4xf16>
  func.return %m, %i : tensor<16x4xf16>, tensor<16x4xi64>
}

// -----

// NOT fused: the scores are read elsewhere too, the smallest k are taken, and a softmax over
// another axis than the topk's.
// CHECK-LABEL: func.func @not_gating
// CHECK-NOT:     nn.fused
func.func @not_gating(%x: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x2xf32>, tensor<8x2xf32>, tensor<8x2xi64>) {
  %p = nn.softmax %x {axis = 1 : i64} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %v, %i = nn.topk %p {k = 2 : i64, axis = 1 : i64, largest = true} : (tensor<8x16xf32>) -> (tensor<8x2xf32>, tensor<8x2xi64>)
  %q = nn.sigmoid %x : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %u, %j = nn.topk %q {k = 2 : i64, axis = 1 : i64, largest = false} : (tensor<8x16xf32>) -> (tensor<8x2xf32>, tensor<8x2xi64>)
  %r = nn.softmax %x {axis = 0 : i64} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %w, %l = nn.topk %r {k = 2 : i64, axis = 1 : i64, largest = true} : (tensor<8x16xf32>) -> (tensor<8x2xf32>, tensor<8x2xi64>)
  func.return %p, %v, %u, %l : tensor<8x16xf32>, tensor<8x2xf32>, tensor<8x2xf32>, tensor<8x2xi64>
}
