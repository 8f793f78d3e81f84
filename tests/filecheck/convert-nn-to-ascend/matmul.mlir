// RUN: ascendir-opt %s -p convert-nn-to-ascend | ascendir-opt | filecheck %s
// RUN: ascendir-opt %s -p 'convert-nn-to-ascend{target=ascend910a}' | ascendir-opt | filecheck %s --check-prefix=C100
// RUN: ascendir-opt %s -p convert-nn-to-ascend --print-op-generic | ascendir-opt | filecheck %s

// An odd-shaped fp16 MatMul: 300 x 1100 x 1030 -> 3 x 9 output tiles of 128 x 128 on 24 AICs
// (baseN 256 is halved to spread 27 tiles over the AICs), K in L1 chunks of 256 and L0 blocks of 64,
// double buffered: two L1 slots and two L0A/L0B slots, each slot with its own event id, chosen by
// the parity of the loop index (scf.if); one L0C accumulator.

// CHECK:      builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">, ascend.target = #ascend.target<"ascend910b2">}
// CHECK:      ascend.kernel @matmul_0(%[[A:.*]]: memref<300x1100xf16, #ascend<space gm>>, %[[B:.*]]: memref<1100x1030xf16, #ascend<space gm>>, %[[C:.*]]: memref<300x1030xf16, #ascend<space gm>>) attributes {block_dim = 24 : i64, core_type = #ascend.core_type<aic>}
// CHECK:        %[[L1A0:.*]] = ascend.alloc : memref<128x256xf16, #ascend<space l1>>
// CHECK-NEXT:   %[[L1A1:.*]] = ascend.alloc : memref<128x256xf16, #ascend<space l1>>
// CHECK-NEXT:   %[[L1B0:.*]] = ascend.alloc : memref<256x128xf16, #ascend<space l1>>
// CHECK-NEXT:   %[[L1B1:.*]] = ascend.alloc : memref<256x128xf16, #ascend<space l1>>
// CHECK-NEXT:   %[[L0A0:.*]] = ascend.alloc : memref<128x64xf16, #ascend<space l0a>>
// CHECK-NEXT:   %[[L0A1:.*]] = ascend.alloc : memref<128x64xf16, #ascend<space l0a>>
// CHECK-NEXT:   %[[L0B0:.*]] = ascend.alloc : memref<64x128xf16, #ascend<space l0b>>
// CHECK-NEXT:   %[[L0B1:.*]] = ascend.alloc : memref<64x128xf16, #ascend<space l0b>>
// CHECK-NEXT:   %[[L0C:.*]] = ascend.alloc : memref<128x128xf32, #ascend<space l0c>>
// CHECK:        %[[BIDX:.*]] = ascend.block_idx : index
// Each queue slot's WAR flag is primed before the tile loop:
// CHECK-NEXT:   ascend.set_flag MTE1 -> MTE2, 0
// CHECK-NEXT:   ascend.set_flag MTE1 -> MTE2, 1
// CHECK-NEXT:   ascend.set_flag M -> MTE1, 0
// CHECK-NEXT:   ascend.set_flag M -> MTE1, 1
// CHECK-NEXT:   ascend.set_flag FIX -> M, 0
// CHECK-NEXT:   scf.for %[[T:.*]] = %[[BIDX]] to %{{.*}} step %{{.*}} {
// CHECK:          %[[MS:.*]] = arith.minsi
// CHECK:          %[[NS:.*]] = arith.minsi
// CHECK:          ascend.wait_flag FIX -> M, 0
// K = 1100 is 5 L1 chunks (odd): the slot parity continues over the core's tiles, from the
// tile's ordinal (t - block_idx) / block_dim, so the next tile's first load does not wait for
// the slot its last chunk still occupies.
// CHECK-NEXT:     %[[TI:.*]] = arith.subi %[[T]], %[[BIDX]]
// CHECK-NEXT:     %[[ORD:.*]] = arith.divui %[[TI]]
// CHECK-NEXT:     %[[BASE:.*]] = arith.muli %[[ORD]]
// CHECK-NEXT:     scf.for %[[K1:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:            arith.addi %[[BASE]]
// CHECK:            %[[P1:.*]] = arith.cmpi eq
// CHECK-NEXT:       scf.if %[[P1]] {
// CHECK:              %[[KS:.*]] = arith.minsi
// CHECK-NEXT:         ascend.wait_flag MTE1 -> MTE2, 0
// CHECK-NEXT:         %[[AS:.*]] = memref.subview %[[A]][%{{.*}}, %[[K1]]] [%[[MS]], %[[KS]]] [1, 1]
// CHECK-NEXT:         ascend.copy %[[AS]], %[[L1A0]] {layout = #ascend.layout<nd2nz>}
// CHECK-NEXT:         %[[BS:.*]] = memref.subview %[[B]][%[[K1]], %{{.*}}] [%[[KS]], %[[NS]]] [1, 1]
// CHECK-NEXT:         ascend.copy %[[BS]], %[[L1B0]] {layout = #ascend.layout<nd2nz>}
// CHECK-NEXT:         ascend.set_flag MTE2 -> MTE1, 0
// CHECK-NEXT:         ascend.wait_flag MTE2 -> MTE1, 0
// CHECK-NEXT:         scf.for %[[KK:.*]] = %{{.*}} to %[[KS]] step %{{.*}} {
// CHECK:                scf.if %{{.*}} {
// CHECK-NEXT:             ascend.wait_flag M -> MTE1, 0
// CHECK-NEXT:             memref.subview %[[L1A0]][0, %[[KK]]] [128, 64] [1, 1]
// CHECK-NEXT:             ascend.copy %{{.*}}, %[[L0A0]]
// CHECK-NEXT:             memref.subview %[[L1B0]][%[[KK]], 0] [64, 128] [1, 1]
// CHECK-NEXT:             ascend.copy %{{.*}}, %[[L0B0]]
// CHECK-NEXT:             ascend.set_flag MTE1 -> M, 0
// CHECK-NEXT:             ascend.wait_flag MTE1 -> M, 0
// CHECK-NEXT:             %[[KG:.*]] = arith.addi %[[K1]], %[[KK]]
// CHECK-NEXT:             %[[FIRST:.*]] = arith.cmpi eq, %[[KG]]
// CHECK-NEXT:             scf.if %[[FIRST]] {
// CHECK-NEXT:               ascend.mmad %[[L0A0]], %[[L0B0]], %[[L0C]] {init = true}
// CHECK-NEXT:             } else {
// CHECK-NEXT:               ascend.mmad %[[L0A0]], %[[L0B0]], %[[L0C]] {init = false}
// CHECK-NEXT:             }
// CHECK-NEXT:             ascend.set_flag M -> MTE1, 0
// CHECK-NEXT:           } else {
// CHECK-NEXT:             ascend.wait_flag M -> MTE1, 1
// CHECK:                  ascend.copy %{{.*}}, %[[L0A1]]
// CHECK:                  ascend.copy %{{.*}}, %[[L0B1]]
// CHECK-NEXT:             ascend.set_flag MTE1 -> M, 1
// CHECK-NEXT:             ascend.wait_flag MTE1 -> M, 1
// CHECK:                  ascend.mmad %[[L0A1]], %[[L0B1]], %[[L0C]] {init = true}
// CHECK:                  ascend.mmad %[[L0A1]], %[[L0B1]], %[[L0C]] {init = false}
// CHECK:                  ascend.set_flag M -> MTE1, 1
// CHECK-NEXT:           }
// CHECK-NEXT:         }
// CHECK-NEXT:         ascend.set_flag MTE1 -> MTE2, 0
// CHECK-NEXT:       } else {
// CHECK:              ascend.wait_flag MTE1 -> MTE2, 1
// CHECK:              ascend.copy %{{.*}}, %[[L1A1]] {layout = #ascend.layout<nd2nz>}
// CHECK:              ascend.copy %{{.*}}, %[[L1B1]] {layout = #ascend.layout<nd2nz>}
// CHECK-NEXT:         ascend.set_flag MTE2 -> MTE1, 1
// CHECK-NEXT:         ascend.wait_flag MTE2 -> MTE1, 1
// CHECK:              ascend.set_flag MTE1 -> MTE2, 1
// CHECK-NEXT:       }
// CHECK-NEXT:     }
// CHECK-NEXT:     ascend.set_flag M -> FIX, 0
// CHECK-NEXT:     ascend.wait_flag M -> FIX, 0
// CHECK-NEXT:     %[[CS:.*]] = memref.subview %[[C]][%{{.*}}, %{{.*}}] [%[[MS]], %[[NS]]] [1, 1]
// CHECK-NEXT:     ascend.copy %[[L0C]], %[[CS]] {layout = #ascend.layout<nz2nd>} : memref<128x128xf32, #ascend<space l0c>>, memref<?x?xf16,
// CHECK-NEXT:     ascend.set_flag FIX -> M, 0
// CHECK-NEXT:   }
// Draining waits after the loop, one per slot:
// CHECK-NEXT:   ascend.wait_flag FIX -> M, 0
// CHECK-NEXT:   ascend.wait_flag M -> MTE1, 1
// CHECK-NEXT:   ascend.wait_flag M -> MTE1, 0
// CHECK-NEXT:   ascend.wait_flag MTE1 -> MTE2, 1
// CHECK-NEXT:   ascend.wait_flag MTE1 -> MTE2, 0
// CHECK-NEXT:   ascend.return
// CHECK:      func.func @main(%[[HA:.*]]: memref<300x1100xf16, #ascend<space gm>> {onnx.name = "a"}, %[[HB:.*]]: memref<1100x1030xf16, #ascend<space gm>> {onnx.name = "b"}) -> (memref<300x1030xf16, #ascend<space gm>> {onnx.name = "y"})
// CHECK-NEXT:   %[[Y:.*]] = ascend.alloc : memref<300x1030xf16, #ascend<space gm>>
// CHECK-NEXT:   ascend.launch @matmul_0(%[[HA]], %[[HB]], %[[Y]])
// CHECK-NEXT:   func.return %[[Y]]

// 910A (dav-c100, no FixPipe): L0C -> UB on the vector pipe (narrowing to f16), UB -> GM on MTE3.
// C100:       builtin.module attributes {ascend.arch = #ascend.arch<"dav-c100">, ascend.target = #ascend.target<"ascend910a">}
// C100:         %[[UB:.*]] = ascend.alloc : memref<[[M:[0-9]+]]x[[N:[0-9]+]]xf16, #ascend<space ub>>
// C100:         ascend.set_flag V -> M, 0
// C100-NEXT:    ascend.set_flag MTE3 -> V, 0
// C100:         ascend.set_flag M -> V, 0
// C100-NEXT:    ascend.wait_flag M -> V, 0
// C100:         ascend.wait_flag MTE3 -> V, 0
// C100-NEXT:    ascend.copy %{{.*}}, %[[UB]] : memref<[[M]]x[[N]]xf32, #ascend<space l0c>>, memref<[[M]]x[[N]]xf16, #ascend<space ub>>
// C100-NEXT:    ascend.set_flag V -> M, 0
// C100-NEXT:    ascend.set_flag V -> MTE3, 0
// C100-NEXT:    ascend.wait_flag V -> MTE3, 0
// C100-NEXT:    ascend.copy %[[UB]], %{{.*}} : memref<[[M]]x[[N]]xf16, #ascend<space ub>>, memref<?x?xf16,
// C100-NEXT:    ascend.set_flag MTE3 -> V, 0
func.func @main(%a: tensor<300x1100xf16> {onnx.name = "a"}, %b: tensor<1100x1030xf16> {onnx.name = "b"}) -> (tensor<300x1030xf16> {onnx.name = "y"}) {
  %y = nn.matmul %a, %b : (tensor<300x1100xf16>, tensor<1100x1030xf16>) -> tensor<300x1030xf16>
  func.return %y : tensor<300x1030xf16>
}
