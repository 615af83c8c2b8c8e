"""Ahead-of-time artifacts: a compiled model as a shared library with a C API, and back.

`write_library` turns a model's LLVM IR into ``DIR/lib<name>.so`` + ``DIR/<name>.h``:

    model.o    the model's LLVM IR, O3, position-independent, for the model's target CPU
    pool.o     the same thread pool the JIT uses (runtime.py's `_PoolIR`), as machine code
    weights.S  the weights the emitter kept out of the IR, `.incbin`'d from one file into
               .rodata under their symbols, 64-byte aligned
    api.c      the C API of <name>.h: shape/dtype tables, the workspace, worker threads
               started with pthreads on first use, a lock around each run

linked with the system C compiler (`$CC`, else `cc`) and a version script that exports the
API alone, so two aicc libraries in one process never see each other's pool or symbols. The
library needs libc, libm and libpthread, nothing else: no Python, no aicc, no LLVM.

`load_library` opens such a directory with ctypes: the model runs from Python as it would
from C (`compiler.load`).
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import llvmlite.binding as llvm
import numpy as np

from compiler.errors import CompileError
from compiler.targets.cpu.machine import CPUMachine, llvm_features
from compiler.targets.cpu.runtime import optimize, pool_ir, target_machine

# Element type codes of <name>.h, shared by every aicc header (guarded there by #ifndef).
DTYPE_CODES = {
    np.dtype(np.float32): (1, "FLOAT32"), np.dtype(np.float64): (2, "FLOAT64"),
    np.dtype(np.int32): (3, "INT32"), np.dtype(np.int64): (4, "INT64"),
    np.dtype(np.bool_): (5, "BOOL"), np.dtype(np.int8): (6, "INT8"),
    np.dtype(np.uint8): (7, "UINT8"), np.dtype(np.float16): (8, "FLOAT16"),
    np.dtype(np.int16): (9, "INT16"),
}
_DTYPE_OF_CODE = {code: dt for dt, (code, _) in DTYPE_CODES.items()}
NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
WEIGHT_ALIGN = 64
META_SUFFIX = ".json"
FORMAT = 1


def check_name(name: str) -> str:
    if not NAME_RE.match(name):
        raise CompileError(f"--aot-name '{name}': the library's name prefixes its C functions, "
                           "so it must be a C identifier (letters, digits, _; not starting "
                           "with a digit)")
    return name


def write_library(m, out: Path, name: str, llvm_ir: str, data: dict[str, np.ndarray],
                  machine: CPUMachine) -> list[Path]:
    """Write ``out/lib<name>.so``, ``out/<name>.h`` and ``out/<name>.json`` (what
    `load_library` reads) for the compiled model `m`, whose LLVM IR is `llvm_ir` and whose
    external globals are `data` (symbol -> bytes)."""
    check_name(name)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="aicc-aot-") as tmp:
        work = Path(tmp)
        tm = _pic_machine(machine)
        (work / "model.o").write_bytes(_object(llvm_ir, tm))
        (work / "pool.o").write_bytes(_object(pool_ir(), tm))
        _write_weights(data, work)
        header = out / f"{name}.h"
        header.write_text(_header(m, name))
        (work / "api.c").write_text(_api_source(m, name, machine))
        (work / "exports.map").write_text(f"{{ global: {name}_*; local: *; }};\n")
        lib = out / f"lib{name}.so"
        _link(work, out, lib)
    meta = out / f"{name}{META_SUFFIX}"
    meta.write_text(json.dumps({
        "format": FORMAT, "name": name, "target": "cpu", "cpu": machine.name,
        "cpu_features": required_features(machine),
        "func": m.func_name, "output_is_tuple": m.output_is_tuple,
        "inputs": [[list(s), str(d)] for s, d in m.input_types],
        "outputs": [[list(s), str(d)] for s, d in m.output_types],
        "threads": m.threads, "workspace_bytes": m.workspace_bytes,
    }, indent=1) + "\n")
    return [lib, header, meta]


def _pic_machine(machine: CPUMachine) -> llvm.TargetMachine:
    target_machine(machine)  # initializes LLVM
    return llvm.Target.from_default_triple().create_target_machine(
        cpu=machine.name, features=llvm_features(machine), opt=3, reloc="pic", codemodel="default")


def _object(llvm_ir: str, tm: llvm.TargetMachine) -> bytes:
    mod = llvm.parse_assembly(llvm_ir)
    mod.triple = tm.triple
    mod.data_layout = str(tm.target_data)
    optimize(mod, tm)
    mod.verify()
    return tm.emit_object(mod)


def _write_weights(data: dict[str, np.ndarray], work: Path) -> None:
    """weights.bin (every external global, each at a 64-byte boundary) and weights.S, which
    defines each symbol over its bytes in .rodata."""
    lines = ['\t.section .rodata.aicc_weights,"a"']
    offset = 0
    with open(work / "weights.bin", "wb") as f:
        for symbol, array in data.items():
            raw = np.ascontiguousarray(array).view(np.uint8).reshape(-1)
            f.write(raw.tobytes())
            pad = -raw.nbytes % WEIGHT_ALIGN
            f.write(b"\0" * pad)
            lines += [f"\t.balign {WEIGHT_ALIGN}", f'\t.globl "{symbol}"',
                      f'\t.type "{symbol}", @object', f'\t.size "{symbol}", {raw.nbytes}',
                      f'"{symbol}":',
                      f'\t.incbin "{work / "weights.bin"}", {offset}, {raw.nbytes}']
            offset += raw.nbytes + pad
    lines.append('\t.section .note.GNU-stack,"",@progbits')
    (work / "weights.S").write_text("\n".join(lines) + "\n")


def _link(work: Path, out: Path, lib: Path) -> None:
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        raise CompileError(f"--aot links the shared library with the system C compiler, and "
                           f"'{cc}' is not on PATH (install gcc or clang, or set CC)")
    cmd = [cc, "-shared", "-fPIC", "-O2", "-std=c11", f"-I{out}", "-o", str(lib),
           str(work / "api.c"), str(work / "model.o"), str(work / "pool.o"),
           str(work / "weights.S"), f"-Wl,--version-script={work / 'exports.map'}",
           "-Wl,-z,defs", "-Wl,-z,noexecstack", "-lm", "-lpthread"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"linking {lib.name} failed ({' '.join(cmd)}):\n{done.stderr}")


def _dtype_code(dtype) -> int:
    try:
        return DTYPE_CODES[np.dtype(dtype)][0]
    except KeyError:
        raise CompileError(f"--aot: no C API dtype code for {np.dtype(dtype)}") from None


def _header(m, name: str) -> str:
    codes = "\n".join(f"#define AICC_DTYPE_{label} {code}"
                      for code, label in sorted(DTYPE_CODES.values()))
    sig = lambda t: ", ".join(f"{list(s)} {d}" for s, d in t) or "none"  # noqa: E731
    guard = f"AICC_{name.upper()}_H"
    return f"""\
/* {name}.h: the C API of lib{name}.so, a model compiled ahead of time by aicc.
 *
 * inputs:  {sig(m.input_types)}
 * outputs: {sig(m.output_types)}
 *
 * Buffers are C-contiguous, in the dtypes below. {name}_run may be called from any thread;
 * calls run one at a time (a lock). It returns 0 on success, else non-zero with a message
 * in {name}_last_error() (of the calling thread). The library runs its loops on its own
 * worker threads: {name}_set_num_threads(n) sets how many take part (n < 1: one per CPU
 * this process may run on).
 */
#ifndef {guard}
#define {guard}

#include <stdint.h>

#ifdef __cplusplus
extern "C" {{
#endif

/* dtype codes of {name}_input_dtype / {name}_output_dtype */
#ifndef AICC_DTYPE_FLOAT32
{codes}
#endif

int {name}_num_inputs(void);
int {name}_num_outputs(void);
int {name}_input_ndim(int i);
const int64_t *{name}_input_shape(int i);
int {name}_output_ndim(int i);
const int64_t *{name}_output_shape(int i);
int {name}_input_dtype(int i);
int {name}_output_dtype(int i);
void {name}_set_num_threads(int n);
int {name}_run(const void *const *inputs, void *const *outputs);
const char *{name}_last_error(void);

#ifdef __cplusplus
}}
#endif

#endif /* {guard} */
"""


def _c_tables(kind: str, types) -> str:
    lines = []
    for i, (shape, _) in enumerate(types):
        dims = ", ".join(f"INT64_C({d})" for d in shape) or "0"
        lines.append(f"static const int64_t {kind}_shape_{i}[] = {{{dims}}};")
    n = len(types)
    shapes = ", ".join(f"{kind}_shape_{i}" for i in range(n)) or "0"
    ndims = ", ".join(str(len(s)) for s, _ in types) or "0"
    dtypes = ", ".join(str(_dtype_code(d)) for _, d in types) or "0"
    lines += [f"static const int64_t *const {kind}_shapes[] = {{{shapes}}};",
              f"static const int {kind}_ndims[] = {{{ndims}}};",
              f"static const int {kind}_dtypes[] = {{{dtypes}}};"]
    return "\n".join(lines)


# Features the generated code may use that __builtin_cpu_supports can test: the library
# refuses to run (an error, not SIGILL) on a CPU without one of them.
CHECKED_FEATURES = ("sse4.2", "avx", "avx2", "fma", "f16c", "bmi", "bmi2", "avx512f",
                    "avx512bw", "avx512dq", "avx512vl", "avx512vnni", "avx512bf16",
                    "avx512fp16", "avxvnni")


_V3 = ("sse4.2", "avx", "avx2", "fma", "f16c", "bmi", "bmi2")
_LEVELS = {"x86-64-v2": ("sse4.2",), "x86-64-v3": _V3,
           "x86-64-v4": _V3 + ("avx512f", "avx512bw", "avx512dq", "avx512vl")}


def required_features(machine: CPUMachine) -> list[str]:
    """The checked features the code for `machine` may use: those its feature string turns
    on, or for a named CPU (no string) the ones its vector width implies."""
    if machine.features:
        on = {f[1:] for f in machine.features.split(",") if f.startswith("+")}
    else:  # a psABI level's features, else what the vector width implies on every x86 CPU
        on = set(_LEVELS.get(machine.name) or
                 {512: _LEVELS["x86-64-v3"] + ("avx512f",), 256: ("avx",)}.get(
                     machine.vector_bits, ()))
    return [f for f in CHECKED_FEATURES if f in on]


def _cpu_check(features: list[str]) -> str:
    if not features:
        return "static const char *missing_feature(void) { return NULL; }"
    tests = "\n".join(f'  if (!__builtin_cpu_supports("{f}")) return "{f}";' for f in features)
    return f"""static const char *missing_feature(void) {{
  __builtin_cpu_init();
{tests}
  return NULL;
}}"""


def _api_source(m, name: str, machine: CPUMachine) -> str:
    n_in, n_out = len(m.input_types), len(m.output_types)
    ws = m.workspace_bytes
    params = ["void *"] * (n_in + n_out + (1 if ws else 0))
    args = ([f"(void *)inputs[{i}]" for i in range(n_in)]
            + [f"outputs[{i}]" for i in range(n_out)] + (["workspace"] if ws else []))
    entry = m.func_name.replace('"', '\\"')
    # the compiled-for thread count when it was given, else one per CPU at run time
    default_threads = (m.options.threads if m.options else None) or 0
    return f"""\
/* The C API of lib{name}.so (generated by aicc). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "{name}.h"

/* the model's entry point (model.o) and the thread pool (pool.o) */
extern void aicc_entry({", ".join(params) or "void"}) __asm__("{entry}");
extern void aicc_pool_worker(int64_t id);
extern int64_t aicc_pool_threads;
extern int64_t aicc_pool_nworkers;

/* the code was generated for {machine.name}: refuse a CPU without its instructions */
{_cpu_check(required_features(machine))}

{_c_tables("in", m.input_types)}
{_c_tables("out", m.output_types)}

#define N_IN {n_in}
#define N_OUT {n_out}
#define WORKSPACE_BYTES ((size_t){ws})
#define HUGE_PAGE ((size_t)2 << 20)

static pthread_mutex_t run_lock = PTHREAD_MUTEX_INITIALIZER;
static void *workspace;
static int threads_asked = {default_threads};
static int64_t workers_started;
static __thread char last_error[256];

int {name}_num_inputs(void) {{ return N_IN; }}
int {name}_num_outputs(void) {{ return N_OUT; }}
int {name}_input_ndim(int i) {{ return i >= 0 && i < N_IN ? in_ndims[i] : -1; }}
int {name}_output_ndim(int i) {{ return i >= 0 && i < N_OUT ? out_ndims[i] : -1; }}
const int64_t *{name}_input_shape(int i) {{ return i >= 0 && i < N_IN ? in_shapes[i] : NULL; }}
const int64_t *{name}_output_shape(int i) {{ return i >= 0 && i < N_OUT ? out_shapes[i] : NULL; }}
int {name}_input_dtype(int i) {{ return i >= 0 && i < N_IN ? in_dtypes[i] : -1; }}
int {name}_output_dtype(int i) {{ return i >= 0 && i < N_OUT ? out_dtypes[i] : -1; }}
const char *{name}_last_error(void) {{ return last_error; }}

void {name}_set_num_threads(int n) {{
  pthread_mutex_lock(&run_lock);
  threads_asked = n < 1 ? 0 : n;
  pthread_mutex_unlock(&run_lock);
}}

static int cpus(void) {{
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}}

static void *worker_main(void *id) {{
  aicc_pool_worker((int64_t)(intptr_t)id); /* never returns */
  return NULL;
}}

/* Start workers up to threads - 1 (the caller is the first thread); signals stay with the
   application's threads. Called under run_lock. */
static int start_workers(int64_t threads) {{
  if (threads - 1 <= workers_started) return 0;
  pthread_attr_t attr;
  sigset_t all, old;
  int err = pthread_attr_init(&attr);
  if (err) return err;
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  while (workers_started < threads - 1) {{
    pthread_t t;
    err = pthread_create(&t, &attr, worker_main, (void *)(intptr_t)(workers_started + 1));
    if (err) break;
    workers_started++;
  }}
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&attr);
  __atomic_store_n(&aicc_pool_nworkers, workers_started, __ATOMIC_RELEASE);
  return workers_started > 0 || threads <= 1 ? 0 : err;
}}

static int ensure_workspace(void) {{
  if (WORKSPACE_BYTES == 0 || workspace != NULL) return 0;
  size_t align = WORKSPACE_BYTES >= HUGE_PAGE ? HUGE_PAGE : 64;
  void *p = NULL;
  if (posix_memalign(&p, align, WORKSPACE_BYTES) != 0) return ENOMEM;
#ifdef MADV_HUGEPAGE
  if (align == HUGE_PAGE) madvise(p, WORKSPACE_BYTES / HUGE_PAGE * HUGE_PAGE, MADV_HUGEPAGE);
#endif
  workspace = p;
  return 0;
}}

int {name}_run(const void *const *inputs, void *const *outputs) {{
  if ((N_IN && inputs == NULL) || (N_OUT && outputs == NULL)) {{
    snprintf(last_error, sizeof last_error, "{name}_run: NULL buffer array");
    return 1;
  }}
  for (int i = 0; i < N_IN; i++)
    if (inputs[i] == NULL) {{
      snprintf(last_error, sizeof last_error, "{name}_run: input %d is NULL", i);
      return 1;
    }}
  for (int i = 0; i < N_OUT; i++)
    if (outputs[i] == NULL) {{
      snprintf(last_error, sizeof last_error, "{name}_run: output %d is NULL", i);
      return 1;
    }}
  const char *missing = missing_feature();
  if (missing != NULL) {{
    snprintf(last_error, sizeof last_error, "{name}_run: this CPU lacks %s, which the code "
             "compiled for {machine.name} uses (recompile with --target-cpu)", missing);
    return 3;
  }}
  pthread_mutex_lock(&run_lock);
  if (ensure_workspace() != 0) {{
    pthread_mutex_unlock(&run_lock);
    snprintf(last_error, sizeof last_error, "{name}_run: cannot allocate its %zu-byte workspace",
             WORKSPACE_BYTES);
    return 2;
  }}
  int64_t threads = threads_asked > 0 ? threads_asked : cpus();
  if (start_workers(threads) != 0 && workers_started + 1 < threads) threads = workers_started + 1;
  aicc_pool_threads = threads;
  aicc_entry({", ".join(args)});
  pthread_mutex_unlock(&run_lock);
  last_error[0] = 0;
  return 0;
}}
"""


# ----------------------------------------------------------------------- loading


class LibraryModel:
    """A shared library written by `write_library`, called through ctypes: NumPy arrays in,
    NumPy arrays out, like a `CompiledModel`."""

    def __init__(self, directory: Path, meta: dict):
        self.directory = directory
        self.name = meta["name"]
        self.meta = meta
        path = directory / f"lib{self.name}.so"
        try:
            self._lib = ctypes.CDLL(str(path.resolve()), mode=os.RTLD_LOCAL)
        except OSError as e:
            raise CompileError(f"cannot load {path}: {e}") from None
        lib, p = self._lib, self.name
        for fn, res, argtypes in (
                ("num_inputs", ctypes.c_int, []), ("num_outputs", ctypes.c_int, []),
                ("input_ndim", ctypes.c_int, [ctypes.c_int]),
                ("output_ndim", ctypes.c_int, [ctypes.c_int]),
                ("input_shape", ctypes.POINTER(ctypes.c_int64), [ctypes.c_int]),
                ("output_shape", ctypes.POINTER(ctypes.c_int64), [ctypes.c_int]),
                ("input_dtype", ctypes.c_int, [ctypes.c_int]),
                ("output_dtype", ctypes.c_int, [ctypes.c_int]),
                ("set_num_threads", None, [ctypes.c_int]),
                ("run", ctypes.c_int, [ctypes.POINTER(ctypes.c_void_p)] * 2),
                ("last_error", ctypes.c_char_p, [])):
            f = getattr(lib, f"{p}_{fn}")
            f.restype, f.argtypes = res, argtypes
        self.input_types = [self._sig(lib, p, "input", i) for i in range(lib[f"{p}_num_inputs"]())]
        self.output_types = [self._sig(lib, p, "output", i)
                             for i in range(lib[f"{p}_num_outputs"]())]
        self.output_is_tuple = bool(meta.get("output_is_tuple", len(self.output_types) > 1))
        self.func_name = meta.get("func", self.name)
        self._threads = 0

    @staticmethod
    def _sig(lib, p, kind, i):
        nd = getattr(lib, f"{p}_{kind}_ndim")(i)
        shape = getattr(lib, f"{p}_{kind}_shape")(i)
        return (tuple(int(shape[d]) for d in range(nd)),
                _DTYPE_OF_CODE[getattr(lib, f"{p}_{kind}_dtype")(i)])

    @property
    def threads(self) -> int:
        return self._threads or os.cpu_count() or 1

    @threads.setter
    def threads(self, n: int) -> None:
        self._threads = max(0, int(n))
        getattr(self._lib, f"{self.name}_set_num_threads")(self._threads)

    def __call__(self, *inputs):
        if len(inputs) != len(self.input_types):
            raise CompileError(f"{self.name}: the library takes {len(self.input_types)} "
                               f"inputs, got {len(inputs)}")
        args = []
        for i, (x, (shape, dtype)) in enumerate(zip(inputs, self.input_types)):
            a = np.asarray(x)
            if a.shape != shape or a.dtype != dtype:
                raise CompileError(f"{self.name}: input {i} is {shape} {dtype} in the "
                                   f"library, got {a.shape} {a.dtype}")
            args.append(np.ascontiguousarray(a))
        outs = [np.empty(shape, dtype) for shape, dtype in self.output_types]
        ptrs = lambda arrays: (ctypes.c_void_p * max(1, len(arrays)))(  # noqa: E731
            *[a.ctypes.data for a in arrays])
        status = getattr(self._lib, f"{self.name}_run")(ptrs(args), ptrs(outs))
        if status != 0:
            err = getattr(self._lib, f"{self.name}_last_error")().decode(errors="replace")
            raise CompileError(f"{self.name}_run failed ({status}): {err}")
        return tuple(outs) if self.output_is_tuple else outs[0]

    def __repr__(self) -> str:
        return f"<aicc library {self.directory / ('lib' + self.name + '.so')}>"


def load_library(directory: Path, meta: dict) -> LibraryModel:
    return LibraryModel(directory, meta)


__all__ = ["DTYPE_CODES", "LibraryModel", "check_name", "load_library", "write_library"]
