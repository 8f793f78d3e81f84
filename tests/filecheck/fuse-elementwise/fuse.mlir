// RUN: ascendir-opt %s --split-input-file -p fuse-elementwise | filecheck %s

// A RoPE-style DAG (x*cos + neg(r)*sin, cos/sin broadcast over heads): one region, inputs once.
// CHECK-LABEL: func.func @rope
// CHECK-NEXT:    %[[F:.*]] = nn.fused(%x, %cos, %r, %sin) {kind = #nn.fused_kind<elementwise>}
// CHECK-NEXT:    ^{{.*}}(%[[X:.*]]: tensor<1x4x8x16xf32>, %[[C:.*]]: tensor<1x1x8x16xf32>, %[[R:.*]]: tensor<1x4x8x16xf32>, %[[S:.*]]: tensor<1x1x8x16xf32>):
// CHECK-NEXT:      %[[A:.*]] = nn.mul %[[X]], %[[C]]
// CHECK-NEXT:      %[[N:.*]] = nn.neg %[[R]]
// CHECK-NEXT:      %[[B:.*]] = nn.mul %[[N]], %[[S]]
// CHECK-NEXT:      %[[Y:.*]] = nn.add %[[A]], %[[B]]
// CHECK-NEXT:      nn.yield %[[Y]] : tensor<1x4x8x16xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[F]]
func.func @rope(%x: tensor<1x4x8x16xf32>, %cos: tensor<1x1x8x16xf32>, %r: tensor<1x4x8x16xf32>, %sin: tensor<1x1x8x16xf32>) -> tensor<1x4x8x16xf32> {
  %a = nn.mul %x, %cos : (tensor<1x4x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<1x4x8x16xf32>
  %n = nn.neg %r : (tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  %b = nn.mul %n, %sin : (tensor<1x4x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<1x4x8x16xf32>
  %y = nn.add %a, %b : (tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  func.return %y : tensor<1x4x8x16xf32>
}

// -----

// A residual sum used after the region (a later op) is written out as a second output.
// CHECK-LABEL: func.func @written_out
// CHECK:         %[[G:.*]], %[[H:.*]] = nn.fused(%x, %b, %d) {kind = #nn.fused_kind<elementwise>}
// CHECK:           %[[T:.*]] = nn.add
// CHECK-NEXT:      %[[HI:.*]] = nn.add %[[T]]
// CHECK-NEXT:      %[[GI:.*]] = nn.relu %[[HI]]
// CHECK-NEXT:      nn.yield %[[GI]], %[[HI]] : tensor<8x32xf32>, tensor<8x32xf32>
// CHECK:         nn.reduce_sum %[[H]]
// CHECK:         func.return %[[G]]
func.func @written_out(%x: tensor<8x32xf32>, %b: tensor<32xf32>, %d: tensor<8x32xf32>) -> (tensor<8x32xf32>, tensor<8x1xf32>) {
  %t = nn.add %x, %b : (tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  %h = nn.add %t, %d : (tensor<8x32xf32>, tensor<8x32xf32>) -> tensor<8x32xf32>
  %g = nn.relu %h : (tensor<8x32xf32>) -> tensor<8x32xf32>
  %s = nn.reduce_sum %h {axes = array<i64: 1>, keepdims = true} : (tensor<8x32xf32>) -> tensor<8x1xf32>
  func.return %g, %s : tensor<8x32xf32>, tensor<8x1xf32>
}

// -----

// Compare, Where and Cast join too.
// CHECK-LABEL: func.func @where_cast
// CHECK:         nn.fused(%x, %z) {kind = #nn.fused_kind<elementwise>}
// CHECK:           nn.greater
// CHECK-NEXT:      nn.sigmoid
// CHECK-NEXT:      nn.where
// CHECK-NEXT:      nn.cast
// CHECK-NEXT:      nn.yield
func.func @where_cast(%x: tensor<8x32xf32>, %z: tensor<f32>) -> tensor<8x32xf16> {
  %c = nn.greater %x, %z : (tensor<8x32xf32>, tensor<f32>) -> tensor<8x32xi1>
  %s = nn.sigmoid %x : (tensor<8x32xf32>) -> tensor<8x32xf32>
  %w = nn.where %c, %x, %s : (tensor<8x32xi1>, tensor<8x32xf32>, tensor<8x32xf32>) -> tensor<8x32xf32>
  %y = nn.cast %w : (tensor<8x32xf32>) -> tensor<8x32xf16>
  func.return %y : tensor<8x32xf16>
}

// -----

// NOT fused across: %h is also read by layer_norm, which runs before the last add (the region
// would have to wait for it), so the region stops at %h; the two ops after the norm fuse.
// CHECK-LABEL: func.func @used_before_root
// CHECK:         %[[H:.*]] = nn.add %x, %d
// CHECK-NEXT:    %[[N:.*]] = nn.layer_norm %[[H]]
// CHECK-NEXT:    nn.fused(%[[N]], %[[H]]) {kind = #nn.fused_kind<elementwise>}
// CHECK-NEXT:    ^{{.*}}:
// CHECK-NEXT:      nn.relu
// CHECK-NEXT:      nn.add
// CHECK-NEXT:      nn.yield
func.func @used_before_root(%x: tensor<8x32xf32>, %d: tensor<8x32xf32>, %g: tensor<32xf32>, %b: tensor<32xf32>) -> tensor<8x32xf32> {
  %h = nn.add %x, %d : (tensor<8x32xf32>, tensor<8x32xf32>) -> tensor<8x32xf32>
  %n = nn.layer_norm %h, %g, %b {axis = 1 : i64, epsilon = 1.0e-05 : f32} : (tensor<8x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  %r = nn.relu %n : (tensor<8x32xf32>) -> tensor<8x32xf32>
  %y = nn.add %r, %h : (tensor<8x32xf32>, tensor<8x32xf32>) -> tensor<8x32xf32>
  func.return %y : tensor<8x32xf32>
}

// -----

// NOT fused: the smaller [32] value has another user, and a [32] result cannot be written
// out by a kernel over [8, 32] tiles; a lone op is left to the plain template.
// CHECK-LABEL: func.func @broadcast_operand_shared
// CHECK-NOT:     nn.fused
// CHECK:         nn.exp
// CHECK-NEXT:    nn.add
// CHECK-NEXT:    nn.neg
func.func @broadcast_operand_shared(%x: tensor<8x32xf32>, %b: tensor<32xf32>) -> (tensor<8x32xf32>, tensor<32xf32>) {
  %e = nn.exp %b : (tensor<32xf32>) -> tensor<32xf32>
  %y = nn.add %x, %e : (tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  %n = nn.neg %e : (tensor<32xf32>) -> tensor<32xf32>
  func.return %y, %n : tensor<8x32xf32>, tensor<32xf32>
}

// -----

// NOT fused: softmax and matmul are not elementwise; each relu stands alone.
// CHECK-LABEL: func.func @not_elementwise
// CHECK-NOT:     nn.fused
func.func @not_elementwise(%x: tensor<8x32xf32>, %w: tensor<32x32xf32>) -> tensor<8x32xf32> {
  %r = nn.relu %x : (tensor<8x32xf32>) -> tensor<8x32xf32>
  %s = nn.softmax %r {axis = 1 : i64} : (tensor<8x32xf32>) -> tensor<8x32xf32>
  %m = nn.matmul %s, %w : (tensor<8x32xf32>, tensor<32x32xf32>) -> tensor<8x32xf32>
  %y = nn.relu %m : (tensor<8x32xf32>) -> tensor<8x32xf32>
  func.return %y : tensor<8x32xf32>
}
