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


// -----

// DeepSeek-V3's group-limited router as the importer writes it (TopK within 4 groups, their
// top-2 sums, TopK of 2 groups, ScatterElements of ones, the mask expanded to the experts,
// Where(Not(Cast)), TopK, GatherElements of the un-biased scores, renorm, routed scaling): one
// region from the sigmoid to the scaling, with the bias, fill and scale as its inputs.
// CHECK-LABEL: func.func @group_limited
// CHECK:         %[[W:.*]], %[[I:.*]] = nn.fused(%x, %bias, {{.*}}) {kind = #nn.fused_kind<moe_gating>}
// CHECK:           nn.sigmoid
// CHECK:           nn.topk {{.*}}k = 2 : i64, axis = 2 : i64
// CHECK:           nn.reduce_sum
// CHECK:           nn.topk {{.*}}k = 2 : i64, axis = 1 : i64
// CHECK:           nn.where
// CHECK:           %[[V:.*]], %[[IDX:.*]] = nn.topk
// CHECK:           nn.gather
// CHECK:           nn.div
// CHECK:           %[[S:.*]] = nn.mul
// CHECK-NEXT:      nn.yield %[[S]], %[[IDX]]
// CHECK-NEXT:    }
// CHECK-NOT:     nn.
// CHECK:         func.return %[[W]], %[[I]]
func.func @group_limited(%x: tensor<2x8xf32>, %bias: tensor<8xf32>) -> (tensor<2x2xf32>, tensor<2x2xi64>) {
  %p = nn.sigmoid %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %b = nn.add %p, %bias : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %r = nn.reshape %b : (tensor<2x8xf32>) -> tensor<2x4x2xf32>
  %tv, %ti = nn.topk %r {k = 2 : i64, axis = 2 : i64, largest = true} : (tensor<2x4x2xf32>) -> (tensor<2x4x2xf32>, tensor<2x4x2xi64>)
  %gs = nn.reduce_sum %tv {axes = array<i64: 2>, keepdims = false} : (tensor<2x4x2xf32>) -> tensor<2x4xf32>
  %gv, %gi = nn.topk %gs {k = 2 : i64, axis = 1 : i64, largest = true} : (tensor<2x4xf32>) -> (tensor<2x2xf32>, tensor<2x2xi64>)
  %c0 = nn.constant dense<0> : tensor<i64>
  %cg = nn.constant dense<4> : tensor<i64>
  %gia = nn.add %gi, %cg : (tensor<2x2xi64>, tensor<i64>) -> tensor<2x2xi64>
  %gil = nn.less %gi, %c0 : (tensor<2x2xi64>, tensor<i64>) -> tensor<2x2xi1>
  %gif = nn.where %gil, %gia, %gi : (tensor<2x2xi1>, tensor<2x2xi64>, tensor<2x2xi64>) -> tensor<2x2xi64>
  %iota = nn.constant dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>
  %zeros = nn.constant dense<0.0> : tensor<2x4xf32>
  %ones = nn.constant dense<1.0> : tensor<2x2xf32>
  %s0 = nn.slice %gif {starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : (tensor<2x2xi64>) -> tensor<2x1xi64>
  %u0 = nn.slice %ones {starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : (tensor<2x2xf32>) -> tensor<2x1xf32>
  %q0 = nn.equal %s0, %iota : (tensor<2x1xi64>, tensor<1x4xi64>) -> tensor<2x4xi1>
  %a0 = nn.where %q0, %u0, %zeros : (tensor<2x4xi1>, tensor<2x1xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %s1 = nn.slice %gif {starts = array<i64: 0, 1>, steps = array<i64: 1, 1>} : (tensor<2x2xi64>) -> tensor<2x1xi64>
  %u1 = nn.slice %ones {starts = array<i64: 0, 1>, steps = array<i64: 1, 1>} : (tensor<2x2xf32>) -> tensor<2x1xf32>
  %q1 = nn.equal %s1, %iota : (tensor<2x1xi64>, tensor<1x4xi64>) -> tensor<2x4xi1>
  %a1 = nn.where %q1, %u1, %a0 : (tensor<2x4xi1>, tensor<2x1xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %m0 = nn.reshape %a1 : (tensor<2x4xf32>) -> tensor<2x4x1xf32>
  %m1 = nn.expand %m0 : (tensor<2x4x1xf32>) -> tensor<2x4x2xf32>
  %m2 = nn.reshape %m1 : (tensor<2x4x2xf32>) -> tensor<2x8xf32>
  %mb = nn.cast %m2 : (tensor<2x8xf32>) -> tensor<2x8xi1>
  %mn = nn.not %mb : (tensor<2x8xi1>) -> tensor<2x8xi1>
  %ninf = nn.constant dense<-3.0e+38> : tensor<f32>
  %sc = nn.where %mn, %ninf, %b : (tensor<2x8xi1>, tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %v, %ids = nn.topk %sc {k = 2 : i64, axis = 1 : i64, largest = true} : (tensor<2x8xf32>) -> (tensor<2x2xf32>, tensor<2x2xi64>)
  %flat = nn.reshape %p : (tensor<2x8xf32>) -> tensor<16xf32>
  %ce = nn.constant dense<8> : tensor<i64>
  %ia = nn.add %ids, %ce : (tensor<2x2xi64>, tensor<i64>) -> tensor<2x2xi64>
  %il = nn.less %ids, %c0 : (tensor<2x2xi64>, tensor<i64>) -> tensor<2x2xi1>
  %if = nn.where %il, %ia, %ids : (tensor<2x2xi1>, tensor<2x2xi64>, tensor<2x2xi64>) -> tensor<2x2xi64>
  %off = nn.constant dense<[[0, 0], [8, 8]]> : tensor<2x2xi64>
  %fi = nn.add %if, %off : (tensor<2x2xi64>, tensor<2x2xi64>) -> tensor<2x2xi64>
  %w = nn.gather %flat, %fi {axis = 0 : i64} : (tensor<16xf32>, tensor<2x2xi64>) -> tensor<2x2xf32>
  %ws = nn.reduce_sum %w {axes = array<i64: 1>, keepdims = true} : (tensor<2x2xf32>) -> tensor<2x1xf32>
  %wn = nn.div %w, %ws : (tensor<2x2xf32>, tensor<2x1xf32>) -> tensor<2x2xf32>
  %scale = nn.constant dense<2.5> : tensor<f32>
  %wsc = nn.mul %wn, %scale : (tensor<2x2xf32>, tensor<f32>) -> tensor<2x2xf32>
  func.return %wsc, %ids : tensor<2x2xf32>, tensor<2x2xi64>
}

// -----

// NOT fused: the scatter's iota is not 0..G-1 (another mask than the groups').
// CHECK-LABEL: func.func @group_limited_wrong_iota
// CHECK-NOT:     nn.fused
func.func @group_limited_wrong_iota(%x: tensor<2x8xf32>, %bias: tensor<8xf32>) -> (tensor<2x2xf32>, tensor<2x2xi64>) {
  %p = nn.sigmoid %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %b = nn.add %p, %bias : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %r = nn.reshape %b : (tensor<2x8xf32>) -> tensor<2x4x2xf32>
  %tv, %ti = nn.topk %r {k = 2 : i64, axis = 2 : i64, largest = true} : (tensor<2x4x2xf32>) -> (tensor<2x4x2xf32>, tensor<2x4x2xi64>)
  %gs = nn.reduce_sum %tv {axes = array<i64: 2>, keepdims = false} : (tensor<2x4x2xf32>) -> tensor<2x4xf32>
  %gv, %gi = nn.topk %gs {k = 2 : i64, axis = 1 : i64, largest = true} : (tensor<2x4xf32>) -> (tensor<2x2xf32>, tensor<2x2xi64>)
  %c0 = nn.constant dense<0> : tensor<i64>
  %cg = nn.constant dense<4> : tensor<i64>
  %gia = nn.add %gi, %cg : (tensor<2x2xi64>, tensor<i64>) -> tensor<2x2xi64>
  %gil = nn.less %gi, %c0 : (tensor<2x2xi64>, tensor<i64>) -> tensor<2x2xi1>
  %gif = nn.where %gil, %gia, %gi : (tensor<2x2xi1>, tensor<2x2xi64>, tensor<2x2xi64>) -> tensor<2x2xi64>
  %iota = nn.constant dense<[[0, 1, 3, 2]]> : tensor<1x4xi64>
  %zeros = nn.constant dense<0.0> : tensor<2x4xf32>
  %ones = nn.constant dense<1.0> : tensor<2x2xf32>
  %s0 = nn.slice %gif {starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : (tensor<2x2xi64>) -> tensor<2x1xi64>
  %u0 = nn.slice %ones {starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : (tensor<2x2xf32>) -> tensor<2x1xf32>
  %q0 = nn.equal %s0, %iota : (tensor<2x1xi64>, tensor<1x4xi64>) -> tensor<2x4xi1>
  %a0 = nn.where %q0, %u0, %zeros : (tensor<2x4xi1>, tensor<2x1xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %s1 = nn.slice %gif {starts = array<i64: 0, 1>, steps = array<i64: 1, 1>} : (tensor<2x2xi64>) -> tensor<2x1xi64>
  %u1 = nn.slice %ones {starts = array<i64: 0, 1>, steps = array<i64: 1, 1>} : (tensor<2x2xf32>) -> tensor<2x1xf32>
  %q1 = nn.equal %s1, %iota : (tensor<2x1xi64>, tensor<1x4xi64>) -> tensor<2x4xi1>
  %a1 = nn.where %q1, %u1, %a0 : (tensor<2x4xi1>, tensor<2x1xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %m0 = nn.reshape %a1 : (tensor<2x4xf32>) -> tensor<2x4x1xf32>
  %m1 = nn.expand %m0 : (tensor<2x4x1xf32>) -> tensor<2x4x2xf32>
  %m2 = nn.reshape %m1 : (tensor<2x4x2xf32>) -> tensor<2x8xf32>
  %mb = nn.cast %m2 : (tensor<2x8xf32>) -> tensor<2x8xi1>
  %mn = nn.not %mb : (tensor<2x8xi1>) -> tensor<2x8xi1>
  %ninf = nn.constant dense<-3.0e+38> : tensor<f32>
  %sc = nn.where %mn, %ninf, %b : (tensor<2x8xi1>, tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %v, %ids = nn.topk %sc {k = 2 : i64, axis = 1 : i64, largest = true} : (tensor<2x8xf32>) -> (tensor<2x2xf32>, tensor<2x2xi64>)
  %flat = nn.reshape %p : (tensor<2x8xf32>) -> tensor<16xf32>
  %ce = nn.constant dense<8> : tensor<i64>
  %ia = nn.add %ids, %ce : (tensor<2x2xi64>, tensor<i64>) -> tensor<2x2xi64>
  %il = nn.less %ids, %c0 : (tensor<2x2xi64>, tensor<i64>) -> tensor<2x2xi1>
  %if = nn.where %il, %ia, %ids : (tensor<2x2xi1>, tensor<2x2xi64>, tensor<2x2xi64>) -> tensor<2x2xi64>
  %off = nn.constant dense<[[0, 0], [8, 8]]> : tensor<2x2xi64>
  %fi = nn.add %if, %off : (tensor<2x2xi64>, tensor<2x2xi64>) -> tensor<2x2xi64>
  %w = nn.gather %flat, %fi {axis = 0 : i64} : (tensor<16xf32>, tensor<2x2xi64>) -> tensor<2x2xf32>
  %ws = nn.reduce_sum %w {axes = array<i64: 1>, keepdims = true} : (tensor<2x2xf32>) -> tensor<2x1xf32>
  %wn = nn.div %w, %ws : (tensor<2x2xf32>, tensor<2x1xf32>) -> tensor<2x2xf32>
  %scale = nn.constant dense<2.5> : tensor<f32>
  %wsc = nn.mul %wn, %scale : (tensor<2x2xf32>, tensor<f32>) -> tensor<2x2xf32>
  func.return %wsc, %ids : tensor<2x2xf32>, tensor<2x2xi64>
}
