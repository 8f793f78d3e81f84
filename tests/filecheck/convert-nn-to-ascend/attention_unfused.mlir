// RUN: ascendir-opt %s -p convert-nn-to-ascend | filecheck %s

// An nn.attention outside a flash_attention region (e.g. `-p recompose-nn` without
// fuse-attention) is decomposed by the pass itself, as `ascendir compile` does before lowering;
// it used to fail with "convert-nn-to-ascend has no template for nn.attention". The causal
// triangle is an nn.constant, kept as a valued ascend.weight.
// CHECK: ascend.kernel @transpose_0
// CHECK: ascend.kernel @matmul_0
// CHECK: ascend.kernel @softmax_0
// CHECK: func.func @main
// CHECK: ascend.weight @inline_const_{{[0-9]+}} {value = dense<{{.*}}> : tensor<4x4xi1>}
// CHECK-NOT: nn.attention
func.func @main(%q: tensor<1x2x4x16xf16>, %k: tensor<1x2x4x16xf16>, %v: tensor<1x2x4x16xf16>) -> tensor<1x2x4x16xf16> {
  %o = nn.attention %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.25 : f32} : (tensor<1x2x4x16xf16>, tensor<1x2x4x16xf16>, tensor<1x2x4x16xf16>) -> tensor<1x2x4x16xf16>
  func.return %o : tensor<1x2x4x16xf16>
}
