// RUN: not aicc-opt %s -p 'autodiff{wrt=0 func=no_rule}' 2>&1 | filecheck %s
// RUN: not aicc-opt %s -p 'autodiff{wrt=2 func=no_rule}' 2>&1 | filecheck %s --check-prefix=RANGE
// RUN: not aicc-opt %s -p 'autodiff' 2>&1 | filecheck %s --check-prefix=WHICH

// An op with no gradient rule on the path (here a call) is an error naming it, in one line.
// CHECK: aicc-opt: error: autodiff: no gradient rule for func.call
// RANGE: aicc-opt: error: autodiff: argument 2 out of range: the function has 2 arguments
// WHICH: aicc-opt: error: autodiff: the module has 2 functions: name one with func=
func.func @square(%x: tensor<3xf32>) -> tensor<3xf32> {
  %0 = aicc.mul %x, %x : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  func.return %0 : tensor<3xf32>
}

func.func @no_rule(%x: tensor<3xf32>, %y: tensor<3xf32>) -> tensor<f32> {
  %0 = func.call @square(%x) : (tensor<3xf32>) -> tensor<3xf32>
  %1 = aicc.reduce_sum %0 {axes = array<i64: 0>, keepdims = false} : tensor<3xf32> -> tensor<f32>
  func.return %1 : tensor<f32>
}
