// RUN: not ascendir-opt %s -p plan-memory 2>&1 | filecheck %s

// Two L1 tiles live together (384 + 256 KiB) need 640 KiB of the 512 KiB L1 of a 910B2: the error names the
// kernel, the buffer, the bytes needed vs available and the largest tile of its shape that fits
// next to the other one.
// CHECK: ascendir-opt: error: plan-memory: kernel @too_big: L1 buffer 256x512xf16 (262144 B) does not fit: 655360 B of L1 needed, 524288 B available on ascend910b2; largest tile that fits: 128x512xf16
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">, ascend.target = #ascend.target<"ascend910b2">} {
  ascend.kernel @too_big(%x: memref<1024x512xf16, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aic>} {
    %a = ascend.alloc : memref<768x256xf16, #ascend<space l1>>
    %b = ascend.alloc : memref<256x512xf16, #ascend<space l1>>
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    scf.for %i = %c0 to %c2 step %c1 {
    %sa = memref.subview %x[0, 0] [768, 256] [1, 1] : memref<1024x512xf16, #ascend<space gm>> to memref<768x256xf16, strided<[512, 1]>, #ascend<space gm>>
    ascend.copy %sa, %a : memref<768x256xf16, strided<[512, 1]>, #ascend<space gm>>, memref<768x256xf16, #ascend<space l1>>
    %sb = memref.subview %x[0, 0] [256, 512] [1, 1] : memref<1024x512xf16, #ascend<space gm>> to memref<256x512xf16, strided<[512, 1]>, #ascend<space gm>>
    ascend.copy %sb, %b : memref<256x512xf16, strided<[512, 1]>, #ascend<space gm>>, memref<256x512xf16, #ascend<space l1>>
    }
    ascend.return
  }
}
