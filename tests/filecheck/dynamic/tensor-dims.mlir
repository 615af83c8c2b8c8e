// RUN: aicc-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Dynamic dims are `?` with their symbolic expressions in the type's encoding, one per `?`;
// the ops infer and check them like static dims: a matmul's result keeps the lhs's "batch",
// a reduction keeps the rows' symbol.
// CHECK-LABEL: func.func @mlp
// CHECK:         aicc.matmul %{{.*}}, %{{.*}} : tensor<?x64xf32, "batch">, tensor<64x48xf32> -> tensor<?x48xf32, "batch">
// CHECK:         aicc.reduce_sum %{{.*}} {axes = array<i64: 1>, keepdims = false} : tensor<?x48xf32, "batch"> -> tensor<?xf32, "batch">
func.func @mlp(%x: tensor<?x64xf32, "batch">, %w: tensor<64x48xf32>) -> tensor<?xf32, "batch"> {
  %0 = aicc.matmul %x, %w : tensor<?x64xf32, "batch">, tensor<64x48xf32> -> tensor<?x48xf32, "batch">
  %1 = aicc.reduce_sum %0 {axes = array<i64: 1>, keepdims = false} : tensor<?x48xf32, "batch"> -> tensor<?xf32, "batch">
  func.return %1 : tensor<?xf32, "batch">
}

// -----
// Two symbols are two dims: a result typed with another symbol than the one inferred is
// caught at compile time.
func.func @wrong_symbol(%x: tensor<?x64xf32, "batch">, %w: tensor<64x48xf32>) -> tensor<?x48xf32, "seq"> {
  // expected-error @+1 {{aicc.matmul: result type tensor<?x48xf32, "seq"> does not match the inferred tensor<?x48xf32, "batch">}}
  %0 = aicc.matmul %x, %w : tensor<?x64xf32, "batch">, tensor<64x48xf32> -> tensor<?x48xf32, "seq">
  func.return %0 : tensor<?x48xf32, "seq">
}

// -----
// Products survive: a reshape of (batch, seq, 8) into (batch*seq, 8) keeps the element count.
// CHECK-LABEL: func.func @flatten
// CHECK:         aicc.reshape %{{.*}} : tensor<?x?x8xf32, "batch,seq"> -> tensor<?x8xf32, "batch*seq">
func.func @flatten(%x: tensor<?x?x8xf32, "batch,seq">) -> tensor<?x8xf32, "batch*seq"> {
  %0 = aicc.reshape %x : tensor<?x?x8xf32, "batch,seq"> -> tensor<?x8xf32, "batch*seq">
  func.return %0 : tensor<?x8xf32, "batch*seq">
}

// -----
func.func @bad_reshape(%x: tensor<?x?x8xf32, "batch,seq">) -> tensor<?x8xf32, "batch"> {
  // expected-error @+1 {{aicc.reshape: cannot reshape (batch, seq, 8) (batch*seq*8 elements) into (batch, 8)}}
  %0 = aicc.reshape %x : tensor<?x?x8xf32, "batch,seq"> -> tensor<?x8xf32, "batch">
  func.return %0 : tensor<?x8xf32, "batch">
}
