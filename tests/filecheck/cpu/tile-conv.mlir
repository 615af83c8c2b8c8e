// RUN: aicc-opt %s -p 'tensor-to-linalg,choose-schedule{vector-bits=256 threads=1}' | filecheck %s --check-prefix=AVX2
// RUN: aicc-opt %s -p 'tensor-to-linalg,choose-schedule{vector-bits=512 threads=1}' | filecheck %s --check-prefix=AVX512
// RUN: aicc-opt %s -p 'tensor-to-linalg,choose-schedule{vector-bits=256 threads=1},bufferize,tile-conv,canonicalize,cse' | filecheck %s --check-prefix=TILED
// RUN: aicc-opt %s -p 'tensor-to-linalg{conv-packed=true}' | filecheck %s --check-prefix=AUTO
// RUN: aicc-opt %s -p 'tensor-to-linalg,fuse-elementwise,choose-schedule{vector-bits=256 threads=1},bufferize,tile-conv,canonicalize,cse' | filecheck %s --check-prefix=EPI
// RUN: aicc-opt %s -p 'tensor-to-linalg,choose-schedule{vector-bits=512 threads=1 conv-pf=16},bufferize,tile-conv' | filecheck %s --check-prefix=PF
// The packed conv (compiler/targets/cpu/tile_conv.py). tensor-to-linalg lowers it to the direct
// generic (loops n, g, oc, oh, ow | ic, kh, kw over the padded input), marked
// aicc.conv_lowering = "packed"; choose-schedule records its register tile from the target's
// vector width (vw = 8 floats with AVX2, 16 with AVX-512); tile-conv packs the constant weight
// now into [OC/vw][KH][KW][IC][vw] (10 channels: 2 blocks of 8, zero past 10: 2*3*3*2*8 = 288
// floats) and replaces the generic by a parallel loop over output rows (stride 2 in H: the
// input offset steps 2 rows of 11 = 22 per output row), each calling the register-tile kernel
// on 6 columns, then on the last 3 of the 9. The kernel writes the NCHW output, the function's
// result: bufferize gives the generic's (1, 1, 10, 4, 9) output as that view of the caller's
// buffer, so nothing is copied after it. Its zero fill
// is folded in (start = 1: the kernel starts from zero and never reads the output), and a
// per-channel bias broadcast into it likewise (@conv_bias: start = 2, the bias an operand).
// The padded input is read in place (no im2col copy).

// AVX2-LABEL:  func.func @conv
// AVX2:          linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d5, ((d3 * 2) + d6), (d4 + d7))>, affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d1, d2, d5, d6, d7)>, affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
// AVX2-SAME:       attrs = {aicc.conv_lowering = "packed", aicc.conv_schedule = {vw = 8 : i64, owb = 6 : i64, ocv = 2 : i64}}
// AVX512-LABEL: func.func @conv
// With 2 x 3 x 3 = 18 products per output (a short reduction, under SHORT_K), AVX-512's tile
// takes at most 8 columns, not the 9 of the row.
// AVX512:         attrs = {aicc.conv_lowering = "packed", aicc.conv_schedule = {vw = 16 : i64, owb = 8 : i64, ocv = 1 : i64}}
// With conv-pf (the cpu target's conv_prefetch_rule: 16 on Intel cores with AVX-512) the
// schedule records the weight prefetch distance, and tile-conv gives it to the kernels.
// PF-LABEL:     func.func @conv
// PF:             aicc_cpu.conv_kernel {{.*}}pf = 16 : i64

// TILED-LABEL:  func.func @conv
// TILED-SAME:     (%[[X:.*]]: memref<1x2x7x9xf32>, %[[RES:.*]]: memref<1x10x4x9xf32>)
// TILED-NOT:      memref.alloc() {{.*}} : memref<1x1x10x4x9xf32>
// TILED:          %[[RF:.*]] = memref.collapse_shape %[[RES]] {{.*}} into memref<360xf32>
// TILED-NEXT:     %[[OUT:.*]] = memref.expand_shape %[[RF]] {{.*}} into memref<1x1x10x4x9xf32>
// TILED-NOT:      linalg.fill {{.*}}memref<1x1x10x4x9xf32>
// TILED-DAG:      %[[C4:.*]] = arith.constant 4 : index
// TILED-DAG:      %[[C22:.*]] = arith.constant 22 : index
// TILED-DAG:      %[[C9:.*]] = arith.constant 9 : index
// TILED-DAG:      %[[C6:.*]] = arith.constant 6 : index
// TILED-DAG:      %[[C0:.*]] = arith.constant 0 : index
// TILED-DAG:      %[[WP:.*]] = memref.get_global @__constant_0_packed8 : memref<288xf32>
// TILED-DAG:      %[[XF:.*]] = memref.collapse_shape {{.*}} : memref<1x1x2x9x11xf32> into memref<198xf32>
// TILED-DAG:      %[[OF:.*]] = memref.collapse_shape %[[OUT]] {{.*}} into memref<360xf32>
// TILED:          "scf.parallel"(%[[C0]], %[[C4]], %{{.*}})
// TILED-NEXT:     ^{{.*}}(%[[Y:.*]]: index):
// TILED-NEXT:       %[[XO:.*]] = arith.muli %[[Y]], %[[C22]] : index
// TILED-NEXT:       %[[OO:.*]] = arith.muli %[[Y]], %[[C9]] : index
// TILED-NEXT:       aicc_cpu.conv_kernel %[[XF]][%[[XO]]], %[[WP]][%[[C0]]], %[[OF]][%[[OO]]] {owb = 6 : i64, ocv = 2 : i64, ocn = 10 : i64, vw = 8 : i64, ic = 2 : i64, kh = 3 : i64, kw = 3 : i64, sw = 1 : i64, dh = 1 : i64, dw = 1 : i64, x_cs = 99 : i64, x_rs = 11 : i64, w_ocs = 144 : i64, o_cs = 36 : i64, start = 1 : i64}
// TILED-NEXT:       %[[XO2:.*]] = arith.addi %[[XO]], %[[C6]] : index
// TILED-NEXT:       %[[OO2:.*]] = arith.addi %[[OO]], %[[C6]] : index
// TILED-NEXT:       aicc_cpu.conv_kernel %[[XF]][%[[XO2]]], %[[WP]][%[[C0]]], %[[OF]][%[[OO2]]] {owb = 3 : i64, ocv = 2 : i64, ocn = 10 : i64,
// TILED-NEXT:       scf.reduce
// TILED-NOT:      linalg.generic {{.*}}reduction
// TILED-NOT:      @__constant_0 :
// TILED-NOT:      memref.copy
// TILED-LABEL:  func.func @conv_bias
// TILED-NOT:      linalg.generic
// TILED:          %[[BIAS:.*]] = memref.collapse_shape {{.*}} into memref<10xf32>
// TILED:          aicc_cpu.conv_kernel {{.*}} bias %[[BIAS]][%{{.*}}] : memref<10xf32> {owb = 6 : i64, ocv = 2 : i64, ocn = 10 : i64, {{.*}}, start = 2 : i64}
// TILED:          aicc_cpu.conv_kernel {{.*}} bias %[[BIAS]][%{{.*}}] : memref<10xf32> {owb = 3 : i64, {{.*}}, start = 2 : i64}
// TILED-LABEL:  func.func @conv_auto

// The elementwise op after a conv, the only reader of its output (a ResNet block's
// relu(conv + b + residual), fused into one generic by fuse-elementwise), runs in the kernels:
// they read the residual like the output (`res`, the same offsets), take max(., 0) (`relu`)
// and store into the op's result; the conv's temporary output and the op's pass are gone.
// EPI-LABEL:    func.func @conv_res_relu
// EPI-SAME:       (%{{.*}}: memref<1x2x9x11xf32>, %{{.*}}: memref<1x10x1x1xf32>, %[[R:.*]]: memref<1x10x7x9xf32>, %[[D:.*]]: memref<1x10x7x9xf32>)
// EPI-NOT:        memref.alloc
// EPI-DAG:        %[[RF:.*]] = memref.collapse_shape %[[R]] {{.*}} into memref<630xf32>
// EPI-DAG:        %[[DF:.*]] = memref.collapse_shape %[[D]] {{.*}} into memref<630xf32>
// EPI:            aicc_cpu.conv_kernel {{.*}}, %[[DF]][%[[OFF:.*]]] bias %{{.*}}[%{{.*}}] : memref<10xf32> res %[[RF]][%[[OFF]]] : memref<630xf32> {{{.*}}, start = 2 : i64, relu}
// EPI:            aicc.tiled = {op = "generic", flops = {{.*}}, epilogue = "arith.addf,arith.maximumf"}
// EPI-NOT:        linalg.generic
// EPI:            func.return

// Without the attribute, the heuristic of a target with the kernel (conv-packed) picks packed
// only from 16 output channels: these 10 go through im2col.
// AUTO-LABEL:   func.func @conv_auto
// AUTO:           aicc.conv_lowering = "im2col"
// AUTO-LABEL:   func.func @conv_auto16
// AUTO:           aicc.conv_lowering = "packed"
// A 1x1 conv stays a matmul on the input.
// AUTO-LABEL:   func.func @conv_auto1x1
// AUTO:           aicc.conv_lowering = "matmul"
// A depthwise conv (one input and one output channel per group) goes to aicc_cpu.dw_kernel,
// its output columns in vectors: choose-schedule gives owb = 2 vectors of vw = 8 columns (the
// 10 columns of a row in one call, its second vector masked to 2 lanes), and tile-conv a
// parallel loop over (channel, output row): the input offset steps a plane (9 x 22 = 198) per
// channel and sw = 2 rows (44) per output row, the weight 9 floats per channel, read in place.
// The bias is the kernel's start (start = 2, one value per channel) and the relu after it its
// epilogue, storing straight into the function's result.
// AVX2-LABEL:  func.func @dw
// AVX2:          attrs = {aicc.conv_lowering = "packed", aicc.conv_schedule = {vw = 8 : i64, owb = 2 : i64, plane = 0 : i64}}
// AVX512-LABEL: func.func @dw
// AVX512:         attrs = {aicc.conv_lowering = "packed", aicc.conv_schedule = {vw = 16 : i64, owb = 1 : i64, plane = 0 : i64}}
// EPI-LABEL:    func.func @dw
// EPI-SAME:       (%{{.*}}: memref<1x3x9x22xf32>, %{{.*}}: memref<1x3x1x1xf32>, %[[D:.*]]: memref<1x3x4x10xf32>)
// EPI-NOT:        memref.alloc
// EPI-DAG:        %[[C198:.*]] = arith.constant 198 : index
// EPI-DAG:        %[[C44:.*]] = arith.constant 44 : index
// EPI-DAG:        %[[C9:.*]] = arith.constant 9 : index
// EPI-DAG:        %[[DF:.*]] = memref.collapse_shape %[[D]] {{.*}} into memref<120xf32>
// EPI:            "scf.parallel"
// EPI-NEXT:       ^{{.*}}(%[[C:.*]]: index, %[[Y:.*]]: index):
// EPI-NEXT:         %[[XC:.*]] = arith.muli %[[C]], %[[C198]] : index
// EPI-NEXT:         %[[XY:.*]] = arith.muli %[[Y]], %[[C44]] : index
// EPI:              %[[WO:.*]] = arith.muli %[[C]], %[[C9]] : index
// EPI-NEXT:         aicc_cpu.dw_kernel %{{.*}}[%{{.*}}], %{{.*}}[%[[WO]]], %[[DF]][%{{.*}}] bias %{{.*}}[%[[C]]] : memref<3xf32> {cols = 10 : i64, owb = 2 : i64, vw = 8 : i64, kh = 3 : i64, kw = 3 : i64, sw = 2 : i64, dh = 1 : i64, dw = 1 : i64, x_rs = 22 : i64, start = 2 : i64, relu}
// EPI-NEXT:         scf.reduce
// EPI:            epilogue = "arith.maximumf"
// EPI-NOT:        linalg.generic
// EPI:            func.return
// Any other elementwise function of the conv's output alone (here SiLU, y * sigmoid(y), after
// the bias; fuse-elementwise writes it y / (1 + exp(-y))) becomes the kernels' `epilogue` region: its scalar body, cloned, from the output
// value to aicc_cpu.yield, which the kernels apply to each vector of outputs in registers
// before the store. The op's pass over the conv's output is gone, as with relu.
// EPI-LABEL:    func.func @dw_silu
// EPI-SAME:       (%{{.*}}: memref<1x3x9x22xf32>, %{{.*}}: memref<1x3x1x1xf32>, %[[D:.*]]: memref<1x3x4x10xf32>)
// EPI-NOT:        memref.alloc
// EPI:            %[[DF:.*]] = memref.collapse_shape %[[D]] {{.*}} into memref<120xf32>
// EPI:            aicc_cpu.dw_kernel %{{.*}}[%{{.*}}], %{{.*}}[%{{.*}}], %[[DF]][%{{.*}}] bias %{{.*}}[%{{.*}}] : memref<3xf32> epilogue {
// EPI-NEXT:       ^{{.*}}(%[[V:.*]]: f32):
// EPI:              math.exp
// EPI:              %[[D1:.*]] = arith.addf
// EPI-NEXT:         %[[R:.*]] = arith.divf %[[V]], %[[D1]] : f32
// EPI-NEXT:         aicc_cpu.yield %[[R]] : f32
// EPI-NEXT:       } {cols = 10 : i64, {{.*}}, start = 2 : i64}
// EPI:            epilogue = "arith.negf,math.exp,arith.addf,arith.divf"
// EPI-NOT:        linalg.generic
// EPI:            func.return

// Zero padding in front of a depthwise conv is read through: the kernels read the unpadded
// input (x_rs = 9), the padded copy and its fill are gone. With stride 1 and an output as wide
// as the input, the default schedule (plane = 1) spans each channel's whole 6 x 9 plane,
// flattened, in one call: 54 pixels in owb = 7 vectors, each lane masked by its own row and
// column (x_h = 6 rows, x_r0 = -1 and x_c0 = -1: the top and left padding), one parallel loop
// over the channels; the input offset starts a row and a column before the plane (-10).
// TILED-LABEL:  func.func @dw_pad
// TILED-NOT:      linalg.fill
// TILED-DAG:      %[[C54:.*]] = arith.constant 54 : index
// TILED-DAG:      %[[CM10:.*]] = arith.constant -10 : index
// TILED:          "scf.parallel"
// TILED-NEXT:     ^{{.*}}(%[[CH:.*]]: index):
// TILED-NEXT:       %[[OO:.*]] = arith.muli %[[CH]], %[[C54]] : index
// TILED-NEXT:       %[[XO:.*]] = arith.addi %[[OO]], %[[CM10]] : index
// TILED:            aicc_cpu.dw_kernel %{{.*}}[%[[XO]]], %{{.*}}, %{{.*}}[%[[OO]]] {cols = 54 : i64, owb = 7 : i64, vw = 8 : i64, kh = 3 : i64, kw = 3 : i64, sw = 1 : i64, dh = 1 : i64, dw = 1 : i64, x_rs = 9 : i64, x_w = 9 : i64, x_c0 = -1 : i64, x_h = 6 : i64, x_r0 = -1 : i64, p0 = 0 : i64, start = 1 : i64}
// TILED-NEXT:       scf.reduce
// TILED-NOT:      linalg.generic
// TILED:          func.return
// The same conv by rows (`aicc.conv_schedule = {plane = 0}`): the middle rows (1..4, all three
// tap rows inside the input) are one parallel loop; the first row skips tap row 0 (r_lo = 1)
// and the last tap row 2 (r_hi = 2), each a loop of its own. Every call's columns reach the
// padding on the left (x_c0 = -1: lane 0's first tap) or the right, so its loads are masked
// to the input's x_w = 9 columns.
// TILED-LABEL:  func.func @dw_pad_rows
// TILED-NOT:      linalg.fill
// TILED:          aicc_cpu.dw_kernel {{.*}} {cols = 9 : i64, owb = 2 : i64, vw = 8 : i64, kh = 3 : i64, kw = 3 : i64, sw = 1 : i64, dh = 1 : i64, dw = 1 : i64, x_rs = 9 : i64, x_w = 9 : i64, x_c0 = -1 : i64, start = 1 : i64}
// TILED:          aicc_cpu.dw_kernel {{.*}} x_w = 9 : i64, x_c0 = -1 : i64, r_lo = 1 : i64, r_hi = 3 : i64, start = 1 : i64}
// TILED:          aicc_cpu.dw_kernel {{.*}} x_w = 9 : i64, x_c0 = -1 : i64, r_lo = 0 : i64, r_hi = 2 : i64, start = 1 : i64}
// TILED-NOT:      linalg.generic
// TILED:          func.return
// A grouped conv with 8 or more output channels per group runs the packed kernel a group at
// a time: the weight packed per group ([G][OC/G/vw][KH][KW][IC/G][vw]), the groups a dim of
// the parallel loop.
// TILED-LABEL:  func.func @grouped
// TILED:          memref.get_global @{{.*}}_packed8g2 : memref<1152xf32>
// TILED:          "scf.parallel"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}})
// TILED:            aicc_cpu.conv_kernel {{.*}} {owb = {{[0-9]+}} : i64, ocv = 1 : i64, ocn = 8 : i64, vw = 8 : i64, ic = 8 : i64, kh = 3 : i64, kw = 3 : i64
// The heuristic of a target with the kernels takes it for a depthwise conv too.
// AUTO-LABEL:   func.func @dw_auto
// AUTO:           aicc.conv_lowering = "packed"
// AUTO-LABEL:   func.func @grouped_auto
// AUTO:           aicc.conv_lowering = "packed"
func.func @conv(%x: tensor<1x2x7x9xf32>) -> tensor<1x10x4x9xf32> {
  %w = aicc.constant dense<[[[[0.13, -0.13, 0.64], [0.10, -0.54, 0.36], [1.30, 0.95, -0.70]], [[-1.27, -0.62, 0.04], [-2.33, -0.22, -1.25], [-0.73, -0.54, -0.32]]], [[[0.41, 1.04, -0.13], [1.37, -0.67, 0.35], [0.90, 0.09, -0.74]], [[-0.92, -0.46, 0.22], [-1.01, -0.21, -0.16], [0.54, 0.21, 0.36]]], [[[-0.65, -0.13, 0.78], [1.49, -1.26, 1.51], [1.35, 0.78, 0.26]], [[-0.31, 1.46, 1.96], [1.80, 1.32, 0.36], [-1.21, -0.00, 0.66]]], [[[-1.29, 0.40, 0.43], [0.70, -1.18, -0.66], [-0.44, -1.17, 1.74]], [[-0.50, 0.33, -0.26], [1.58, 1.32, 0.63], [-2.20, 0.05, 0.68]]], [[[1.00, -0.62, 1.82], [-1.32, -0.66, 0.94], [0.05, 2.00, 0.19]], [[-0.63, -0.38, -1.09], [-1.28, 0.63, 0.58], [1.29, -0.75, 1.69]]], [[[-0.29, 1.57, -0.43], [-0.74, 0.25, 1.03], [0.16, -0.59, -1.34]], [[-1.40, 0.50, 0.99], [-0.16, -1.07, 0.87], [-1.28, -0.71, 0.62]]], [[[-2.25, 0.39, -0.58], [0.11, -0.08, 0.20], [0.69, -0.76, 1.42]], [[0.73, 0.84, 1.16], [0.79, 0.84, 0.08], [-1.43, -0.14, -0.77]]], [[[-1.42, 0.26, -0.57], [-1.03, -1.04, 0.27], [0.36, 1.32, -0.01]], [[1.04, 1.40, 1.15], [-2.37, 1.23, 0.34], [0.42, 0.37, 0.38]]], [[[0.32, -0.36, -1.90], [-0.11, -0.80, 1.08], [-0.29, 0.08, -0.85]], [[-0.51, -0.01, -1.49], [0.30, -0.11, -1.19], [-2.40, 0.51, -0.30]]], [[[-0.53, -0.24, 1.82], [-0.05, 0.09, -1.49], [1.65, 0.92, 1.07]], [[0.05, 0.92, 0.37], [0.61, -0.15, -1.47], [1.03, -1.93, -0.24]]]]> : tensor<10x2x3x3xf32>
  %p = aicc.pad %x {low = array<i64: 0, 0, 1, 1>, high = array<i64: 0, 0, 1, 1>, value = 0.0 : f32} : tensor<1x2x7x9xf32> -> tensor<1x2x9x11xf32>
  %c = aicc.conv2d %p, %w {strides = array<i64: 2, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64, aicc.conv_lowering = "packed"} : tensor<1x2x9x11xf32>, tensor<10x2x3x3xf32> -> tensor<1x10x4x9xf32>
  func.return %c : tensor<1x10x4x9xf32>
}

func.func @conv_bias(%x: tensor<1x2x9x11xf32>, %b: tensor<1x10x1x1xf32>) -> tensor<1x10x7x9xf32> {
  %w = aicc.constant dense<0.5> : tensor<10x2x3x3xf32>
  %c = aicc.conv2d %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64, aicc.conv_lowering = "packed"} : tensor<1x2x9x11xf32>, tensor<10x2x3x3xf32> -> tensor<1x10x7x9xf32>
  %y = aicc.add %c, %b : tensor<1x10x7x9xf32>, tensor<1x10x1x1xf32> -> tensor<1x10x7x9xf32>
  func.return %y : tensor<1x10x7x9xf32>
}

func.func @conv_res_relu(%x: tensor<1x2x9x11xf32>, %b: tensor<1x10x1x1xf32>, %r: tensor<1x10x7x9xf32>) -> tensor<1x10x7x9xf32> {
  %w = aicc.constant dense<0.5> : tensor<10x2x3x3xf32>
  %c = aicc.conv2d %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64, aicc.conv_lowering = "packed"} : tensor<1x2x9x11xf32>, tensor<10x2x3x3xf32> -> tensor<1x10x7x9xf32>
  %y = aicc.add %c, %b : tensor<1x10x7x9xf32>, tensor<1x10x1x1xf32> -> tensor<1x10x7x9xf32>
  %s = aicc.add %y, %r : tensor<1x10x7x9xf32>, tensor<1x10x7x9xf32> -> tensor<1x10x7x9xf32>
  %z = aicc.relu %s : tensor<1x10x7x9xf32>
  func.return %z : tensor<1x10x7x9xf32>
}

func.func @conv_auto(%x: tensor<1x2x9x11xf32>) -> tensor<1x10x7x9xf32> {
  %w = aicc.constant dense<0.5> : tensor<10x2x3x3xf32>
  %c = aicc.conv2d %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x2x9x11xf32>, tensor<10x2x3x3xf32> -> tensor<1x10x7x9xf32>
  func.return %c : tensor<1x10x7x9xf32>
}

func.func @conv_auto16(%x: tensor<1x2x9x11xf32>) -> tensor<1x16x7x9xf32> {
  %w = aicc.constant dense<0.5> : tensor<16x2x3x3xf32>
  %c = aicc.conv2d %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x2x9x11xf32>, tensor<16x2x3x3xf32> -> tensor<1x16x7x9xf32>
  func.return %c : tensor<1x16x7x9xf32>
}

func.func @conv_auto1x1(%x: tensor<1x2x13x15xf32>) -> tensor<1x16x13x15xf32> {
  %w = aicc.constant dense<0.5> : tensor<16x2x1x1xf32>
  %c = aicc.conv2d %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x2x13x15xf32>, tensor<16x2x1x1xf32> -> tensor<1x16x13x15xf32>
  func.return %c : tensor<1x16x13x15xf32>
}

func.func @dw(%x: tensor<1x3x9x22xf32>, %b: tensor<1x3x1x1xf32>) -> tensor<1x3x4x10xf32> {
  %w = aicc.constant dense<[[[[0.13, -0.13, 0.64], [0.10, -0.54, 0.36], [1.30, 0.95, -0.70]]], [[[-1.27, -0.62, 0.04], [-2.33, -0.22, -1.25], [-0.73, -0.54, -0.32]]], [[[0.41, 1.04, -0.13], [1.37, -0.67, 0.35], [0.90, 0.09, -0.74]]]]> : tensor<3x1x3x3xf32>
  %c = aicc.conv2d %x, %w {strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>, groups = 3 : i64, aicc.conv_lowering = "packed"} : tensor<1x3x9x22xf32>, tensor<3x1x3x3xf32> -> tensor<1x3x4x10xf32>
  %y = aicc.add %c, %b : tensor<1x3x4x10xf32>, tensor<1x3x1x1xf32> -> tensor<1x3x4x10xf32>
  %z = aicc.relu %y : tensor<1x3x4x10xf32>
  func.return %z : tensor<1x3x4x10xf32>
}

func.func @dw_silu(%x: tensor<1x3x9x22xf32>, %b: tensor<1x3x1x1xf32>) -> tensor<1x3x4x10xf32> {
  %w = aicc.constant dense<0.5> : tensor<3x1x3x3xf32>
  %c = aicc.conv2d %x, %w {strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>, groups = 3 : i64, aicc.conv_lowering = "packed"} : tensor<1x3x9x22xf32>, tensor<3x1x3x3xf32> -> tensor<1x3x4x10xf32>
  %y = aicc.add %c, %b : tensor<1x3x4x10xf32>, tensor<1x3x1x1xf32> -> tensor<1x3x4x10xf32>
  %s = aicc.sigmoid %y : tensor<1x3x4x10xf32>
  %z = aicc.mul %y, %s : tensor<1x3x4x10xf32>, tensor<1x3x4x10xf32> -> tensor<1x3x4x10xf32>
  func.return %z : tensor<1x3x4x10xf32>
}

func.func @dw_auto(%x: tensor<1x3x9x22xf32>) -> tensor<1x3x7x20xf32> {
  %w = aicc.constant dense<0.5> : tensor<3x1x3x3xf32>
  %c = aicc.conv2d %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 3 : i64} : tensor<1x3x9x22xf32>, tensor<3x1x3x3xf32> -> tensor<1x3x7x20xf32>
  func.return %c : tensor<1x3x7x20xf32>
}

func.func @dw_pad(%x: tensor<1x2x6x9xf32>) -> tensor<1x2x6x9xf32> {
  %w = aicc.constant dense<0.5> : tensor<2x1x3x3xf32>
  %p = aicc.pad %x {low = array<i64: 0, 0, 1, 1>, high = array<i64: 0, 0, 1, 1>, value = 0.0 : f32} : tensor<1x2x6x9xf32> -> tensor<1x2x8x11xf32>
  %c = aicc.conv2d %p, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 2 : i64, aicc.conv_lowering = "packed"} : tensor<1x2x8x11xf32>, tensor<2x1x3x3xf32> -> tensor<1x2x6x9xf32>
  func.return %c : tensor<1x2x6x9xf32>
}

func.func @dw_pad_rows(%x: tensor<1x2x6x9xf32>) -> tensor<1x2x6x9xf32> {
  %w = aicc.constant dense<0.5> : tensor<2x1x3x3xf32>
  %p = aicc.pad %x {low = array<i64: 0, 0, 1, 1>, high = array<i64: 0, 0, 1, 1>, value = 0.0 : f32} : tensor<1x2x6x9xf32> -> tensor<1x2x8x11xf32>
  %c = aicc.conv2d %p, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 2 : i64, aicc.conv_lowering = "packed", aicc.conv_schedule = {plane = 0 : i64}} : tensor<1x2x8x11xf32>, tensor<2x1x3x3xf32> -> tensor<1x2x6x9xf32>
  func.return %c : tensor<1x2x6x9xf32>
}

func.func @grouped(%x: tensor<1x16x9x11xf32>) -> tensor<1x16x7x9xf32> {
  %w = aicc.constant dense<0.5> : tensor<16x8x3x3xf32>
  %c = aicc.conv2d %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 2 : i64, aicc.conv_lowering = "packed"} : tensor<1x16x9x11xf32>, tensor<16x8x3x3xf32> -> tensor<1x16x7x9xf32>
  func.return %c : tensor<1x16x7x9xf32>
}

func.func @grouped_auto(%x: tensor<1x16x9x11xf32>) -> tensor<1x16x7x9xf32> {
  %w = aicc.constant dense<0.5> : tensor<16x8x3x3xf32>
  %c = aicc.conv2d %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 2 : i64} : tensor<1x16x9x11xf32>, tensor<16x8x3x3xf32> -> tensor<1x16x7x9xf32>
  func.return %c : tensor<1x16x7x9xf32>
}

// On a small image (at most 64 pixels, or 256 with more input than output channels) a 1x1
// conv of one group is packed too, its image viewed as one row of H*W columns (3x5: 1 x 15),
// so that the kernel's register tile spans the rows.
// AUTO-LABEL:   func.func @conv_auto1x1_small
// AUTO:           tensor.expand_shape {{.*}} output_shape [1, 1, 4, 1, 15]
// AUTO:           linalg.generic {{.*}} outs(%{{.*}} : tensor<1x1x16x1x15xf32>) attrs = {aicc.conv_lowering = "packed"}
// tile-conv then runs it as one row of 15 columns: a call of owb = 5 columns (x_rs = 15,
// the whole image) per step of 5, over 24 input channels (x_cs = 15).
// TILED-LABEL:  func.func @pointwise
// TILED:          %[[W:.*]] = memref.get_global @{{.*}}_packed8 : memref<384xf32>
// TILED:          scf.for %{{.*}} = %{{.*}} to %[[C15:.*]] step %[[C5:.*]] {
// TILED:            aicc_cpu.conv_kernel %{{.*}}, %[[W]][%{{.*}}], %{{.*}} {owb = 5 : i64, ocv = 2 : i64, ocn = 16 : i64, vw = 8 : i64, ic = 24 : i64, kh = 1 : i64, kw = 1 : i64, sw = 1 : i64, dh = 1 : i64, dw = 1 : i64, x_cs = 15 : i64, x_rs = 15 : i64, w_ocs = 192 : i64, o_cs = 15 : i64, start = 1 : i64}
// TILED-NOT:      linalg.generic
// TILED:          func.return

func.func @conv_auto1x1_small(%x: tensor<1x4x3x5xf32>) -> tensor<1x16x3x5xf32> {
  %w = aicc.constant dense<0.5> : tensor<16x4x1x1xf32>
  %c = aicc.conv2d %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x4x3x5xf32>, tensor<16x4x1x1xf32> -> tensor<1x16x3x5xf32>
  func.return %c : tensor<1x16x3x5xf32>
}

func.func @pointwise(%x: tensor<1x24x3x5xf32>) -> tensor<1x16x3x5xf32> {
  %w = aicc.constant dense<0.25> : tensor<16x24x1x1xf32>
  %c = aicc.conv2d %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64, aicc.conv_lowering = "packed"} : tensor<1x24x3x5xf32>, tensor<16x24x1x1xf32> -> tensor<1x16x3x5xf32>
  func.return %c : tensor<1x16x3x5xf32>
}
