/* Runs a model that aicc compiled ahead of time, from C, without Python:
 *
 *   aicc examples/mlp.py --aot -o out
 *   cc examples/aot/main.c -Iout -Lout -lmodel -Wl,-rpath,"$PWD/out" -o out/main
 *   out/main                          # inputs filled with a fixed pattern
 *   out/main -t 1 x.bin               # inputs read from raw C-contiguous files, one thread
 *
 * It prints each output's shape and first values and writes output0.bin, output1.bin, ...
 * (raw, C-contiguous) into the current folder. Works for any model: shapes and dtypes are
 * read from the library (model.h). Compile with -DMODEL_HEADER='"other.h"' and
 * -DMODEL(f)=other_##f for a library written with --aot-name other.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef MODEL_HEADER
#define MODEL_HEADER "model.h"
#define MODEL(f) model_##f
#endif
#include MODEL_HEADER

static size_t dtype_size(int code) {
  switch (code) {
    case AICC_DTYPE_FLOAT64: case AICC_DTYPE_INT64: return 8;
    case AICC_DTYPE_FLOAT32: case AICC_DTYPE_INT32: return 4;
    case AICC_DTYPE_FLOAT16: case AICC_DTYPE_INT16: return 2;
    default: return 1; /* bool, int8, uint8 */
  }
}

static size_t num_elements(int ndim, const int64_t *shape) {
  size_t n = 1;
  for (int d = 0; d < ndim; d++) n *= (size_t)shape[d];
  return n;
}

/* element k of a buffer as a double, for printing and for the fixed input pattern */
static double get(const void *p, int code, size_t k) {
  switch (code) {
    case AICC_DTYPE_FLOAT32: return ((const float *)p)[k];
    case AICC_DTYPE_FLOAT64: return ((const double *)p)[k];
    case AICC_DTYPE_INT32: return ((const int32_t *)p)[k];
    case AICC_DTYPE_INT64: return (double)((const int64_t *)p)[k];
    case AICC_DTYPE_INT16: return ((const int16_t *)p)[k];
    case AICC_DTYPE_INT8: return ((const int8_t *)p)[k];
    default: return ((const uint8_t *)p)[k];
  }
}

static void fill(void *p, int code, size_t n) {
  for (size_t k = 0; k < n; k++) {
    double v = (double)(k % 17) / 17.0 - 0.5; /* small values: any model stays finite */
    switch (code) {
      case AICC_DTYPE_FLOAT32: ((float *)p)[k] = (float)v; break;
      case AICC_DTYPE_FLOAT64: ((double *)p)[k] = v; break;
      case AICC_DTYPE_INT32: ((int32_t *)p)[k] = (int32_t)(k % 3); break;
      case AICC_DTYPE_INT64: ((int64_t *)p)[k] = (int64_t)(k % 3); break;
      default: memset((char *)p + k * dtype_size(code), (int)(k % 2), dtype_size(code));
    }
  }
}

int main(int argc, char **argv) {
  int arg = 1;
  if (arg + 1 < argc && strcmp(argv[arg], "-t") == 0) {
    MODEL(set_num_threads)(atoi(argv[arg + 1]));
    arg += 2;
  }
  int n_in = MODEL(num_inputs)(), n_out = MODEL(num_outputs)();
  if (argc - arg != 0 && argc - arg != n_in) {
    fprintf(stderr, "usage: %s [-t THREADS] [%d raw input files]\n", argv[0], n_in);
    return 2;
  }
  void **in = calloc((size_t)n_in + 1, sizeof *in), **out = calloc((size_t)n_out + 1, sizeof *out);
  for (int i = 0; i < n_in; i++) {
    int code = MODEL(input_dtype)(i);
    size_t n = num_elements(MODEL(input_ndim)(i), MODEL(input_shape)(i)), bytes = n * dtype_size(code);
    in[i] = malloc(bytes ? bytes : 1);
    if (argc - arg == 0) {
      fill(in[i], code, n);
      continue;
    }
    FILE *f = fopen(argv[arg + i], "rb");
    if (f == NULL || fread(in[i], 1, bytes, f) != bytes) {
      fprintf(stderr, "%s: cannot read %zu bytes of input %d\n", argv[arg + i], bytes, i);
      return 1;
    }
    fclose(f);
  }
  for (int i = 0; i < n_out; i++) {
    size_t n = num_elements(MODEL(output_ndim)(i), MODEL(output_shape)(i));
    out[i] = malloc(n * dtype_size(MODEL(output_dtype)(i)) + 1);
  }
  if (MODEL(run)((const void *const *)in, out) != 0) {
    fprintf(stderr, "run failed: %s\n", MODEL(last_error)());
    return 1;
  }
  for (int i = 0; i < n_out; i++) {
    int code = MODEL(output_dtype)(i), nd = MODEL(output_ndim)(i);
    const int64_t *shape = MODEL(output_shape)(i);
    size_t n = num_elements(nd, shape);
    printf("output %d: shape (", i);
    for (int d = 0; d < nd; d++) printf(d ? ", %lld" : "%lld", (long long)shape[d]);
    printf(")  first values:");
    for (size_t k = 0; k < n && k < 4; k++) printf(" %g", get(out[i], code, k));
    printf("\n");
    char name[32];
    snprintf(name, sizeof name, "output%d.bin", i);
    FILE *f = fopen(name, "wb");
    if (f == NULL || fwrite(out[i], dtype_size(code), n, f) != n) {
      fprintf(stderr, "cannot write %s\n", name);
      return 1;
    }
    fclose(f);
  }
  return 0;
}
