// RUN: ascendir-opt %s --split-input-file -p fuse-moe-finalize-routing | filecheck %s

// Mixtral's combine: each token's k expert outputs times their weights, summed over k.
// CHECK-LABEL: func.func @combine
// CHECK-NEXT:    %[[F:.*]] = nn.fused(%y, %w) {kind = #nn.fused_kind<moe_finalize_routing>}
// CHECK-NEXT:    ^{{.*}}(%[[Y:.*]]: tensor<128x64xf32>, %[[W:.*]]: tensor<128x1xf32>):
// CHECK-NEXT:      %[[P:.*]] = nn.mul %[[Y]], %[[W]]
// CHECK-NEXT:      %[[Q:.*]] = nn.reshape %[[P]]
// CHECK-NEXT:      %[[S:.*]] = nn.reduce_sum %[[Q]]
// CHECK-NEXT:      nn.yield %[[S]]
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[F]]
func.func @combine(%y: tensor<128x64xf32>, %w: tensor<128x1xf32>) -> tensor<64x64xf32> {
  %p = nn.mul %y, %w : (tensor<128x64xf32>, tensor<128x1xf32>) -> tensor<128x64xf32>
  %q = nn.reshape %p : (tensor<128x64xf32>) -> tensor<64x2x64xf32>
  %s = nn.reduce_sum %q {axes = array<i64: 1>, keepdims = false} : (tensor<64x2x64xf32>) -> tensor<64x64xf32>
  func.return %s : tensor<64x64xf32>
}

// -----

// DeepSeek-V3's: the sum reshaped back to [1, T, H] and the shared expert's output added.
// CHECK-LABEL: func.func @combine_shared
// CHECK-NEXT:    %[[F:.*]] = nn.fused(%y, %w, %sh) {kind = #nn.fused_kind<moe_finalize_routing>}
// CHECK:           nn.reduce_sum
// CHECK-NEXT:      %[[R:.*]] = nn.reshape
// CHECK-NEXT:      %[[O:.*]] = nn.add %[[R]], %{{.*}}
// CHECK-NEXT:      nn.yield %[[O]]
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[F]]
func.func @combine_shared(%y: tensor<256x32xf16>, %w: tensor<256x1xf16>, %sh: tensor<1x64x32xf16>) -> tensor<1x64x32xf16> {
  %p = nn.mul %y, %w : (tensor<256x32xf16>, tensor<256x1xf16>) -> tensor<256x32xf16>
  %q = nn.reshape %p : (tensor<256x32xf16>) -> tensor<64x4x32xf16>
  %s = nn.reduce_sum %q {axes = array<i64: 1>, keepdims = false} : (tensor<64x4x32xf16>) -> tensor<64x32xf16>
  %r = nn.reshape %s : (tensor<64x32xf16>) -> tensor<1x64x32xf16>
  %o = nn.add %r, %sh : (tensor<1x64x32xf16>, tensor<1x64x32xf16>) -> tensor<1x64x32xf16>
  func.return %o : tensor<1x64x32xf16>
}

// -----

// NOT fused: the product read elsewhere too, and a sum over the last axis.
// CHECK-LABEL: func.func @not_combine
// CHECK-NOT:     nn.fused
func.func @not_combine(%y: tensor<8x16xf32>, %w: tensor<8x1xf32>) -> (tensor<8x16xf32>, tensor<4x16xf32>, tensor<4x2xf32>) {
  %p = nn.mul %y, %w : (tensor<8x16xf32>, tensor<8x1xf32>) -> tensor<8x16xf32>
  %q = nn.reshape %p : (tensor<8x16xf32>) -> tensor<4x2x16xf32>
  %s = nn.reduce_sum %q {axes = array<i64: 1>, keepdims = false} : (tensor<4x2x16xf32>) -> tensor<4x16xf32>
  %p2 = nn.mul %y, %w : (tensor<8x16xf32>, tensor<8x1xf32>) -> tensor<8x16xf32>
  %q2 = nn.reshape %p2 : (tensor<8x16xf32>) -> tensor<4x2x16xf32>
  %s2 = nn.reduce_sum %q2 {axes = array<i64: 2>, keepdims = false} : (tensor<4x2x16xf32>) -> tensor<4x2xf32>
  func.return %p, %s, %s2 : tensor<8x16xf32>, tensor<4x16xf32>, tensor<4x2xf32>
}
