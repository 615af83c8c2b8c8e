// RUN: echo '{"format": 1, "machine": "lit", "kernels": {"b1_m64_n48_k32_-_e4_t1": {"ms": 1.0, "default_ms": 2.0, "schedule": {"mr": 4, "nr": 16, "vw": 8, "kc": 32, "mc": 64, "nc": 48, "ku": 2, "pack_a": false, "pack_b": true, "parallel": "mn", "order": "nm", "pf": 0}}}}' > %t.json
// RUN: aicc-opt %s -p 'choose-schedule{vector-bits=256 threads=1 record="%t.json"}'  | filecheck %s
// RUN: aicc-opt %s -p 'choose-schedule{vector-bits=256 threads=1 record="%t.json" overrides="mr=6"}'  | filecheck %s --check-prefix=OVERRIDE

// A tuning record's schedule replaces the heuristic's for the matmul whose signature it
// holds (batch, M, N, K, transposes, constant B, conv, element size, threads), and marks it
// aicc.tuned; another shape keeps the heuristic's. An override wins over the record.
// CHECK-LABEL: func.func @tuned
// CHECK:         linalg.matmul {aicc.tuned, aicc.schedule = {mr = 4 : i64, nr = 16 : i64, vw = 8 : i64, kc = 32 : i64, mc = 64 : i64, nc = 48 : i64, ku = 2 : i64, pack_a = false, pack_b = true, parallel = "mn", order = "nm", pf = 0 : i64}}
// CHECK-LABEL: func.func @other_shape
// CHECK-NOT:     aicc.tuned
// CHECK:         linalg.matmul {aicc.schedule = {mr = 6 : i64
// OVERRIDE-LABEL: func.func @tuned
// OVERRIDE-NOT:   aicc.tuned
// OVERRIDE:       linalg.matmul {aicc.schedule = {mr = 6 : i64
func.func @tuned(%a: tensor<64x32xf32>, %b: tensor<32x48xf32>) -> tensor<64x48xf32> {
  %e = tensor.empty() : tensor<64x48xf32>
  %z = arith.constant 0.0 : f32
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<64x48xf32>) -> tensor<64x48xf32>
  %r = linalg.matmul ins(%a, %b : tensor<64x32xf32>, tensor<32x48xf32>) outs(%f : tensor<64x48xf32>) -> tensor<64x48xf32>
  func.return %r : tensor<64x48xf32>
}

func.func @other_shape(%a: tensor<64x32xf32>, %b: tensor<32x40xf32>) -> tensor<64x40xf32> {
  %e = tensor.empty() : tensor<64x40xf32>
  %z = arith.constant 0.0 : f32
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<64x40xf32>) -> tensor<64x40xf32>
  %r = linalg.matmul ins(%a, %b : tensor<64x32xf32>, tensor<32x40xf32>) outs(%f : tensor<64x40xf32>) -> tensor<64x40xf32>
  func.return %r : tensor<64x40xf32>
}
