// RUN: ascendir-opt %s -p 'cache-append,fuse-attention,page-kv-cache{block_size=16 blocks=3 pool=3},choose-tiling' | filecheck %s
// RUN: ascendir-opt %s -p 'cache-append,fuse-attention,page-kv-cache{block_size=32 blocks=2 pool=2},choose-tiling' | filecheck %s --check-prefix=B32
// RUN: ascendir-opt %s -p 'cache-append,fuse-attention,page-kv-cache{block_size=16 blocks=3 pool=3},choose-tiling,convert-nn-to-ascend' | filecheck %s --check-prefix=LOWER

// A decode step (past 40 positions, one new row) with its cache paged in blocks of 16: the past
// arguments become pools [3 blocks, 2 KV heads, 16, 16], a block table [1, 3] (i32) is added, the
// appends write through it, and the attention region reads nn.paged_kv views of the pools inside
// itself. The KV tile holds whole blocks: Bc 48 (all three blocks of 16, the tile search's pick:
// after the first, the table reads hit the scalar DCache), Bc 32 with blocks of 32.
// CHECK-LABEL: func.func @main(%q: tensor<1x4x1x16xf32>, %pk: tensor<3x2x16x16xf32>, %pv: tensor<3x2x16x16xf32>, %nk: tensor<1x2x1x16xf32>, %nv: tensor<1x2x1x16xf32>, %0: tensor<1x3xi32> {onnx.name = "block_table", ascend.address_data = "kv block table"}) -> (tensor<1x4x1x16xf32>, tensor<3x2x16x16xf32>, tensor<3x2x16x16xf32>)
// CHECK-NEXT:    %k = nn.paged_cache_append %pk, %nk, %0 {offset = 40 : i64}
// CHECK-NEXT:    %v = nn.paged_cache_append %pv, %nv, %0 {offset = 40 : i64}
// CHECK-NEXT:    %o = nn.fused(%q, %k, %v, %0) {kind = #nn.fused_kind<flash_attention>}
// CHECK:           nn.paged_kv %{{.*}}, %{{.*}} {length = 41 : i64} : (tensor<3x2x16x16xf32>, tensor<1x3xi32>) -> tensor<1x2x41x16xf32>
// CHECK:           nn.paged_kv
// CHECK:           nn.attention {{.*}}bc = 48
// CHECK:         func.return %o, %k, %v : tensor<1x4x1x16xf32>, tensor<3x2x16x16xf32>, tensor<3x2x16x16xf32>
// B32:           nn.attention {{.*}}bc = 32

// Lowered: the append reads the table entry of the block it writes; the attention reads the entry
// of each block it loads, for K and for V on the AIC, and the AIV's L2 prefetch reads them too.
// LOWER-LABEL: ascend.kernel @paged_cache_append_0
// LOWER:         ascend.get_value
// LOWER-LABEL: ascend.kernel @flash_attention_0
// LOWER:         ascend.get_value {{.*}} {subblock = 1 : i64} : memref<1x3xi32, #ascend<space gm>>
// LOWER:         ascend.get_value {{.*}}] : memref<1x3xi32, #ascend<space gm>>
// LOWER-LABEL: func.func @main
func.func @main(%q: tensor<1x4x1x16xf32>, %pk: tensor<1x2x40x16xf32>, %pv: tensor<1x2x40x16xf32>, %nk: tensor<1x2x1x16xf32>, %nv: tensor<1x2x1x16xf32>) -> (tensor<1x4x1x16xf32>, tensor<1x2x41x16xf32>, tensor<1x2x41x16xf32>) {
  %k = nn.concat %pk, %nk {axis = 2 : i64} : (tensor<1x2x40x16xf32>, tensor<1x2x1x16xf32>) -> tensor<1x2x41x16xf32>
  %v = nn.concat %pv, %nv {axis = 2 : i64} : (tensor<1x2x40x16xf32>, tensor<1x2x1x16xf32>) -> tensor<1x2x41x16xf32>
  %o = nn.attention %q, %k, %v {num_heads = 4 : i64, num_kv_heads = 2 : i64, causal = false, scale = 2.500000e-01 : f32} : (tensor<1x4x1x16xf32>, tensor<1x2x41x16xf32>, tensor<1x2x41x16xf32>) -> tensor<1x4x1x16xf32>
  func.return %o, %k, %v : tensor<1x4x1x16xf32>, tensor<1x2x41x16xf32>, tensor<1x2x41x16xf32>
}
