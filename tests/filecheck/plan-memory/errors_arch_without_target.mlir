// RUN: not ascendir-opt %s -p plan-memory 2>&1 | filecheck %s
// RUN: not ascendir-opt %s -p 'plan-memory{target=ascend910b2}' 2>&1 | filecheck %s --check-prefix=B2

// Without `ascend.target` the arch picks the target (arch_without_target.mlir), and the capacity
// error names it: two 768 KiB L1 tiles overflow the 910A's 1 MiB L1 (they used to be checked
// against the default 910B2's 512 KiB).
// CHECK: ascendir-opt: error: plan-memory: kernel @a910_big: L1 buffer 768x512xf16 (786432 B) does not fit: 1572864 B of L1 needed, 1048576 B available on ascend910a
// On the 910B2 the first buffer alone overflows its 512 KiB L1; the largest tile that fits must
// fit (the second buffer, placed past the end, leaves the space free): 512 rows, not 768.
// B2: ascendir-opt: error: plan-memory: kernel @a910_big: L1 buffer 768x512xf16 (786432 B) does not fit: 786432 B of L1 needed, 524288 B available on ascend910b2; largest tile that fits: 512x512xf16{{$}}
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c100">} {
  ascend.kernel @a910_big(%x: memref<768x512xf16, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aic>} {
    %a = ascend.alloc : memref<768x512xf16, #ascend<space l1>>
    %b = ascend.alloc : memref<768x512xf16, #ascend<space l1>>
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    scf.for %i = %c0 to %c2 step %c1 {
      ascend.copy %x, %a : memref<768x512xf16, #ascend<space gm>>, memref<768x512xf16, #ascend<space l1>>
      ascend.copy %x, %b : memref<768x512xf16, #ascend<space gm>>, memref<768x512xf16, #ascend<space l1>>
    }
    ascend.return
  }
}
