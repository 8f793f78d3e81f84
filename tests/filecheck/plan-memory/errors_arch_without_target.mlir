// RUN: not ascendir-opt %s -p plan-memory 2>&1 | filecheck %s

// Without `ascend.target` the arch picks the target (arch_without_target.mlir), and the capacity
// error names it: two 768 KiB L1 tiles overflow the 910A's 1 MiB L1 (they used to be checked
// against the default 910B2's 512 KiB).
// CHECK: ascendir-opt: error: plan-memory: kernel @a910_big: L1 buffer 768x512xf16 (786432 B) does not fit: 1572864 B of L1 needed, 1048576 B available on ascend910a
builtin.module attributes {ascend.arch = "dav-c100"} {
  ascend.kernel @a910_big(%x: memref<768x512xf16, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = "aic"} {
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
