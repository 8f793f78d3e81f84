// RUN: ascendir-opt %s -p convert-nn-to-ascend | ascendir-opt | filecheck %s

// A row kernel whose cores run several tiles (300 rows of 4096 f16, one row per tile, 48 AIV)
// ping-pongs two UB slots of the loaded rows and the stored outputs: the slot of a core's k-th
// tile is k mod 2, each slot with its own MTE2 -> V / V -> MTE2 and V -> MTE3 / MTE3 -> V event
// pair, both WAR flags primed before the loop and drained after it. The f32 temporaries and the
// scale stay single (only V touches them).

// CHECK-LABEL: ascend.kernel @rms_norm_0
// CHECK:         ascend.set_flag V -> MTE2, 0
// CHECK-NEXT:    ascend.set_flag V -> MTE2, 1
// CHECK-NEXT:    ascend.set_flag MTE3 -> V, 0
// CHECK-NEXT:    ascend.set_flag MTE3 -> V, 1
// CHECK-NEXT:    scf.for %[[T:.*]] = %[[BID:.*]] to %{{.*}} step %[[STEP:.*]] {
// CHECK:           %[[K:.*]] = arith.divui %[[T]], %[[STEP]] : index
// CHECK-NEXT:      %[[P:.*]] = arith.remui %[[K]], %{{.*}} : index
// CHECK-NEXT:      %[[EVEN:.*]] = arith.cmpi eq, %[[P]], %{{.*}} : index
// CHECK-NEXT:      scf.if %[[EVEN]] {
// CHECK-NEXT:        ascend.wait_flag V -> MTE2, 0
// CHECK-NEXT:        ascend.copy %[[SRC:.*]], %[[X0:.*]] : memref<1x4096xf16, strided<[4096, 1], offset: ?>, #ascend<space gm>>, memref<1x4096xf16, #ascend<space ub>>
// CHECK:             ascend.wait_flag MTE3 -> V, 0
// CHECK-NEXT:        ascend.vcast %[[X0]], %[[W:.*]] :
// CHECK:             ascend.vcast %[[W]], %[[Y0:.*]] :
// CHECK-NEXT:        ascend.set_flag V -> MTE2, 0
// CHECK-NEXT:        ascend.set_flag V -> MTE3, 0
// CHECK-NEXT:        ascend.wait_flag V -> MTE3, 0
// CHECK-NEXT:        ascend.copy %[[Y0]], %[[DST:.*]] :
// CHECK-NEXT:        ascend.set_flag MTE3 -> V, 0
// CHECK-NEXT:      } else {
// CHECK-NEXT:        ascend.wait_flag V -> MTE2, 1
// CHECK-NEXT:        ascend.copy %[[SRC]], %[[X1:.*]] :
// CHECK-NOT:         %[[X0]]
// CHECK:             ascend.wait_flag MTE3 -> V, 1
// CHECK-NEXT:        ascend.vcast %[[X1]], %[[W]] :
// CHECK:             ascend.vcast %[[W]], %[[Y1:.*]] :
// CHECK-NEXT:        ascend.set_flag V -> MTE2, 1
// CHECK-NEXT:        ascend.set_flag V -> MTE3, 1
// CHECK-NEXT:        ascend.wait_flag V -> MTE3, 1
// CHECK-NEXT:        ascend.copy %[[Y1]], %[[DST]] :
// CHECK-NEXT:        ascend.set_flag MTE3 -> V, 1
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// CHECK-NEXT:    ascend.wait_flag MTE3 -> V, 1
// CHECK-NEXT:    ascend.wait_flag MTE3 -> V, 0
// CHECK-NEXT:    ascend.wait_flag V -> MTE2, 1
// CHECK-NEXT:    ascend.wait_flag V -> MTE2, 0
// CHECK-NEXT:    ascend.return
func.func @main(%x: tensor<300x4096xf16> {onnx.name = "x"}, %s: tensor<4096xf16> {onnx.name = "s"}) -> (tensor<300x4096xf16> {onnx.name = "y"}) {
  %y = nn.rms_norm %x, %s {axis = -1 : i64, epsilon = 1.0e-06 : f32} : (tensor<300x4096xf16>, tensor<4096xf16>) -> tensor<300x4096xf16>
  func.return %y : tensor<300x4096xf16>
}
