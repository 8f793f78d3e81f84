// RUN: ascendir-opt %s | ascendir-opt | filecheck %s
// RUN: ascendir-opt %s --print-op-generic | ascendir-opt | filecheck %s

// Round trip of every vector op (ops_vector.py): the 20 unary, 11 binary, 5 scalar and 6 reduce
// ops (4 whole-row, 2 per 32-B block), vcast (with its #ascend.round_mode), vcmp (its #ascend<cmp> predicate printed bare), vsel, vdup, vtranspose, varange, and a
// declared subblock.

// CHECK:      builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
// CHECK-NEXT: ascend.kernel @vec() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
// CHECK-NEXT: %a = ascend.alloc : memref<16x64xf32, #ascend<space ub>>
// CHECK-NEXT: %b = ascend.alloc : memref<16x64xf32, #ascend<space ub>>
// CHECK-NEXT: %r = ascend.alloc : memref<16x1xf32, #ascend<space ub>>
// CHECK-NEXT: %m = ascend.alloc : memref<16x64xi1, #ascend<space ub>>
// CHECK-NEXT: %h = ascend.alloc : memref<16x64xf16, #ascend<space ub>>
// CHECK-NEXT: %t = ascend.alloc : memref<64x16xf32, #ascend<space ub>>
// CHECK-NEXT: %n = ascend.alloc : memref<16x64xi1, #ascend<space ub>>
// CHECK-NEXT: %e = ascend.alloc : memref<16x64xf8E8M0FNU, #ascend<space ub>>
// CHECK-NEXT: %k = ascend.alloc : memref<16x8xf32, #ascend<space ub>>
// CHECK-NEXT: %k16 = ascend.alloc : memref<16x4xf16, #ascend<space ub>>
// CHECK-NEXT: ascend.vexp %a, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
// CHECK-NEXT: ascend.vln %a, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
// CHECK-NEXT: ascend.vsqrt %a, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
// CHECK-NEXT: ascend.vrsqrt %a, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
// CHECK-NEXT: ascend.vrec %a, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
// CHECK-NEXT: ascend.vabs %a, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
// CHECK-NEXT: ascend.vrelu %a, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
// CHECK-NEXT: ascend.vsigmoid %a, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
// CHECK-NEXT: ascend.vtanh %a, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
// CHECK-NEXT: ascend.verf %a, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
// CHECK-NEXT: ascend.vgelu %a, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
// CHECK-NEXT: ascend.vgelu_tanh %a, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
// CHECK-NEXT: ascend.vsilu %a, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
// CHECK-NEXT: ascend.vsin %a, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
// CHECK-NEXT: ascend.vcos %a, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
// CHECK-NEXT: ascend.vfloor %a, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
// CHECK-NEXT: ascend.vceil %a, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
// CHECK-NEXT: ascend.vnot %m, %n : memref<16x64xi1, #ascend<space ub>>, memref<16x64xi1, #ascend<space ub>>
// CHECK-NEXT: ascend.vcopy %a, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
// CHECK-NEXT: ascend.vneg %a, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
// CHECK-NEXT: ascend.vadd %a, %r, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x1xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
// CHECK-NEXT: ascend.vsub %a, %r, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x1xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
// CHECK-NEXT: ascend.vmul %a, %r, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x1xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
// CHECK-NEXT: ascend.vdiv %a, %r, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x1xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
// CHECK-NEXT: ascend.vmax %a, %r, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x1xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
// CHECK-NEXT: ascend.vmin %a, %r, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x1xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
// CHECK-NEXT: ascend.vpow %a, %r, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x1xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
// CHECK-NEXT: ascend.vand %m, %n, %n : memref<16x64xi1, #ascend<space ub>>, memref<16x64xi1, #ascend<space ub>>, memref<16x64xi1, #ascend<space ub>>
// CHECK-NEXT: ascend.vor %m, %n, %n : memref<16x64xi1, #ascend<space ub>>, memref<16x64xi1, #ascend<space ub>>, memref<16x64xi1, #ascend<space ub>>
// CHECK-NEXT: ascend.vmod %a, %r, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x1xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
// CHECK-NEXT: ascend.vfmod %a, %r, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x1xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
// CHECK-NEXT: ascend.vadds %a, %b {scalar = 2.500000e-01 : f64} : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
// CHECK-NEXT: ascend.vmuls %a, %b {scalar = 2.500000e-01 : f64} : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
// CHECK-NEXT: ascend.vmaxs %a, %b {scalar = 2.500000e-01 : f64} : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
// CHECK-NEXT: ascend.vmins %a, %b {scalar = 2.500000e-01 : f64} : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
// CHECK-NEXT: ascend.vpows %a, %b {scalar = 2.500000e-01 : f64} : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
// CHECK-NEXT: ascend.vreduce_sum %a, %r : memref<16x64xf32, #ascend<space ub>>, memref<16x1xf32, #ascend<space ub>>
// CHECK-NEXT: ascend.vreduce_max %a, %r : memref<16x64xf32, #ascend<space ub>>, memref<16x1xf32, #ascend<space ub>>
// CHECK-NEXT: ascend.vreduce_min %a, %r : memref<16x64xf32, #ascend<space ub>>, memref<16x1xf32, #ascend<space ub>>
// CHECK-NEXT: ascend.vreduce_prod %a, %r : memref<16x64xf32, #ascend<space ub>>, memref<16x1xf32, #ascend<space ub>>
// CHECK-NEXT: ascend.vblock_reduce_max %a, %k : memref<16x64xf32, #ascend<space ub>>, memref<16x8xf32, #ascend<space ub>>
// CHECK-NEXT: ascend.vblock_reduce_sum %h, %k16 : memref<16x64xf16, #ascend<space ub>>, memref<16x4xf16, #ascend<space ub>>
// CHECK-NEXT: ascend.vcast %a, %h : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf16, #ascend<space ub>>
// CHECK-NEXT: ascend.vcast %a, %e {saturate = false, round_mode = #ascend.round_mode<down>} : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf8E8M0FNU, #ascend<space ub>>
// CHECK-NEXT: ascend.vcmp lt %a, %b, %m : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>, memref<16x64xi1, #ascend<space ub>>
// CHECK-NEXT: ascend.vsel %m, %a, %b, %b : memref<16x64xi1, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
// CHECK-NEXT: ascend.vdup %b {scalar = -1.000000e+00 : f64} : memref<16x64xf32, #ascend<space ub>>
// CHECK-NEXT: ascend.vtranspose %a, %t {perm = [1 : i64, 0 : i64]} : memref<16x64xf32, #ascend<space ub>>, memref<64x16xf32, #ascend<space ub>>
// CHECK-NEXT: %c3 = arith.constant -3 : index
// CHECK-NEXT: ascend.varange %c3, %b : memref<16x64xf32, #ascend<space ub>>
// CHECK-NEXT: ascend.vadd %a, %a, %a {subblock = 0 : i64} : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
// CHECK-NEXT: ascend.return
// CHECK-NEXT: }
// CHECK-NEXT: }
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @vec() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %a = ascend.alloc : memref<16x64xf32, #ascend<space ub>>
    %b = ascend.alloc : memref<16x64xf32, #ascend<space ub>>
    %r = ascend.alloc : memref<16x1xf32, #ascend<space ub>>
    %m = ascend.alloc : memref<16x64xi1, #ascend<space ub>>
    %h = ascend.alloc : memref<16x64xf16, #ascend<space ub>>
    %t = ascend.alloc : memref<64x16xf32, #ascend<space ub>>
    %n = ascend.alloc : memref<16x64xi1, #ascend<space ub>>
    %e = ascend.alloc : memref<16x64xf8E8M0FNU, #ascend<space ub>>
    %k = ascend.alloc : memref<16x8xf32, #ascend<space ub>>
    %k16 = ascend.alloc : memref<16x4xf16, #ascend<space ub>>
    ascend.vexp %a, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
    ascend.vln %a, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
    ascend.vsqrt %a, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
    ascend.vrsqrt %a, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
    ascend.vrec %a, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
    ascend.vabs %a, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
    ascend.vrelu %a, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
    ascend.vsigmoid %a, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
    ascend.vtanh %a, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
    ascend.verf %a, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
    ascend.vgelu %a, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
    ascend.vgelu_tanh %a, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
    ascend.vsilu %a, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
    ascend.vsin %a, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
    ascend.vcos %a, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
    ascend.vfloor %a, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
    ascend.vceil %a, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
    ascend.vnot %m, %n : memref<16x64xi1, #ascend<space ub>>, memref<16x64xi1, #ascend<space ub>>
    ascend.vcopy %a, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
    ascend.vneg %a, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
    ascend.vadd %a, %r, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x1xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
    ascend.vsub %a, %r, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x1xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
    ascend.vmul %a, %r, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x1xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
    ascend.vdiv %a, %r, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x1xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
    ascend.vmax %a, %r, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x1xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
    ascend.vmin %a, %r, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x1xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
    ascend.vpow %a, %r, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x1xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
    ascend.vand %m, %n, %n : memref<16x64xi1, #ascend<space ub>>, memref<16x64xi1, #ascend<space ub>>, memref<16x64xi1, #ascend<space ub>>
    ascend.vor %m, %n, %n : memref<16x64xi1, #ascend<space ub>>, memref<16x64xi1, #ascend<space ub>>, memref<16x64xi1, #ascend<space ub>>
    ascend.vmod %a, %r, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x1xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
    ascend.vfmod %a, %r, %b : memref<16x64xf32, #ascend<space ub>>, memref<16x1xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
    ascend.vadds %a, %b {scalar = 2.500000e-01 : f64} : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
    ascend.vmuls %a, %b {scalar = 2.500000e-01 : f64} : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
    ascend.vmaxs %a, %b {scalar = 2.500000e-01 : f64} : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
    ascend.vmins %a, %b {scalar = 2.500000e-01 : f64} : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
    ascend.vpows %a, %b {scalar = 2.500000e-01 : f64} : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
    ascend.vreduce_sum %a, %r : memref<16x64xf32, #ascend<space ub>>, memref<16x1xf32, #ascend<space ub>>
    ascend.vreduce_max %a, %r : memref<16x64xf32, #ascend<space ub>>, memref<16x1xf32, #ascend<space ub>>
    ascend.vreduce_min %a, %r : memref<16x64xf32, #ascend<space ub>>, memref<16x1xf32, #ascend<space ub>>
    ascend.vreduce_prod %a, %r : memref<16x64xf32, #ascend<space ub>>, memref<16x1xf32, #ascend<space ub>>
    ascend.vblock_reduce_max %a, %k : memref<16x64xf32, #ascend<space ub>>, memref<16x8xf32, #ascend<space ub>>
    ascend.vblock_reduce_sum %h, %k16 : memref<16x64xf16, #ascend<space ub>>, memref<16x4xf16, #ascend<space ub>>
    ascend.vcast %a, %h : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf16, #ascend<space ub>>
    ascend.vcast %a, %e {saturate = false, round_mode = #ascend.round_mode<down>} : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf8E8M0FNU, #ascend<space ub>>
    ascend.vcmp lt %a, %b, %m : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>, memref<16x64xi1, #ascend<space ub>>
    ascend.vsel %m, %a, %b, %b : memref<16x64xi1, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
    ascend.vdup %b {scalar = -1.000000e+00 : f64} : memref<16x64xf32, #ascend<space ub>>
    ascend.vtranspose %a, %t {perm = [1 : i64, 0 : i64]} : memref<16x64xf32, #ascend<space ub>>, memref<64x16xf32, #ascend<space ub>>
    %c3 = arith.constant -3 : index
    ascend.varange %c3, %b : memref<16x64xf32, #ascend<space ub>>
    ascend.vadd %a, %a, %a {subblock = 0 : i64} : memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>, memref<16x64xf32, #ascend<space ub>>
    ascend.return
  }
}
