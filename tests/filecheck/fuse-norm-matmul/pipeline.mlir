// RUN: ascendir-opt %s -p 'O2,convert-nn-to-ascend' | filecheck %s
// RUN: ascendir-opt %s -p 'O0,convert-nn-to-ascend' | filecheck %s --check-prefix=UNFUSED

// RMSNorm -> Q/K/V at -O2: the norm kernel (AIV) writes the normalized rows once, then ONE
// grouped cube kernel computes the three projections (all their tiles in one work list,
// dispatched by tile index); -O0 launches four kernels (k and v share one kernel: same shapes).
// CHECK:     ascend.kernel @norm_matmul_norm_0({{.*}} core_type = #ascend.core_type<aiv>
// CHECK:       ascend.vrsqrt
// CHECK:     ascend.kernel @norm_matmul_0({{.*}} core_type = #ascend.core_type<aic>
// CHECK:       arith.cmpi ult
// CHECK:       ascend.mmad
// CHECK:     func.func @main
// CHECK:       ascend.launch @norm_matmul_norm_0
// CHECK:       ascend.launch @norm_matmul_0
// CHECK-NOT:   ascend.launch

// UNFUSED:     ascend.launch @rms_norm_0
// UNFUSED:     ascend.launch @matmul_0
// UNFUSED:     ascend.launch @matmul_1
// UNFUSED:     ascend.launch @matmul_1
// UNFUSED-NOT: ascend.launch
func.func @main(%x: tensor<1x64x256xf16> {onnx.name = "x"}) -> (tensor<1x64x256xf16> {onnx.name = "q"}, tensor<1x64x128xf16> {onnx.name = "k"}, tensor<1x64x128xf16> {onnx.name = "v"}) {
  %g = nn.weight @g : tensor<256xf16>
  %wq = nn.weight @wq : tensor<256x256xf16>
  %wk = nn.weight @wk : tensor<256x128xf16>
  %wv = nn.weight @wv : tensor<256x128xf16>
  %n = nn.rms_norm %x, %g {axis = 2 : i64, epsilon = 1.0e-05 : f32} : (tensor<1x64x256xf16>, tensor<256xf16>) -> tensor<1x64x256xf16>
  %q = nn.matmul %n, %wq : (tensor<1x64x256xf16>, tensor<256x256xf16>) -> tensor<1x64x256xf16>
  %k = nn.matmul %n, %wk : (tensor<1x64x256xf16>, tensor<256x128xf16>) -> tensor<1x64x128xf16>
  %v = nn.matmul %n, %wv : (tensor<1x64x256xf16>, tensor<256x128xf16>) -> tensor<1x64x128xf16>
  func.return %q, %k, %v : tensor<1x64x256xf16>, tensor<1x64x128xf16>, tensor<1x64x128xf16>
}
