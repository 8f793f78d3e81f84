// RUN: ascendir-opt %s -p fuse-moe-experts | filecheck %s

// Mixtral's MoE block as the TorchScript export and fuse-ffn leave it (tests/data
// mixtral_moe_block_small, onnx.node names dropped but the router TopK's): the two expert-weight
// gathers and the ffn region over them become one moe_experts region named after the block's
// TopK, both gathers reading the same expert ids. The tokens' expand to the (token, k) rows
// (ONNX Tile) goes into the region too: its input is the tokens [64, 1, 1, 128], so the
// lowering gathers each expert-major row from them (MoeInitRouting's expanded_x).
// CHECK:      %[[TOK:.*]] = nn.reshape %{{.*}} : (tensor<64x1x128xf32>) -> tensor<64x1x1x128xf32>
// CHECK-NOT:  nn.expand
// CHECK:      %[[IDS:.*]] = nn.reshape %{{.*}} : (tensor<64x2xi64>) -> tensor<128xi64>
// CHECK:      nn.fused(%[[TOK]], %[[WGU:.*]], %[[IDS]], %[[WD:.*]]) {moe_block = "/gate/TopK", kind = #nn.fused_kind<moe_experts>}
// CHECK-NEXT: ^{{.*}}(%[[A0:.*]]: tensor<64x1x1x128xf32>, %[[A1:.*]]: tensor<8x256x128xf32>, %[[A2:.*]]: tensor<128xi64>, %[[A3:.*]]: tensor<8x128x128xf32>):
// CHECK-NEXT:   %[[E:.*]] = nn.expand %[[A0]] : (tensor<64x1x1x128xf32>) -> tensor<64x2x1x128xf32>
// CHECK-NEXT:   %[[R0:.*]] = nn.reshape %[[E]]
// CHECK-NEXT:   %[[R1:.*]] = nn.reshape %[[R0]]
// CHECK-NEXT:   %[[G0:.*]] = nn.gather %[[A1]], %[[A2]] {axis = 0 : i64}
// CHECK-NEXT:   %[[X:.*]] = nn.reshape %[[R1]] : (tensor<128x128xf32>) -> tensor<128x128x1xf32>
// CHECK-NEXT:   %[[G1:.*]] = nn.gather %[[A3]], %[[A2]] {axis = 0 : i64}
// CHECK-NEXT:   nn.fused(%[[G0]], %[[X]], %[[G1]]) {kind = #nn.fused_kind<ffn>}
// CHECK:        nn.silu
// CHECK:      nn.yield
// CHECK:      nn.reduce_sum
builtin.module {
  func.func @main(%0: tensor<1x64x128xf32> {onnx.name = "hidden_states"}) -> (tensor<1x64x128xf32> {onnx.name = "moe_output"}) {
    %1 = nn.reshape %0 : (tensor<1x64x128xf32>) -> tensor<64x128xf32>
    %2 = nn.weight @"onnx::MatMul_94" : tensor<128x8xf32>
    %3 = nn.matmul %1, %2 : (tensor<64x128xf32>, tensor<128x8xf32>) -> tensor<64x8xf32>
    %4 = nn.softmax %3 {axis = 1 : i64} : (tensor<64x8xf32>) -> tensor<64x8xf32>
    %5, %6 = nn.topk %4 {onnx.node = "/gate/TopK", k = 2 : i64, axis = 1 : i64, largest = true} : (tensor<64x8xf32>) -> (tensor<64x2xf32>, tensor<64x2xi64>)
    %7 = nn.reduce_sum %5 {axes = array<i64: 1>, keepdims = true} : (tensor<64x2xf32>) -> tensor<64x1xf32>
    %8 = nn.div %5, %7 : (tensor<64x2xf32>, tensor<64x1xf32>) -> tensor<64x2xf32>
    %9 = nn.reshape %1 : (tensor<64x128xf32>) -> tensor<64x1x128xf32>
    %10 = nn.reshape %9 : (tensor<64x1x128xf32>) -> tensor<64x1x1x128xf32>
    %11 = nn.expand %10 : (tensor<64x1x1x128xf32>) -> tensor<64x2x1x128xf32>
    %12 = nn.reshape %11 : (tensor<64x2x1x128xf32>) -> tensor<64x2x128xf32>
    %13 = nn.reshape %12 : (tensor<64x2x128xf32>) -> tensor<128x128xf32>
    %14 = nn.reshape %8 : (tensor<64x2xf32>) -> tensor<128xf32>
    %15 = nn.reshape %6 : (tensor<64x2xi64>) -> tensor<128xi64>
    %16 = nn.weight @block.experts.gate_up_proj : tensor<8x256x128xf32>
    %17 = nn.gather %16, %15 {axis = 0 : i64} : (tensor<8x256x128xf32>, tensor<128xi64>) -> tensor<128x256x128xf32>
    %18 = nn.reshape %13 : (tensor<128x128xf32>) -> tensor<128x128x1xf32>
    %19 = nn.weight @block.experts.down_proj : tensor<8x128x128xf32>
    %20 = nn.gather %19, %15 {axis = 0 : i64} : (tensor<8x128x128xf32>, tensor<128xi64>) -> tensor<128x128x128xf32>
    %21 = nn.fused(%17, %18, %20) {kind = #nn.fused_kind<ffn>} : (tensor<128x256x128xf32>, tensor<128x128x1xf32>, tensor<128x128x128xf32>) -> tensor<128x128x1xf32> {
    ^bb0(%22: tensor<128x256x128xf32>, %23: tensor<128x128x1xf32>, %24: tensor<128x128x128xf32>):
      %25 = nn.matmul %22, %23 : (tensor<128x256x128xf32>, tensor<128x128x1xf32>) -> tensor<128x256x1xf32>
      %26 = nn.reshape %25 : (tensor<128x256x1xf32>) -> tensor<128x256xf32>
      %27 = nn.slice %26 {starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : (tensor<128x256xf32>) -> tensor<128x128xf32>
      %28 = nn.slice %26 {starts = array<i64: 0, 128>, steps = array<i64: 1, 1>} : (tensor<128x256xf32>) -> tensor<128x128xf32>
      %29 = nn.fused(%27, %28) {kind = #nn.fused_kind<elementwise>} : (tensor<128x128xf32>, tensor<128x128xf32>) -> tensor<128x128xf32> {
      ^bb0(%30: tensor<128x128xf32>, %31: tensor<128x128xf32>):
        %32 = nn.silu %30 : (tensor<128x128xf32>) -> tensor<128x128xf32>
        %33 = nn.mul %32, %31 : (tensor<128x128xf32>, tensor<128x128xf32>) -> tensor<128x128xf32>
        nn.yield %33 : tensor<128x128xf32>
      }
      %30 = nn.reshape %29 : (tensor<128x128xf32>) -> tensor<128x128x1xf32>
      %31 = nn.matmul %24, %30 : (tensor<128x128x128xf32>, tensor<128x128x1xf32>) -> tensor<128x128x1xf32>
      nn.yield %31 : tensor<128x128x1xf32>
    }
    %22 = nn.reshape %21 : (tensor<128x128x1xf32>) -> tensor<128x128xf32>
    %23 = nn.reshape %14 : (tensor<128xf32>) -> tensor<128x1xf32>
    %24 = nn.mul %22, %23 : (tensor<128x128xf32>, tensor<128x1xf32>) -> tensor<128x128xf32>
    %25 = nn.reshape %24 : (tensor<128x128xf32>) -> tensor<64x2x128xf32>
    %26 = nn.reduce_sum %25 {axes = array<i64: 1>, keepdims = false} : (tensor<64x2x128xf32>) -> tensor<64x128xf32>
    %27 = nn.reshape %26 : (tensor<64x128xf32>) -> tensor<1x64x128xf32>
    func.return %27 : tensor<1x64x128xf32>
  }
}
