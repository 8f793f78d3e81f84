// RUN: ascendir-opt %s --split-input-file -p 'fuse-attention,choose-tiling' | filecheck %s
// RUN: ascendir-opt %s --split-input-file -p 'fuse-attention,choose-tiling{tiling="br=16,bc=32"}' | filecheck %s --check-prefix=FORCED
// RUN: ascendir-opt %s --split-input-file -p 'fuse-attention,choose-tiling' 2>&1 >/dev/null | filecheck %s --check-prefix=NOTE

// choose-tiling records the flash-attention tile it scores best as `ascend.tiling = #ascend.tiling<{br, bc}>` on
// the nn.attention of the region: one head of 512 f16 queries over 4096 keys (D 128) takes Br = 32
// (16 row blocks occupy 16 cores; Br = 128 would leave 20 of 24 idle), Bc = 256 (the vector
// cores see 256 keys a block; L0B holds the K^T and V tiles of D 128 up to 128 keys, so the cube
// takes each block in two steps).
// CHECK-LABEL: func.func @long_keys
// CHECK:         nn.fused(%q, %k, %v) {kind = #nn.fused_kind<flash_attention>}
// CHECK:           nn.attention {{.*}}ascend.tiling = #ascend.tiling<{br = 32 : i64, bc = 256 : i64}>
// FORCED-LABEL: func.func @long_keys
// FORCED:         nn.attention {{.*}}ascend.tiling = #ascend.tiling<{br = 16 : i64, bc = 32 : i64}>
func.func @long_keys(%q: tensor<1x1x512x128xf16>, %k: tensor<1x1x4096x128xf16>, %v: tensor<1x1x4096x128xf16>) -> tensor<1x1x512x128xf16> {
  %o = nn.attention %q, %k, %v {num_heads = 1 : i64, num_kv_heads = 1 : i64, causal = false, scale = 0.0883883461 : f32} : (tensor<1x1x512x128xf16>, tensor<1x1x4096x128xf16>, tensor<1x1x4096x128xf16>) -> tensor<1x1x512x128xf16>
  func.return %o : tensor<1x1x512x128xf16>
}

// -----

// A tile written in the IR text is kept (choose-tiling without `tiling` searches nothing for it);
// `tiling` replaces it.
// CHECK-LABEL: func.func @given
// CHECK:         nn.attention {{.*}}ascend.tiling = #ascend.tiling<{br = 64 : i64, bc = 64 : i64}>
// FORCED-LABEL: func.func @given
// FORCED:         nn.attention {{.*}}ascend.tiling = #ascend.tiling<{br = 16 : i64, bc = 32 : i64}>
func.func @given(%q: tensor<1x4x256x64xf16>, %k: tensor<1x2x256x64xf16>, %v: tensor<1x2x256x64xf16>) -> tensor<1x4x256x64xf16> {
  %o = nn.attention %q, %k, %v {ascend.tiling = #ascend.tiling<{br = 64 : i64, bc = 64 : i64}>, num_heads = 4 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.125 : f32} : (tensor<1x4x256x64xf16>, tensor<1x2x256x64xf16>, tensor<1x2x256x64xf16>) -> tensor<1x4x256x64xf16>
  func.return %o : tensor<1x4x256x64xf16>
}

// The candidates scored and the time are reported on stderr (the second function's tile was
// given: nothing searched for it).
// NOTE: ascendir-opt: note: choose-tiling: 1 attention (1 searched, {{[0-9]+}} candidates scored) in {{[0-9.]+}} s
