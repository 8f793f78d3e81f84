// RUN: not ascendir-opt %s -p 'cache-append,page-kv-cache{block_size=512 blocks=1 pool=1},convert-nn-to-ascend' 2>&1 | filecheck %s

// A block of 512 positions x 128 f32 (256 KiB) does not fit the UB share the paged cache write
// copies a block through: one line naming the bytes and what to do.
// CHECK: error: {{.*}}a KV block of 512 positions x 128 (262144 bytes) does not fit the {{[0-9]+}} bytes of UB the copy may use: take a smaller --kv-block-size
// CHECK-NOT: Traceback
func.func @main(%pk: tensor<1x2x40x128xf32>, %nk: tensor<1x2x1x128xf32>) -> tensor<1x2x41x128xf32> {
  %k = nn.concat %pk, %nk {axis = 2 : i64} : (tensor<1x2x40x128xf32>, tensor<1x2x1x128xf32>) -> tensor<1x2x41x128xf32>
  func.return %k : tensor<1x2x41x128xf32>
}
