// RUN: ascendir-opt %s --split-input-file -p fuse-conv-activation | filecheck %s

// Conv (with the bias a folded BatchNorm leaves) + ReLU6 (Clip 0..6): one region.
// CHECK-LABEL: func.func @conv_relu6
// CHECK-NEXT:    %[[F:.*]] = nn.fused(%x, %w, %b) {kind = #nn.fused_kind<conv_activation>}
// CHECK-NEXT:    ^{{.*}}(%[[X:.*]]: tensor<1x4x8x8xf32>, %[[W:.*]]: tensor<8x4x3x3xf32>, %[[B:.*]]: tensor<8xf32>):
// CHECK-NEXT:      %[[Y:.*]] = nn.conv2d %[[X]], %[[W]], %[[B]]
// CHECK-NEXT:      %[[Z:.*]] = nn.clip %[[Y]] {min = 0.000000e+00 : f32, max = 6.000000e+00 : f32}
// CHECK-NEXT:      nn.yield %[[Z]]
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[F]]
func.func @conv_relu6(%x: tensor<1x4x8x8xf32>, %w: tensor<8x4x3x3xf32>, %b: tensor<8xf32>) -> tensor<1x8x8x8xf32> {
  %y = nn.conv2d %x, %w, %b {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x4x8x8xf32>, tensor<8x4x3x3xf32>, tensor<8xf32>) -> tensor<1x8x8x8xf32>
  %z = nn.clip %y {min = 0.0 : f32, max = 6.0 : f32} : (tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32>
  func.return %z : tensor<1x8x8x8xf32>
}

// -----

// ReLU, SiLU, and Clip without upper bound (a ReLU) on convs without bias.
// CHECK-LABEL: func.func @relu_silu_clip_inf
// CHECK:         nn.fused(%x, %w) {kind = #nn.fused_kind<conv_activation>}
// CHECK:           nn.relu
// CHECK:         nn.fused(%x, %w) {kind = #nn.fused_kind<conv_activation>}
// CHECK:           nn.silu
// CHECK:         nn.fused(%x, %w) {kind = #nn.fused_kind<conv_activation>}
// CHECK:           nn.clip
func.func @relu_silu_clip_inf(%x: tensor<1x4x8x8xf32>, %w: tensor<8x4x1x1xf32>) -> (tensor<1x8x8x8xf32>, tensor<1x8x8x8xf32>, tensor<1x8x8x8xf32>) {
  %y = nn.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x4x8x8xf32>, tensor<8x4x1x1xf32>) -> tensor<1x8x8x8xf32>
  %r = nn.relu %y : (tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32>
  %y2 = nn.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x4x8x8xf32>, tensor<8x4x1x1xf32>) -> tensor<1x8x8x8xf32>
  %s = nn.silu %y2 : (tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32>
  %y3 = nn.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x4x8x8xf32>, tensor<8x4x1x1xf32>) -> tensor<1x8x8x8xf32>
  %c = nn.clip %y3 {min = 0.0 : f32} : (tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32>
  func.return %r, %s, %c : tensor<1x8x8x8xf32>, tensor<1x8x8x8xf32>, tensor<1x8x8x8xf32>
}

// -----

// NOT fused: Clip(0, 4) and Clip(-1, 6) are not activations the template implements.
// CHECK-LABEL: func.func @other_clip_bounds
// CHECK-NOT:     nn.fused
func.func @other_clip_bounds(%x: tensor<1x4x8x8xf32>, %w: tensor<8x4x1x1xf32>) -> (tensor<1x8x8x8xf32>, tensor<1x8x8x8xf32>) {
  %y = nn.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x4x8x8xf32>, tensor<8x4x1x1xf32>) -> tensor<1x8x8x8xf32>
  %a = nn.clip %y {min = 0.0 : f32, max = 4.0 : f32} : (tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32>
  %y2 = nn.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x4x8x8xf32>, tensor<8x4x1x1xf32>) -> tensor<1x8x8x8xf32>
  %b = nn.clip %y2 {min = -1.0 : f32, max = 6.0 : f32} : (tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32>
  func.return %a, %b : tensor<1x8x8x8xf32>, tensor<1x8x8x8xf32>
}

// -----

// NOT fused: the conv output is also used by the residual add (it must reach GM anyway).
// CHECK-LABEL: func.func @conv_output_shared
// CHECK-NOT:     nn.fused
// CHECK:         %[[Y:.*]] = nn.conv2d
// CHECK-NEXT:    nn.relu %[[Y]]
// CHECK-NEXT:    nn.add %{{.*}}, %[[Y]]
func.func @conv_output_shared(%x: tensor<1x4x8x8xf32>, %w: tensor<4x4x1x1xf32>) -> tensor<1x4x8x8xf32> {
  %y = nn.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x4x8x8xf32>, tensor<4x4x1x1xf32>) -> tensor<1x4x8x8xf32>
  %r = nn.relu %y : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %s = nn.add %r, %y : (tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  func.return %s : tensor<1x4x8x8xf32>
}
