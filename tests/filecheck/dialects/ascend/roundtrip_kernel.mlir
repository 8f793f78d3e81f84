// RUN: ascendir-opt %s | ascendir-opt | filecheck %s
// RUN: ascendir-opt %s --print-op-generic | ascendir-opt | filecheck %s

// Round trip of the kernel, host and buffer ops (ops_kernel.py): ascend.kernel with its typed
// #ascend.core_type and declared ffn_plan, ascend.return, ascend.block_idx, ascend.alloc
// with its declared offset / ascend.slot / subblock, ascend.weight (by name and valued),
// ascend.view, ascend.launch (with the ONNX nodes it computes); the module's #ascend.arch and #ascend.target.

// CHECK:      builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">, ascend.target = #ascend.target<"ascend910b2">} {
// CHECK-NEXT: ascend.kernel @k(%x: memref<32x64xf16, #ascend<space gm>>, %y: memref<2048xf16, #ascend<space gm>>) attributes {block_dim = 4 : i64, core_type = #ascend.core_type<mix>, ffn_plan = "fused"} {
// CHECK-NEXT: %i = ascend.block_idx : index
// CHECK-NEXT: %u = ascend.alloc {offset = 0 : i64, ascend.slot = 1 : i64, subblock = 1 : i64} : memref<16x64xf16, #ascend<space ub>>
// CHECK-NEXT: %w = ascend.weight @w0 : memref<64x64xf16, #ascend<space gm>>
// CHECK-NEXT: %c = ascend.weight @c0 {value = dense<1.000000e+00> : tensor<2x2xf32>} : memref<2x2xf32, #ascend<space gm>>
// CHECK-NEXT: %v = ascend.view %y : memref<2048xf16, #ascend<space gm>> to memref<32x64xf16, #ascend<space gm>>
// CHECK-NEXT: ascend.return
// CHECK-NEXT: }
// CHECK-NEXT: func.func @main(%x: memref<32x64xf16, #ascend<space gm>>, %y: memref<2048xf16, #ascend<space gm>>) {
// CHECK-NEXT: ascend.launch @k(%x, %y) : memref<32x64xf16, #ascend<space gm>>, memref<2048xf16, #ascend<space gm>>
// CHECK-NEXT: ascend.launch @k(%x, %y) {onnx.node = "/model/MatMul, /model/Add"} : memref<32x64xf16, #ascend<space gm>>, memref<2048xf16, #ascend<space gm>>
// CHECK-NEXT: func.return
// CHECK-NEXT: }
// CHECK-NEXT: }
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">, ascend.target = #ascend.target<"ascend910b2">} {
  ascend.kernel @k(%x: memref<32x64xf16, #ascend<space gm>>, %y: memref<2048xf16, #ascend<space gm>>) attributes {block_dim = 4 : i64, core_type = #ascend.core_type<mix>, ffn_plan = "fused"} {
    %i = ascend.block_idx : index
    %u = ascend.alloc {offset = 0 : i64, ascend.slot = 1 : i64, subblock = 1 : i64} : memref<16x64xf16, #ascend<space ub>>
    %w = ascend.weight @w0 : memref<64x64xf16, #ascend<space gm>>
    %c = ascend.weight @c0 {value = dense<1.000000e+00> : tensor<2x2xf32>} : memref<2x2xf32, #ascend<space gm>>
    %v = ascend.view %y : memref<2048xf16, #ascend<space gm>> to memref<32x64xf16, #ascend<space gm>>
    ascend.return
  }
  func.func @main(%x: memref<32x64xf16, #ascend<space gm>>, %y: memref<2048xf16, #ascend<space gm>>) {
    ascend.launch @k(%x, %y) : memref<32x64xf16, #ascend<space gm>>, memref<2048xf16, #ascend<space gm>>
    ascend.launch @k(%x, %y) {onnx.node = "/model/MatMul, /model/Add"} : memref<32x64xf16, #ascend<space gm>>, memref<2048xf16, #ascend<space gm>>
    func.return
  }
}
