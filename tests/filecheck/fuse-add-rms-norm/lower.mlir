// RUN: ascendir-opt %s -p fuse-add-rms-norm,convert-nn-to-ascend | filecheck %s

// The add_rms_norm template: one vector kernel; per tile x and r are loaded once (MTE2), added,
// normalized (f32 statistics for f16), and the norm and the sum stored (MTE3); gamma is loaded
// once per core before the tile loop. No separate rms_norm kernel (the add after it is another op).
// CHECK-LABEL: ascend.kernel @add_rms_norm_0
// CHECK:         ascend.copy %{{.*}}, %{{.*}} : memref<1x64xf16, #ascend<space gm>>, memref<1x64xf16, #ascend<space ub>>
// CHECK:         scf.for
// CHECK-COUNT-2: ascend.copy %{{.*}}, %{{.*}} : memref<16x64xf16, #ascend<space gm>>, memref<16x64xf16, #ascend<space ub>>
// CHECK:         ascend.vadd
// CHECK:         ascend.vcast
// CHECK:         ascend.vrsqrt
// CHECK-COUNT-2: ascend.copy %{{.*}}, %{{.*}} : memref<16x64xf16, #ascend<space ub>>, memref<16x64xf16, #ascend<space gm>>
// CHECK:       func.func @main
// CHECK-NOT:     ascend.launch @rms_norm
// CHECK:         ascend.launch @add_rms_norm_0
// CHECK-NOT:     ascend.launch @rms_norm
func.func @main(%x: tensor<2x8x64xf16>, %r: tensor<2x8x64xf16>, %g: tensor<64xf16>) -> tensor<2x8x64xf16> {
  %y = nn.add %x, %r : (tensor<2x8x64xf16>, tensor<2x8x64xf16>) -> tensor<2x8x64xf16>
  %n = nn.rms_norm %y, %g {axis = 2 : i64, epsilon = 1.0e-6 : f32} : (tensor<2x8x64xf16>, tensor<64xf16>) -> tensor<2x8x64xf16>
  %z = nn.add %y, %n : (tensor<2x8x64xf16>, tensor<2x8x64xf16>) -> tensor<2x8x64xf16>
  func.return %z : tensor<2x8x64xf16>
}
