"""The CPU that code is generated for: its LLVM name and features, its vector width and its
cache sizes. Every decision that depends on the machine (choose-schedule's register tiles
and cache blocks, the emitter's vector ldexp, LLVM's instruction selection) reads a
`CPUMachine`, never the host directly, so code for another x86-64 CPU can be generated and
inspected here: `AICC_TARGET_CPU=x86-64-v3` (AVX2) or `skylake-avx512`, or
`compile(..., target_cpu=...)`. The default, "host", is this CPU with all its features.

The vector width of a named CPU is read from LLVM itself: a probe function of 16-float
vectors is compiled for it and its assembly shows zmm (AVX-512), ymm (AVX) or xmm registers.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from functools import lru_cache

import llvmlite.binding as llvm

from compiler.errors import CompileError

TARGET_CPU_ENV = "AICC_TARGET_CPU"
HOST = "host"


@dataclass(frozen=True)
class CPUMachine:
    name: str  # LLVM CPU name ("znver3", "skylake-avx512", "x86-64-v3")
    features: str  # LLVM feature string ("+avx2,+fma,..."; "" = the CPU name's own)
    vector_bits: int  # widest float vectors it runs natively: 512, 256 or 128
    l1_bytes: int  # L1 data cache of one core (0: unknown)
    l2_bytes: int  # L2 cache of one core (0: unknown)
    is_host: bool  # this process's CPU, all features on

    @property
    def vector_ldexp(self) -> bool:
        """llvm.ldexp on float vectors is one instruction (AVX-512 vscalefps)."""
        return self.vector_bits >= 512

    @property
    def has_avx2(self) -> bool:
        """AVX2's integer vector instructions (`vpmaddwd` on ymm: the int8 GEMM kernel)."""
        if self.features:
            return "+avx2" in self.features.split(",")
        return _probe_avx2(self.name)

    @property
    def vnni_bits(self) -> int:
        """The width of the int8 dot products `vpdpbusd` runs on this CPU (u8 x s8, four
        products per i32 lane, accumulated without saturation): 512 on an AVX-512 VNNI CPU
        whose vectors are 512 bits, 256 with AVX-VNNI or AVX512-VNNI+VL at 256 bits, 0 without
        VNNI (the int8 kernels then use AVX2's vpmaddwd)."""
        if not self.has_avx2:
            return 0
        if self.features:
            flags = set(self.features.split(","))
            if "+avx512vnni" in flags and self.vector_bits >= 512:
                return 512
            return 256 if "+avxvnni" in flags or {"+avx512vnni", "+avx512vl"} <= flags else 0
        return (512 if self.vector_bits >= 512 else 256) if _probe_vnni(self.name) else 0

    @property
    def vendor(self) -> str:
        """"amd" or "intel", read from the LLVM CPU name (a host's name is its core's), or ""
        for a generic name (x86-64-v3): decisions measured to differ between the two vendors'
        cores (choose_conv_lowering's 1x1 convs) read it; "" keeps the default."""
        return cpu_vendor(self.name)

    def key(self) -> str:
        """What identifies the generated code's machine (for a cache key)."""
        return f"{self.name}:{self.features}" if self.features else self.name


# LLVM's x86 CPU names: AMD's cores by prefix, the generic ones by name; every other is Intel's
# (haswell, skylake-avx512, sapphirerapids, rocketlake, ...).
_AMD_PREFIXES = ("znver", "bdver", "btver", "amdfam", "athlon", "opteron", "k8", "k6",
                 "barcelona", "geode")
_GENERIC = ("x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4", "generic", "i386", "i486",
            "i586", "i686", "")


def cpu_vendor(name: str) -> str:
    """"amd", "intel" or "" (generic) for the LLVM x86 CPU `name`."""
    if name in _GENERIC:
        return ""
    return "amd" if name.startswith(_AMD_PREFIXES) else "intel"


def target_cpu_name(explicit: str | None = None) -> str:
    """The CPU asked for: `explicit`, else $AICC_TARGET_CPU, else "host"."""
    return (explicit or os.environ.get(TARGET_CPU_ENV) or HOST).strip() or HOST


def initialize_llvm() -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()


def cpu_machine(name: str | None = None) -> CPUMachine:
    """The machine for CPU `name` (None: `target_cpu_name()`, read on every call)."""
    return _cpu_machine(target_cpu_name(name))


@lru_cache(maxsize=None)
def _cpu_machine(name: str) -> CPUMachine:
    initialize_llvm()
    l1, l2 = host_cache_bytes()
    if name == HOST:
        features = llvm.get_host_cpu_features()
        bits = 512 if features.get("avx512f") else 256 if features.get("avx") else 128
        return CPUMachine(llvm.get_host_cpu_name(), features.flatten(), bits, l1, l2, True)
    # A named CPU's caches are unknown here: the host's are the best guess for the blocking.
    return CPUMachine(name, "", _probe_vector_bits(name), l1, l2, name == llvm.get_host_cpu_name())


# LLVM tuning flags added to every CPU's features: the vectorizers never turn strided or
# indexed loads into gather instructions (nor stores into scatters), but into wide loads and
# shuffles, or scalar loads. Gathers are microcoded on AMD Zen 1-3, slow on Zen 4 (and on Intel
# cores since the Downfall microcode), and LLVM's cost model still picked them for the stride-2
# reads of Winograd's input transform: with them that transform took two thirds of a 3x3
# conv's time on a Zen 4 with AVX-512 code (32->64 channels at 32x32: 0.43 ms against 0.24
# without; 128 channels at 28x28: 1.83 against 1.20).
NO_GATHER = "+prefer-no-gather,+prefer-no-scatter"


def llvm_features(machine: CPUMachine) -> str:
    """The feature string LLVM gets for `machine`: its features, tuned with NO_GATHER."""
    return f"{machine.features},{NO_GATHER}" if machine.features else NO_GATHER


def new_target_machine(machine: CPUMachine, *, jit: bool = False) -> llvm.TargetMachine:
    """An LLVM target machine for `machine` at O3 (a new one: an execution engine takes
    ownership of the machine it is given)."""
    initialize_llvm()
    return llvm.Target.from_default_triple().create_target_machine(
        cpu=machine.name, features=llvm_features(machine), opt=3, reloc="default",
        codemodel="jitdefault" if jit else "default")


_PROBE = """
define void @probe(ptr noalias %a, ptr noalias %b) {
  %x = load <16 x float>, ptr %a, align 64
  %y = load <16 x float>, ptr %b, align 64
  %z = fadd <16 x float> %x, %y
  store <16 x float> %z, ptr %a, align 64
  ret void
}
"""


def _probe_asm(name: str, ir_text: str) -> tuple[str, str]:
    """(the assembly LLVM writes for `ir_text` on CPU `name`, what it warned on stderr).
    +64bit: LLVM aborts on 64-bit code for a CPU it does not know, before any check."""
    return _with_stderr(lambda: new_target_machine(CPUMachine(name, "+64bit", 0, 0, 0, False))
                        .emit_assembly(llvm.parse_assembly(ir_text)))


def _probe_vector_bits(name: str) -> int:
    """Compile 16-float vector code for CPU `name` and read the register width LLVM picked.
    LLVM only warns (on stderr) about a CPU name it does not know and falls back to a generic
    one: that warning is caught here and becomes an error."""
    tm_text, warning = _probe_asm(name, _PROBE)
    if "not a recognized processor" in warning:
        raise CompileError(f"unknown target CPU '{name}' ({TARGET_CPU_ENV} or target_cpu=): "
                           "expected an LLVM x86 CPU name such as x86-64-v3, haswell, znver3, "
                           "skylake-avx512, or 'host'")
    return 512 if "zmm" in tm_text else 256 if "ymm" in tm_text else 128


_PROBE_AVX2 = _PROBE.replace("16 x float", "8 x i32").replace("fadd", "add")


@lru_cache(maxsize=None)
def _probe_avx2(name: str) -> bool:
    """Does CPU `name` add 8 x i32 in one ymm instruction (AVX2; AVX alone splits it in two)?"""
    text, _ = _probe_asm(name, _PROBE_AVX2)
    return "%ymm" in text and "vpaddd" in text


_PROBE_VNNI = """
declare <8 x i32> @llvm.x86.avx2.pmadd.wd(<16 x i16>, <16 x i16>)
define void @probe(ptr noalias %acc, ptr noalias %a, ptr noalias %b) {
  %x = load <16 x i16>, ptr %a, align 32
  %y = load <16 x i16>, ptr %b, align 32
  %s = load <8 x i32>, ptr %acc, align 32
  %p = call <8 x i32> @llvm.x86.avx2.pmadd.wd(<16 x i16> %x, <16 x i16> %y)
  %r = add <8 x i32> %s, %p
  store <8 x i32> %r, ptr %acc, align 32
  ret void
}
"""


@lru_cache(maxsize=None)
def _probe_vnni(name: str) -> bool:
    """Does CPU `name` (with AVX2) have VNNI? LLVM folds an add of a vpmaddwd into VNNI's
    vpdpwssd exactly when it does (AVX-VNNI or AVX512-VNNI with VL). A probe of an intrinsic
    that the CPU may lack would abort the process instead."""
    text, _ = _probe_asm(name, _PROBE_VNNI)
    return "vpdpwssd" in text


def _with_stderr(fn):
    """(fn(), what LLVM wrote to file descriptor 2 meanwhile)."""
    with tempfile.TemporaryFile() as f:
        saved = os.dup(2)
        try:
            os.dup2(f.fileno(), 2)
            result = fn()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        f.seek(0)
        return result, f.read().decode(errors="replace")


@lru_cache(maxsize=None)
def host_cache_bytes() -> tuple[int, int]:
    """(L1 data, L2) cache bytes of one core, from sysfs; (0, 0) where unknown."""
    sizes = {}
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for entry in os.listdir(base):
            path = os.path.join(base, entry)
            try:
                with open(os.path.join(path, "level")) as f:
                    level = int(f.read())
                with open(os.path.join(path, "type")) as f:
                    kind = f.read().strip()
                with open(os.path.join(path, "size")) as f:
                    text = f.read().strip()
            except OSError:
                continue
            if kind == "Instruction":
                continue
            scale = {"K": 1024, "M": 1024 * 1024}.get(text[-1:], 1)
            sizes[level] = int(text.rstrip("KM")) * scale
    except (OSError, ValueError):
        pass
    return sizes.get(1, 0), sizes.get(2, 0)


def check_runnable(machine: CPUMachine) -> None:
    """Code for `machine` can run on this host: its vectors are no wider than the host's."""
    host = cpu_machine(HOST)
    if machine.vector_bits > host.vector_bits:
        raise CompileError(
            f"target CPU '{machine.name}' uses {machine.vector_bits}-bit vectors and this host "
            f"({host.name}) runs {host.vector_bits}-bit ones: the code can be printed "
            "(--emit llvm / asm) but not run here")


__all__ = ["CPUMachine", "TARGET_CPU_ENV", "check_runnable", "cpu_machine", "cpu_vendor",
           "host_cache_bytes", "new_target_machine", "target_cpu_name"]
