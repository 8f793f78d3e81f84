// RUN: ascendir-opt %s --split-input-file -p recompose-nn | filecheck %s

// RMSNorm as torch.onnx dynamo=True exports it (Reciprocal(Sqrt)).
// CHECK-LABEL: func.func @rms_reciprocal
// CHECK-NEXT:    %[[Y:.*]] = nn.rms_norm %x, %w {axis = 2 : i64, epsilon = 1.000000e-05 : f32}
// CHECK-NEXT:    func.return %[[Y]]
func.func @rms_reciprocal(%x: tensor<1x4x8xf32>, %w: tensor<8xf32>) -> tensor<1x4x8xf32> {
  %two = nn.constant dense<2.0> : tensor<f32>
  %eps = nn.constant dense<1.0e-05> : tensor<f32>
  %p = nn.pow %x, %two : (tensor<1x4x8xf32>, tensor<f32>) -> tensor<1x4x8xf32>
  %m = nn.reduce_mean %p {axes = array<i64: 2>, keepdims = true} : (tensor<1x4x8xf32>) -> tensor<1x4x1xf32>
  %a = nn.add %m, %eps : (tensor<1x4x1xf32>, tensor<f32>) -> tensor<1x4x1xf32>
  %s = nn.sqrt %a : (tensor<1x4x1xf32>) -> tensor<1x4x1xf32>
  %r = nn.reciprocal %s : (tensor<1x4x1xf32>) -> tensor<1x4x1xf32>
  %n = nn.mul %x, %r : (tensor<1x4x8xf32>, tensor<1x4x1xf32>) -> tensor<1x4x8xf32>
  %y = nn.mul %w, %n : (tensor<8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  func.return %y : tensor<1x4x8xf32>
}

// -----

// The normalized value is also returned: recomposing would compute it twice, so no match.
// CHECK-LABEL: func.func @rms_output_used_elsewhere
// CHECK-NOT:     nn.rms_norm
// CHECK:         nn.div %one, %{{.*}}
// CHECK:         func.return
func.func @rms_output_used_elsewhere(%x: tensor<4x8xf32>, %w: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %two = nn.constant dense<2.0> : tensor<f32>
  %eps = nn.constant dense<1.0e-05> : tensor<f32>
  %one = nn.constant dense<1.0> : tensor<f32>
  %p = nn.pow %x, %two : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %m = nn.reduce_mean %p {axes = array<i64: 1>, keepdims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %a = nn.add %m, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %s = nn.sqrt %a : (tensor<4x1xf32>) -> tensor<4x1xf32>
  %r = nn.div %one, %s : (tensor<f32>, tensor<4x1xf32>) -> tensor<4x1xf32>
  %n = nn.mul %x, %r : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %y = nn.mul %w, %n : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %y, %n : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Decomposed LayerNorm (x - mean) / sqrt(var + eps) * w + b.
// CHECK-LABEL: func.func @layer_norm
// CHECK-NEXT:    %[[Y:.*]] = nn.layer_norm %x, %w, %b {axis = 1 : i64, epsilon = {{.*}} : f32}
// CHECK-NEXT:    func.return %[[Y]]
func.func @layer_norm(%x: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %two = nn.constant dense<2.0> : tensor<f32>
  %eps = nn.constant dense<1.0e-12> : tensor<f32>
  %mu = nn.reduce_mean %x {axes = array<i64: 1>, keepdims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %d = nn.sub %x, %mu : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %p = nn.pow %d, %two : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %v = nn.reduce_mean %p {axes = array<i64: 1>, keepdims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %a = nn.add %v, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %s = nn.sqrt %a : (tensor<4x1xf32>) -> tensor<4x1xf32>
  %n = nn.div %d, %s : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %m = nn.mul %n, %w : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %y = nn.add %m, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}

// -----

// GELU, erf form as BERT exports it, and tanh form as GPT-2 does.
// CHECK-LABEL: func.func @gelus
// CHECK-NEXT:    %[[E:.*]] = nn.gelu %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %[[T:.*]] = nn.gelu %x {approximate = #nn.gelu_approximate<tanh>}
// CHECK-NEXT:    func.return %[[E]], %[[T]]
func.func @gelus(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %sqrt2 = nn.constant dense<1.41421354> : tensor<f32>
  %one = nn.constant dense<1.0> : tensor<f32>
  %half = nn.constant dense<0.5> : tensor<f32>
  %d = nn.div %x, %sqrt2 : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %e = nn.erf %d : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %a = nn.add %e, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %m = nn.mul %x, %a : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %g = nn.mul %m, %half : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %three = nn.constant dense<3.0> : tensor<f32>
  %c1 = nn.constant dense<4.471500e-02> : tensor<f32>
  %c2 = nn.constant dense<0.797884583> : tensor<f32>
  %h = nn.mul %x, %half : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %cube = nn.pow %x, %three : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %q = nn.mul %cube, %c1 : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %s = nn.add %x, %q : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %r = nn.mul %s, %c2 : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %t = nn.tanh %r : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %a2 = nn.add %t, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %g2 = nn.mul %h, %a2 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %g, %g2 : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Not GELU: x / 2 inside the erf.
// CHECK-LABEL: func.func @not_gelu
// CHECK-NOT:     nn.gelu
// CHECK:         nn.erf
func.func @not_gelu(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %two = nn.constant dense<2.0> : tensor<f32>
  %one = nn.constant dense<1.0> : tensor<f32>
  %half = nn.constant dense<0.5> : tensor<f32>
  %d = nn.div %x, %two : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %e = nn.erf %d : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %a = nn.add %e, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %m = nn.mul %x, %a : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %g = nn.mul %m, %half : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  func.return %g : tensor<4x8xf32>
}

// -----

// SiLU x * sigmoid(x) matches; x * sigmoid(y) does not.
// CHECK-LABEL: func.func @silu
// CHECK-NEXT:    %[[S:.*]] = nn.silu %x
// CHECK-NEXT:    %[[G:.*]] = nn.sigmoid %y
// CHECK-NEXT:    %[[M:.*]] = nn.mul %x, %[[G]]
// CHECK-NEXT:    func.return %[[S]], %[[M]]
func.func @silu(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %s = nn.sigmoid %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %m = nn.mul %s, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %s2 = nn.sigmoid %y : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %m2 = nn.mul %x, %s2 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %m, %m2 : tensor<4x8xf32>, tensor<4x8xf32>
}
