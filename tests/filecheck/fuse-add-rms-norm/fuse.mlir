// RUN: ascendir-opt %s --split-input-file -p fuse-add-rms-norm | filecheck %s

// Residual add + RMSNorm of the sum, the sum also read afterwards (the next residual add): one
// region yielding the norm and the sum.
// CHECK-LABEL: func.func @add_norm_sum_kept
// CHECK-NEXT:    %[[FN:.*]], %[[FY:.*]] = nn.fused(%x, %r, %g) {kind = #nn.fused_kind<add_rms_norm>}
// CHECK-NEXT:    ^{{.*}}(%[[X:.*]]: tensor<2x8x64xf16>, %[[R:.*]]: tensor<2x8x64xf16>, %[[G:.*]]: tensor<64xf16>):
// CHECK-NEXT:      %[[Y:.*]] = nn.add %[[X]], %[[R]]
// CHECK-NEXT:      %[[N:.*]] = nn.rms_norm %[[Y]], %[[G]] {axis = 2 : i64, epsilon = 1.000000e-06 : f32}
// CHECK-NEXT:      nn.yield %[[N]], %[[Y]]
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[Z:.*]] = nn.add %[[FY]], %[[FN]]
// CHECK-NEXT:    func.return %[[Z]]
func.func @add_norm_sum_kept(%x: tensor<2x8x64xf16>, %r: tensor<2x8x64xf16>, %g: tensor<64xf16>) -> tensor<2x8x64xf16> {
  %y = nn.add %x, %r : (tensor<2x8x64xf16>, tensor<2x8x64xf16>) -> tensor<2x8x64xf16>
  %n = nn.rms_norm %y, %g {axis = 2 : i64, epsilon = 1.0e-6 : f32} : (tensor<2x8x64xf16>, tensor<64xf16>) -> tensor<2x8x64xf16>
  %z = nn.add %y, %n : (tensor<2x8x64xf16>, tensor<2x8x64xf16>) -> tensor<2x8x64xf16>
  func.return %z : tensor<2x8x64xf16>
}

// -----

// The sum read only by the norm: the region yields the norm alone.
// CHECK-LABEL: func.func @add_norm
// CHECK-NEXT:    %[[F:.*]] = nn.fused(%x, %r, %g) {kind = #nn.fused_kind<add_rms_norm>}
// CHECK:           nn.yield %{{.*}} : tensor<4x32xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[F]]
func.func @add_norm(%x: tensor<4x32xf32>, %r: tensor<4x32xf32>, %g: tensor<32xf32>) -> tensor<4x32xf32> {
  %y = nn.add %x, %r : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
  %n = nn.rms_norm %y, %g {axis = 1 : i64, epsilon = 1.0e-5 : f32} : (tensor<4x32xf32>, tensor<32xf32>) -> tensor<4x32xf32>
  func.return %n : tensor<4x32xf32>
}

// -----

// NOT fused: a broadcast add (a bias row, not a residual) and a norm over another axis.
// CHECK-LABEL: func.func @not_residual
// CHECK-NOT:     nn.fused
func.func @not_residual(%x: tensor<4x32xf32>, %b: tensor<32xf32>, %g: tensor<32xf32>, %g4: tensor<4xf32>) -> (tensor<4x32xf32>, tensor<4x32xf32>) {
  %y = nn.add %x, %b : (tensor<4x32xf32>, tensor<32xf32>) -> tensor<4x32xf32>
  %n = nn.rms_norm %y, %g {axis = 1 : i64, epsilon = 1.0e-5 : f32} : (tensor<4x32xf32>, tensor<32xf32>) -> tensor<4x32xf32>
  %y2 = nn.add %x, %x : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
  %n2 = nn.rms_norm %y2, %g {axis = 0 : i64, epsilon = 1.0e-5 : f32} : (tensor<4x32xf32>, tensor<32xf32>) -> tensor<4x32xf32>
  func.return %n, %n2 : tensor<4x32xf32>, tensor<4x32xf32>
}
