// RUN: not ascendir-opt %s -p 'fuse-attention,choose-tiling{tiling="br=128,bc=512"}' 2>&1 | filecheck %s --check-prefix=ATT
// RUN: not ascendir-opt %s -p 'choose-tiling{tiling="m=256,n=384,k=16"}' 2>&1 | filecheck %s --check-prefix=MM
// RUN: not ascendir-opt %s -p 'choose-tiling{tiling="m=128,n=256,k=64,split_k=1000"}' 2>&1 | filecheck %s --check-prefix=SPLIT

// A forced attention tile of 128 f32 query rows by 160 keys (512 clamped to the 150 keys padded
// to 16) overflows L0A (Q [128, 128] + P [128, 80] f32: 160 keys are two cube steps of 80): the
// error names the space, the bytes and the largest tile within the request that fits.
// ATT: ascendir-opt: error: nn.attention #0: tiling br=128,bc=512 (br=128,bc=160 within the sequence lengths) needs 106496 bytes of L0A, ascend910b2 has 65536; largest tile that fits: br=112,bc=128

// m = 256, n = 384 needs 384 KiB of f32 L0C (128 KiB): the largest output tile that fits is
// 32768 elements, and of the two (256 x 128, 128 x 256) the one changing fewer fields. The
// suggestion gives the forced fields (a --tiling / tiling= value), fitting every matmul.
// MM: ascendir-opt: error: nn.matmul #0: tiling m=256,n=384,k=16,l1_depth={{[0-9]+}},split_k=1,swizzle=1 needs 393216 bytes of L0C (the f32 accumulator tiles), ascend910b2 has 131072; largest tile that fits: m=256,n=128,k=16{{$}}

// K = 1024 in chunks of 64 makes at most 16 K ranges; 8 is the largest split the template makes
// exactly whose reduction kernel (8 f32 tiles of 4096 elements + the f16 result tile) fits UB.
// SPLIT: ascendir-opt: error: nn.matmul #0: tiling m=128,n=256,k=64,l1_depth=1,split_k=1000,swizzle=1 cannot split K = 1024 1000 ways: it has 16 chunks of k·l1_depth = 64; largest tile that fits: m=128,n=256,k=64,split_k=8{{$}}
func.func @main(%q: tensor<1x2x150x128xf32>, %k: tensor<1x2x150x128xf32>, %v: tensor<1x2x150x128xf32>, %a: tensor<1024x1024xf16>, %b: tensor<1024x1024xf16>) -> (tensor<1x2x150x128xf32>, tensor<1024x1024xf16>) {
  %o = nn.attention %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.0883883461 : f32} : (tensor<1x2x150x128xf32>, tensor<1x2x150x128xf32>, tensor<1x2x150x128xf32>) -> tensor<1x2x150x128xf32>
  %c = nn.matmul %a, %b : (tensor<1024x1024xf16>, tensor<1024x1024xf16>) -> tensor<1024x1024xf16>
  func.return %o, %c : tensor<1x2x150x128xf32>, tensor<1024x1024xf16>
}
