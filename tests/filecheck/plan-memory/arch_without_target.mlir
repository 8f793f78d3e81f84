// RUN: ascendir-opt %s -p plan-memory --split-input-file | filecheck %s

// A module that names its arch but no `ascend.target` is planned for the shipped target of that
// arch: a 910A module (dav-c100) used to be planned for the default 910B2, whose 512 KiB L1
// rejected this 768 KiB L1 tile that the 910A's 1 MiB L1 holds.
// CHECK-LABEL: ascend.kernel @a910
// CHECK: ascend.alloc {offset = 0 : i64} : memref<768x512xf16, #ascend<space l1>>
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c100">} {
  ascend.kernel @a910(%x: memref<768x512xf16, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aic>} {
    %a = ascend.alloc : memref<768x512xf16, #ascend<space l1>>
    ascend.copy %x, %a : memref<768x512xf16, #ascend<space gm>>, memref<768x512xf16, #ascend<space l1>>
    ascend.return
  }
}

// -----

// dav-c220 is the arch of four shipped targets; the default (910B2) is one of them and stays.
// The same tile does not fit its 512 KiB L1, so plan this 384 KiB one.
// CHECK-LABEL: ascend.kernel @b910
// CHECK: ascend.alloc {offset = 0 : i64} : memref<384x512xf16, #ascend<space l1>>
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @b910(%x: memref<384x512xf16, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aic>} {
    %a = ascend.alloc : memref<384x512xf16, #ascend<space l1>>
    ascend.copy %x, %a : memref<384x512xf16, #ascend<space gm>>, memref<384x512xf16, #ascend<space l1>>
    ascend.return
  }
}

