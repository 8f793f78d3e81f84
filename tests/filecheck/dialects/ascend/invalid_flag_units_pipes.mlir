// RUN: ascendir-opt %s --split-input-file --verify-diagnostics | filecheck %s
// RUN: not ascendir-opt %s --split-input-file 2>&1 | filecheck %s --check-prefix=ERR

// A flag's `units` ("SRC->DST") must put each pipe on a unit that has it: on a 910B group M,
// MTE1 and FIX are the AIC's, V the AIV's; MTE2, MTE3 and S exist on both. `MTE1 -> MTE2`
// with units = #ascend.flag_units<aiv0 -> aic> used to verify (an MTE1 set issued by an AIV, which has no MTE1).

// CHECK: ascend.set_flag MTE1 -> MTE2, 0: units = #ascend.flag_units<aiv0 -> aic> puts pipe MTE1 on aiv0, but MTE1 is a pipe of the AIC only
// ERR: ascendir-opt: error: ascend.set_flag MTE1 -> MTE2, 0: units = #ascend.flag_units<aiv0 -> aic> puts pipe MTE1 on aiv0, but MTE1 is a pipe of the AIC only
// ERR-NOT: error
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @src_aic() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<mix>} {
    ascend.set_flag MTE1 -> MTE2, 0 {units = #ascend.flag_units<aiv0 -> aic>}
    ascend.wait_flag MTE1 -> MTE2, 0 {units = #ascend.flag_units<aiv0 -> aic>}
    ascend.return
  }
}

// -----

// CHECK: ascend.wait_flag MTE2 -> V, 1: units = #ascend.flag_units<aiv -> aic> puts pipe V on aic, but V is a pipe of the AIV only
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @dst_aiv() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<mix>} {
    ascend.wait_flag MTE2 -> V, 1 {units = #ascend.flag_units<aiv -> aic>}
    ascend.return
  }
}

// -----

// CHECK: ascend.set_flag V -> FIX, 2: units = #ascend.flag_units<aiv1 -> aiv0> puts pipe FIX on aiv0, but FIX is a pipe of the AIC only
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @dst_aic() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<mix>} {
    ascend.set_flag V -> FIX, 2 {units = #ascend.flag_units<aiv1 -> aiv0>}
    ascend.return
  }
}

// -----

// CHECK: ascend.set_flag M -> MTE2, 3: units = #ascend.flag_units<aiv -> aiv> puts pipe M on aiv, but M is a pipe of the AIC only
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @src_m() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<mix>} {
    ascend.set_flag M -> MTE2, 3 {units = #ascend.flag_units<aiv -> aiv>}
    ascend.return
  }
}

// -----

// Pipes on the right units, and MTE2 / MTE3 / S (on both units) with either, verify.
// CHECK-LABEL: ascend.kernel @fine
// CHECK: ascend.set_flag FIX -> V, 0 {units = #ascend.flag_units<aic -> aiv1>}
// CHECK: ascend.set_flag MTE3 -> MTE2, 1 {units = #ascend.flag_units<aiv1 -> aic>}
// CHECK: ascend.set_flag MTE3 -> MTE2, 2 {units = #ascend.flag_units<aic -> aiv0>}
// CHECK: ascend.set_flag S -> MTE1, 3 {units = #ascend.flag_units<aiv -> aic>}
builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @fine() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<mix>} {
    ascend.set_flag FIX -> V, 0 {units = #ascend.flag_units<aic -> aiv1>}
    ascend.wait_flag FIX -> V, 0 {units = #ascend.flag_units<aic -> aiv1>}
    ascend.set_flag MTE3 -> MTE2, 1 {units = #ascend.flag_units<aiv1 -> aic>}
    ascend.wait_flag MTE3 -> MTE2, 1 {units = #ascend.flag_units<aiv1 -> aic>}
    ascend.set_flag MTE3 -> MTE2, 2 {units = #ascend.flag_units<aic -> aiv0>}
    ascend.wait_flag MTE3 -> MTE2, 2 {units = #ascend.flag_units<aic -> aiv0>}
    ascend.set_flag S -> MTE1, 3 {units = #ascend.flag_units<aiv -> aic>}
    ascend.wait_flag S -> MTE1, 3 {units = #ascend.flag_units<aiv -> aic>}
    ascend.return
  }
}
