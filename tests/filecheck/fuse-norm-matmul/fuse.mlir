// RUN: ascendir-opt %s --split-input-file -p fuse-norm-matmul | filecheck %s

// RMSNorm feeding the Q/K/V projections (LLaMA): one region with the norm and the three
// matmuls, yielding the projections; the weight defined between them is hoisted above the norm
// and the reshape using q stays after the region.
// CHECK-LABEL: func.func @qkv
// CHECK:         %wv = nn.weight @wv
// CHECK-NEXT:    %[[Q:.*]], %[[K:.*]], %[[V:.*]] = nn.fused(%x, %g, %wq, %wk, %wv) {kind = #nn.fused_kind<norm_matmul>}
// CHECK-NEXT:    ^{{.*}}(
// CHECK-NEXT:      %[[N:.*]] = nn.rms_norm
// CHECK-NEXT:      nn.matmul %[[N]]
// CHECK-NEXT:      nn.matmul %[[N]]
// CHECK-NEXT:      nn.matmul %[[N]]
// CHECK-NEXT:      nn.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    nn.reshape %[[Q]]
// CHECK-NOT:     nn.rms_norm
func.func @qkv(%x: tensor<1x8x64xf16>) -> (tensor<1x8x4x16xf16>, tensor<1x8x32xf16>, tensor<1x8x32xf16>) {
  %g = nn.weight @g : tensor<64xf16>
  %wq = nn.weight @wq : tensor<64x64xf16>
  %wk = nn.weight @wk : tensor<64x32xf16>
  %n = nn.rms_norm %x, %g {axis = 2 : i64, epsilon = 1.0e-05 : f32} : (tensor<1x8x64xf16>, tensor<64xf16>) -> tensor<1x8x64xf16>
  %q = nn.matmul %n, %wq : (tensor<1x8x64xf16>, tensor<64x64xf16>) -> tensor<1x8x64xf16>
  %q4 = nn.reshape %q : (tensor<1x8x64xf16>) -> tensor<1x8x4x16xf16>
  %k = nn.matmul %n, %wk : (tensor<1x8x64xf16>, tensor<64x32xf16>) -> tensor<1x8x32xf16>
  %wv = nn.weight @wv : tensor<64x32xf16>
  %v = nn.matmul %n, %wv : (tensor<1x8x64xf16>, tensor<64x32xf16>) -> tensor<1x8x32xf16>
  func.return %q4, %k, %v : tensor<1x8x4x16xf16>, tensor<1x8x32xf16>, tensor<1x8x32xf16>
}

// -----

// LayerNorm + one Gemm with its bias row (GPT-2's c_attn): the bias add joins the region.
// CHECK-LABEL: func.func @ln_gemm
// CHECK-NEXT:    %[[F:.*]] = nn.fused(%x, %g, %b, %w, %c) {kind = #nn.fused_kind<norm_matmul>}
// CHECK:           nn.layer_norm
// CHECK-NEXT:      nn.matmul
// CHECK-NEXT:      nn.add
// CHECK-NEXT:      nn.yield
// CHECK:         func.return %[[F]]
func.func @ln_gemm(%x: tensor<8x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>, %w: tensor<64x192xf32>, %c: tensor<192xf32>) -> tensor<8x192xf32> {
  %n = nn.layer_norm %x, %g, %b {axis = 1 : i64, epsilon = 1.0e-05 : f32} : (tensor<8x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<8x64xf32>
  %m = nn.matmul %n, %w : (tensor<8x64xf32>, tensor<64x192xf32>) -> tensor<8x192xf32>
  %y = nn.add %c, %m : (tensor<192xf32>, tensor<8x192xf32>) -> tensor<8x192xf32>
  func.return %y : tensor<8x192xf32>
}

// -----

// NOT fused: the norm output also feeds a residual add (BERT's post-LN), so it must reach GM.
// CHECK-LABEL: func.func @norm_also_added
// CHECK-NOT:     nn.fused
// CHECK:         %[[N:.*]] = nn.layer_norm
// CHECK-NEXT:    nn.matmul %[[N]]
// CHECK-NEXT:    nn.add %[[N]]
func.func @norm_also_added(%x: tensor<8x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>, %w: tensor<64x64xf32>) -> tensor<8x64xf32> {
  %n = nn.layer_norm %x, %g, %b {axis = 1 : i64, epsilon = 1.0e-05 : f32} : (tensor<8x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<8x64xf32>
  %m = nn.matmul %n, %w : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
  %y = nn.add %n, %m : (tensor<8x64xf32>, tensor<8x64xf32>) -> tensor<8x64xf32>
  func.return %y : tensor<8x64xf32>
}

// -----

// NOT fused: a non-matmul consumer (a reshape) besides the projections, the norm output
// returned, the norm output as a matmul's rhs, and a norm over more than the last axis.
// CHECK-LABEL: func.func @other_users
// CHECK-NOT:     nn.fused
func.func @other_users(%x: tensor<1x8x64xf16>, %g: tensor<64xf16>, %w: tensor<64x32xf16>, %a: tensor<32x8xf16>, %g2: tensor<8x64xf16>) -> (tensor<1x8x32xf16>, tensor<8x64xf16>, tensor<1x8x32xf16>, tensor<1x8x64xf16>, tensor<1x32x64xf16>, tensor<1x8x32xf16>) {
  %n = nn.rms_norm %x, %g {axis = 2 : i64, epsilon = 1.0e-05 : f32} : (tensor<1x8x64xf16>, tensor<64xf16>) -> tensor<1x8x64xf16>
  %m = nn.matmul %n, %w : (tensor<1x8x64xf16>, tensor<64x32xf16>) -> tensor<1x8x32xf16>
  %r = nn.reshape %n : (tensor<1x8x64xf16>) -> tensor<8x64xf16>
  %n2 = nn.rms_norm %x, %g {axis = 2 : i64, epsilon = 1.0e-05 : f32} : (tensor<1x8x64xf16>, tensor<64xf16>) -> tensor<1x8x64xf16>
  %m2 = nn.matmul %n2, %w : (tensor<1x8x64xf16>, tensor<64x32xf16>) -> tensor<1x8x32xf16>
  %n3 = nn.rms_norm %x, %g {axis = 2 : i64, epsilon = 1.0e-05 : f32} : (tensor<1x8x64xf16>, tensor<64xf16>) -> tensor<1x8x64xf16>
  %m3 = nn.matmul %a, %n3 : (tensor<32x8xf16>, tensor<1x8x64xf16>) -> tensor<1x32x64xf16>
  %n4 = nn.rms_norm %x, %g2 {axis = 1 : i64, epsilon = 1.0e-05 : f32} : (tensor<1x8x64xf16>, tensor<8x64xf16>) -> tensor<1x8x64xf16>
  %m4 = nn.matmul %n4, %w : (tensor<1x8x64xf16>, tensor<64x32xf16>) -> tensor<1x8x32xf16>
  func.return %m, %r, %m2, %n2, %m3, %m4 : tensor<1x8x32xf16>, tensor<8x64xf16>, tensor<1x8x32xf16>, tensor<1x8x64xf16>, tensor<1x32x64xf16>, tensor<1x8x32xf16>
}

// -----

// NOT fused: the second projection's weight is computed after the norm (a transpose), which
// cannot be hoisted above it.
// CHECK-LABEL: func.func @late_operand
// CHECK-NOT:     nn.fused
func.func @late_operand(%x: tensor<8x64xf32>, %g: tensor<64xf32>, %w: tensor<64x64xf32>, %wt: tensor<64x64xf32>) -> (tensor<8x64xf32>, tensor<8x64xf32>) {
  %n = nn.rms_norm %x, %g {axis = 1 : i64, epsilon = 1.0e-05 : f32} : (tensor<8x64xf32>, tensor<64xf32>) -> tensor<8x64xf32>
  %m = nn.matmul %n, %w : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
  %w2 = nn.transpose %wt {perm = array<i64: 1, 0>} : (tensor<64x64xf32>) -> tensor<64x64xf32>
  %m2 = nn.matmul %n, %w2 : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
  func.return %m, %m2 : tensor<8x64xf32>, tensor<8x64xf32>
}

// -----

// GPT-2's Conv1D: LayerNorm, a reshape flattening [1, 8, 64] to [8, 64], then Gemm + bias +
// GELU (c_fc): the reshape and the whole epilogue chain join the region.
// CHECK-LABEL: func.func @ln_reshape_gelu
// CHECK-NEXT:    %[[F:.*]] = nn.fused(%x, %g, %b, %w, %c) {kind = #nn.fused_kind<norm_matmul>}
// CHECK:           nn.layer_norm
// CHECK-NEXT:      nn.reshape
// CHECK-NEXT:      nn.matmul
// CHECK-NEXT:      nn.add
// CHECK-NEXT:      nn.gelu
// CHECK-NEXT:      nn.yield
// CHECK:         func.return %[[F]]
func.func @ln_reshape_gelu(%x: tensor<1x8x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>, %w: tensor<64x256xf32>, %c: tensor<256xf32>) -> tensor<8x256xf32> {
  %n = nn.layer_norm %x, %g, %b {axis = 2 : i64, epsilon = 1.0e-05 : f32} : (tensor<1x8x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<1x8x64xf32>
  %r = nn.reshape %n : (tensor<1x8x64xf32>) -> tensor<8x64xf32>
  %m = nn.matmul %r, %w : (tensor<8x64xf32>, tensor<64x256xf32>) -> tensor<8x256xf32>
  %y = nn.add %m, %c : (tensor<8x256xf32>, tensor<256xf32>) -> tensor<8x256xf32>
  %z = nn.gelu %y : (tensor<8x256xf32>) -> tensor<8x256xf32>
  func.return %z : tensor<8x256xf32>
}

// -----

// NOT fused: a reshape that changes the last dim (a head split) is not a row flattening.
// CHECK-LABEL: func.func @reshape_heads
// CHECK-NOT:     nn.fused
func.func @reshape_heads(%x: tensor<8x64xf32>, %g: tensor<64xf32>, %w: tensor<16x32xf32>) -> tensor<32x32xf32> {
  %n = nn.rms_norm %x, %g {axis = 1 : i64, epsilon = 1.0e-05 : f32} : (tensor<8x64xf32>, tensor<64xf32>) -> tensor<8x64xf32>
  %r = nn.reshape %n : (tensor<8x64xf32>) -> tensor<32x16xf32>
  %m = nn.matmul %r, %w : (tensor<32x16xf32>, tensor<16x32xf32>) -> tensor<32x32xf32>
  func.return %m : tensor<32x32xf32>
}
