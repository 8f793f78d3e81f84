// RUN: ascendir-opt %s --split-input-file -p fuse-matmul-epilogue | filecheck %s

// MatMul + row bias + GELU: one region holding the three original ops.
// CHECK-LABEL: func.func @bias_gelu
// CHECK-NEXT:    %[[F:.*]] = nn.fused(%a, %b, %c) {kind = #nn.fused_kind<matmul_epilogue>} : (tensor<2x8x16xf16>, tensor<16x32xf16>, tensor<32xf16>) -> tensor<2x8x32xf16> {
// CHECK-NEXT:    ^{{.*}}(%[[A:.*]]: tensor<2x8x16xf16>, %[[B:.*]]: tensor<16x32xf16>, %[[C:.*]]: tensor<32xf16>):
// CHECK-NEXT:      %[[M:.*]] = nn.matmul %[[A]], %[[B]]
// CHECK-NEXT:      %[[Y:.*]] = nn.add %[[M]], %[[C]]
// CHECK-NEXT:      %[[Z:.*]] = nn.gelu %[[Y]]
// CHECK-NEXT:      nn.yield %[[Z]] : tensor<2x8x32xf16>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[F]]
func.func @bias_gelu(%a: tensor<2x8x16xf16>, %b: tensor<16x32xf16>, %c: tensor<32xf16>) -> tensor<2x8x32xf16> {
  %m = nn.matmul %a, %b : (tensor<2x8x16xf16>, tensor<16x32xf16>) -> tensor<2x8x32xf16>
  %y = nn.add %m, %c : (tensor<2x8x32xf16>, tensor<32xf16>) -> tensor<2x8x32xf16>
  %z = nn.gelu %y : (tensor<2x8x32xf16>) -> tensor<2x8x32xf16>
  func.return %z : tensor<2x8x32xf16>
}

// -----

// The Gemm form (bias first, as a [1, N] row) without activation.
// CHECK-LABEL: func.func @gemm_bias
// CHECK:         nn.fused(%a, %b, %c) {kind = #nn.fused_kind<matmul_epilogue>}
// CHECK:           nn.matmul
// CHECK-NEXT:      nn.add %{{.*}}, %{{.*}} : (tensor<1x32xf32>, tensor<8x32xf32>)
// CHECK-NEXT:      nn.yield
// CHECK-NOT:     nn.add
func.func @gemm_bias(%a: tensor<8x16xf32>, %b: tensor<16x32xf32>, %c: tensor<1x32xf32>) -> tensor<8x32xf32> {
  %m = nn.matmul %a, %b : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %y = nn.add %c, %m : (tensor<1x32xf32>, tensor<8x32xf32>) -> tensor<8x32xf32>
  func.return %y : tensor<8x32xf32>
}

// -----

// Activation only (ReLU, SiLU).
// CHECK-LABEL: func.func @act_only
// CHECK:         nn.fused(%a, %b) {kind = #nn.fused_kind<matmul_epilogue>}
// CHECK:           nn.relu
// CHECK:         nn.fused(%a, %b) {kind = #nn.fused_kind<matmul_epilogue>}
// CHECK:           nn.silu
func.func @act_only(%a: tensor<8x16xf32>, %b: tensor<16x32xf32>) -> (tensor<8x32xf32>, tensor<8x32xf32>) {
  %m = nn.matmul %a, %b : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %r = nn.relu %m : (tensor<8x32xf32>) -> tensor<8x32xf32>
  %m2 = nn.matmul %a, %b : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %s = nn.silu %m2 : (tensor<8x32xf32>) -> tensor<8x32xf32>
  func.return %r, %s : tensor<8x32xf32>, tensor<8x32xf32>
}

// -----

// NOT fused: the matmul result has another user besides the bias add.
// CHECK-LABEL: func.func @shared_matmul
// CHECK-NOT:     nn.fused
// CHECK:         %[[M:.*]] = nn.matmul %a, %b
// CHECK-NEXT:    nn.add %[[M]], %c
// CHECK-NEXT:    nn.mul %[[M]], %[[M]]
func.func @shared_matmul(%a: tensor<8x16xf32>, %b: tensor<16x32xf32>, %c: tensor<32xf32>) -> (tensor<8x32xf32>, tensor<8x32xf32>) {
  %m = nn.matmul %a, %b : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %y = nn.add %m, %c : (tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  %s = nn.mul %m, %m : (tensor<8x32xf32>, tensor<8x32xf32>) -> tensor<8x32xf32>
  func.return %y, %s : tensor<8x32xf32>, tensor<8x32xf32>
}

// -----

// NOT fused: Sigmoid is not an epilogue activation (ReLU/GELU/SiLU only).
// CHECK-LABEL: func.func @sigmoid
// CHECK-NOT:     nn.fused
// CHECK:         nn.matmul
// CHECK-NEXT:    nn.sigmoid
func.func @sigmoid(%a: tensor<8x16xf32>, %b: tensor<16x32xf32>) -> tensor<8x32xf32> {
  %m = nn.matmul %a, %b : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %y = nn.sigmoid %m : (tensor<8x32xf32>) -> tensor<8x32xf32>
  func.return %y : tensor<8x32xf32>
}

// -----

// Residual (skip connection): matmul + a tensor of the output's shape, either operand order.
// CHECK-LABEL: func.func @residual
// CHECK-NEXT:    %[[F:.*]] = nn.fused(%a, %b, %r) {kind = #nn.fused_kind<matmul_epilogue>}
// CHECK:           %[[M:.*]] = nn.matmul
// CHECK-NEXT:      %[[Y:.*]] = nn.add %[[M]], %{{.*}} : (tensor<8x32xf32>, tensor<8x32xf32>)
// CHECK-NEXT:      nn.yield %[[Y]]
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[F]]
func.func @residual(%a: tensor<8x16xf32>, %b: tensor<16x32xf32>, %r: tensor<8x32xf32>) -> tensor<8x32xf32> {
  %m = nn.matmul %a, %b : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %y = nn.add %m, %r : (tensor<8x32xf32>, tensor<8x32xf32>) -> tensor<8x32xf32>
  func.return %y : tensor<8x32xf32>
}

// -----

// The whole o_proj / down_proj epilogue: bias, GELU, then the residual (skip first).
// CHECK-LABEL: func.func @bias_gelu_residual
// CHECK-NEXT:    nn.fused(%a, %b, %c, %r) {kind = #nn.fused_kind<matmul_epilogue>}
// CHECK:           nn.matmul
// CHECK-NEXT:      nn.add
// CHECK-NEXT:      nn.gelu
// CHECK-NEXT:      nn.add %{{.*}}, %{{.*}} : (tensor<2x8x32xf16>, tensor<2x8x32xf16>)
// CHECK-NEXT:      nn.yield
// CHECK-NOT:     nn.add
func.func @bias_gelu_residual(%a: tensor<2x8x16xf16>, %b: tensor<16x32xf16>, %c: tensor<32xf16>, %r: tensor<2x8x32xf16>) -> tensor<2x8x32xf16> {
  %m = nn.matmul %a, %b : (tensor<2x8x16xf16>, tensor<16x32xf16>) -> tensor<2x8x32xf16>
  %y = nn.add %m, %c : (tensor<2x8x32xf16>, tensor<32xf16>) -> tensor<2x8x32xf16>
  %z = nn.gelu %y : (tensor<2x8x32xf16>) -> tensor<2x8x32xf16>
  %s = nn.add %r, %z : (tensor<2x8x32xf16>, tensor<2x8x32xf16>) -> tensor<2x8x32xf16>
  func.return %s : tensor<2x8x32xf16>
}

// -----

// NOT fused: the added tensor is broadcast (a column [8, 1], a batch-broadcast [1, 8, 32]):
// its tile is not the output tile, so it is no residual.
// CHECK-LABEL: func.func @broadcast_add
// CHECK-NOT:     nn.fused
// CHECK:         nn.matmul
// CHECK-NEXT:    nn.add
// CHECK-NEXT:    nn.matmul
// CHECK-NEXT:    nn.add
func.func @broadcast_add(%a: tensor<8x16xf32>, %b: tensor<16x32xf32>, %col: tensor<8x1xf32>, %a3: tensor<2x8x16xf32>, %r3: tensor<1x8x32xf32>) -> (tensor<8x32xf32>, tensor<2x8x32xf32>) {
  %m = nn.matmul %a, %b : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %y = nn.add %m, %col : (tensor<8x32xf32>, tensor<8x1xf32>) -> tensor<8x32xf32>
  %m3 = nn.matmul %a3, %b : (tensor<2x8x16xf32>, tensor<16x32xf32>) -> tensor<2x8x32xf32>
  %y3 = nn.add %r3, %m3 : (tensor<1x8x32xf32>, tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
  func.return %y, %y3 : tensor<8x32xf32>, tensor<2x8x32xf32>
}

// -----

// NOT fused: the matmul result is also returned, so it must reach GM anyway.
// CHECK-LABEL: func.func @residual_shared
// CHECK-NOT:     nn.fused
// CHECK:         %[[M:.*]] = nn.matmul %a, %b
// CHECK-NEXT:    nn.add %r, %[[M]]
// CHECK-NEXT:    func.return
func.func @residual_shared(%a: tensor<8x16xf32>, %b: tensor<16x32xf32>, %r: tensor<8x32xf32>) -> (tensor<8x32xf32>, tensor<8x32xf32>) {
  %m = nn.matmul %a, %b : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %y = nn.add %r, %m : (tensor<8x32xf32>, tensor<8x32xf32>) -> tensor<8x32xf32>
  func.return %y, %m : tensor<8x32xf32>, tensor<8x32xf32>
}

// -----

// The biased value has a second user: matmul + bias fuse, the ReLU stays outside.
// CHECK-LABEL: func.func @bias_shared
// CHECK:         %[[F:.*]] = nn.fused(%a, %b, %c) {kind = #nn.fused_kind<matmul_epilogue>}
// CHECK:           nn.add
// CHECK-NEXT:      nn.yield
// CHECK:         nn.relu %[[F]]
// CHECK:         func.return
func.func @bias_shared(%a: tensor<8x16xf32>, %b: tensor<16x32xf32>, %c: tensor<32xf32>) -> (tensor<8x32xf32>, tensor<8x32xf32>) {
  %m = nn.matmul %a, %b : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %y = nn.add %m, %c : (tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  %z = nn.relu %y : (tensor<8x32xf32>) -> tensor<8x32xf32>
  func.return %y, %z : tensor<8x32xf32>, tensor<8x32xf32>
}
