"""Peers on AVX2 kernels on a host with AVX-512: the peers' half of "also run the suite with code
generated for AVX2 and report both" (issue 14) and of "at least as fast as ONNX Runtime on an
AVX2 machine" (issue 16).

aicc's code for another CPU is one setting, AICC_TARGET_CPU=x86-64-v3 (AVX2, FMA, no AVX-512).
Its peers pick their kernels from the host at run time, so next to that code they would run
their AVX-512 (and VNNI) kernels. `--peer-isa avx2` (benchmarks/run.py, onnx_vs_ort.py,
quant_bench.py) restricts them to their AVX2 kernels:

  * torch: ATEN_CPU_CAPABILITY=avx2 (its own vectorized kernels: softmax, layer norm, SDPA,
    the elementwise ops), ONEDNN_MAX_CPU_ISA=AVX2 (oneDNN's convs and matmuls) and
    MKL_ENABLE_INSTRUCTIONS=AVX2 (MKL's GEMM): the libraries' own settings; torch.compile
    with a cache directory of its own (TORCHINDUCTOR_CACHE_DIR, see INDUCTOR_CACHE_ENV);
  * ONNX Runtime: MLAS, its kernel library, picks its kernels once, from CPUID and XCR0, and
    has no setting for it. `onnxruntime_avx2` copies the installed onnxruntime package and
    turns one conditional jump in its library into a no-op: the jump into MLAS's AVX-512
    block, taken where XCR0 says the OS saves the AVX-512 state (MLAS's platform set-up,
    `(xcr0 & 0xE0) == 0xE0`). MLAS then keeps the kernels it chose before that block: its
    AVX2/FMA3 SGEMM, conv, softmax and activation kernels, and its AVX2 u8s8 int8 GEMM
    (vpmaddubsw, whose int16 pair sums saturate) instead of the VNNI one.

The jump is found by its bytes (the AVX512F CPUID test, XCR0 inverted, `test $0xe0, %al`,
`je`): the compiler made a copy of the set-up per caller, and every copy is patched; without
a match the copy is refused. Each copy is then checked: an int8 MatMulInteger of 255 x 127
pairs gives the saturated sum (32767 a pair) that MLAS's AVX2 kernel gives, not the exact one
of its VNNI kernel. On a CPU with AVX-VNNI (VNNI at 256 bits: Sapphire Rapids, Alder Lake)
MLAS's AVX2 level takes its AVX-VNNI kernel, exact too, so there the check expects the exact
sum and the patched jumps alone show the AVX-512 block skipped. The copy lives under
$XDG_CACHE_HOME/aicc-bench (~/.cache/aicc-bench), keyed by the installed package's version
and library size, and is made once.

The hardware stays the host's: AVX2 code on a Zen 4 runs on its 256-bit units, as it would on
a Zen 4 without AVX-512, not as on a Zen 1 (whose units are 128 bits wide). What this measures
is each side's AVX2 code on one machine.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

PEER_ISAS = ("host", "avx2")
TORCH_AVX2_ENV = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2",
                  "MKL_ENABLE_INSTRUCTIONS": "AVX2"}
# set in the process that runs with the peers restricted (and its children)
APPLIED_ENV = "AICC_BENCH_PEER_ISA"
# torch.compile's on-disk cache of compiled graphs and kernels: a directory of its own for the
# restricted peers. Its keys do not include ATEN_CPU_CAPABILITY, so with one directory a run
# under one setting loaded what a run under the other had compiled: torch.compile's results
# were off by ~1.0 or NaN on every model under --peer-isa avx2, and a later run without it
# aborted in an inductor kernel (free(): invalid next size) on the suite's softmax.
INDUCTOR_CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"
# test $0x10000, %e?? (AVX512F in CPUID 7 EBX); je +14; mov %r??, %rax; not %rax;
# test $0xe0, %al (XCR0's AVX-512 state bits, inverted); je rel32 <- the jump into MLAS's
# AVX-512 block
MLAS_AVX512_JUMP = re.compile(
    rb"\xf7[\xc0-\xc7]\x00\x00\x01\x00\x74\x0e[\x48\x49\x4c\x4d]\x89[\xc0-\xff]\x48\xf7\xd0"
    rb"\xa8\xe0(?=\x0f\x84)")
NOP6 = b"\x66\x0f\x1f\x44\x00\x00"

_CHECK = """
import numpy as np, onnx, onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
g = helper.make_graph([helper.make_node("MatMulInteger", ["a", "b"], ["c"])], "g",
    [helper.make_tensor_value_info("a", TensorProto.UINT8, [4, 64])],
    [helper.make_tensor_value_info("c", TensorProto.INT32, [4, 16])],
    [numpy_helper.from_array(np.full((64, 16), 127, np.int8), "b")])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
so = ort.SessionOptions(); so.intra_op_num_threads = 1
s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
print(ort.__file__, int(s.run(None, {"a": np.full((4, 64), 255, np.uint8)})[0][0, 0]))
"""
SATURATED, EXACT = 32 * 32767, 64 * 255 * 127  # the check's sum: AVX2 kernel, VNNI kernel


def host_has_avx_vnni() -> bool:
    """Does this CPU have AVX-VNNI (VNNI on 256-bit vectors: Sapphire Rapids, Alder Lake and
    later)? MLAS's AVX2 level then takes its AVX-VNNI u8s8 kernel, whose sums are exact."""
    from compiler.targets.cpu.machine import cpu_machine

    return "+avxvnni" in cpu_machine("host").features.split(",")


def avx2_int8_sum() -> int:
    """The check's sum from MLAS's AVX2 level on this host: saturated (vpmaddubsw), or exact
    where it takes the AVX-VNNI kernel. There the check cannot tell that level from the
    AVX-512 one (both exact): the patched jumps alone show that the copy skips the latter."""
    return EXACT if host_has_avx_vnni() else SATURATED


class PeerIsaError(RuntimeError):
    pass


def _cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "aicc-bench"


def patch_library(path: Path) -> int:
    """Make every jump into MLAS's AVX-512 block in the library at `path` a no-op; the number
    patched (0: not this build's code)."""
    data = bytearray(path.read_bytes())
    sites = [m.end() for m in MLAS_AVX512_JUMP.finditer(data)]
    for at in sites:
        data[at:at + 6] = NOP6
    if sites:
        path.write_bytes(bytes(data))
    return len(sites)


def site_env(site: Path | None) -> dict[str, str]:
    """This process's environment with `site` first on PYTHONPATH (None: as it is)."""
    env = dict(os.environ)
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def check_onnxruntime(site: Path | None) -> int:
    """The int8 check's sum from the onnxruntime found first on `site` (None: the installed
    one), in a process of its own."""
    out = subprocess.run([sys.executable, "-c", _CHECK], env=site_env(site), capture_output=True,
                         text=True)
    if out.returncode:
        raise PeerIsaError(f"the onnxruntime check failed: {out.stderr.strip().splitlines()[-1:]}")
    origin, total = out.stdout.split()
    if site is not None and not Path(origin).is_relative_to(site):
        raise PeerIsaError(f"the check imported {origin}, not the copy in {site}")
    return int(total)


def onnxruntime_avx2() -> Path:
    """A folder holding a copy of the installed onnxruntime package whose MLAS runs its AVX2
    kernels (see the module's doc): put it first on sys.path / PYTHONPATH."""
    spec = importlib.util.find_spec("onnxruntime")
    if spec is None or spec.origin is None:
        raise PeerIsaError("onnxruntime is not installed")
    package = Path(spec.origin).parent
    libraries = sorted((package / "capi").glob("onnxruntime_pybind11_state*.so"))
    if not libraries:
        raise PeerIsaError(f"no onnxruntime_pybind11_state library in {package / 'capi'}")
    from importlib.metadata import version

    ort_version = version("onnxruntime")
    key = f"onnxruntime-{ort_version}-{libraries[0].stat().st_size}-avx2"
    site = _cache_root() / key
    if (site / "onnxruntime").is_dir() and (site / "ok").exists():
        return site
    shutil.rmtree(site, ignore_errors=True)
    shutil.copytree(package, site / "onnxruntime", symlinks=True)
    patched = patch_library(site / "onnxruntime" / "capi" / libraries[0].name)
    if not patched:
        shutil.rmtree(site, ignore_errors=True)
        raise PeerIsaError(f"MLAS's AVX-512 set-up not found in {libraries[0]} "
                           f"(onnxruntime {ort_version}): cannot restrict it to AVX2")
    total, want = check_onnxruntime(site), avx2_int8_sum()
    if total != want:
        shutil.rmtree(site, ignore_errors=True)
        raise PeerIsaError(f"the patched onnxruntime's int8 check gave {total}, not the AVX2 "
                           f"kernel's {want} (saturated: {SATURATED}, exact: {EXACT})")
    (site / "ok").write_text(f"{patched} jumps patched\n")
    return site


def peer_env(isa: str) -> dict[str, str]:
    """Environment settings that restrict the peers to `isa`'s kernels ("host": none)."""
    if isa == "host":
        return {}
    if isa != "avx2":
        raise PeerIsaError(f"unknown peer ISA {isa!r} (known: {', '.join(PEER_ISAS)})")
    return {**TORCH_AVX2_ENV, "PYTHONPATH": site_env(onnxruntime_avx2())["PYTHONPATH"],
            INDUCTOR_CACHE_ENV: str(_cache_root() / f"torchinductor-{isa}"), APPLIED_ENV: isa}


def restrict_peers(isa: str) -> None:
    """Run this script again with the peers restricted to `isa` (before anything imports torch
    or onnxruntime), unless that is done already or `isa` is "host"."""
    if isa == "host" or os.environ.get(APPLIED_ENV) == isa:
        return
    try:
        env = {**os.environ, **peer_env(isa)}
    except PeerIsaError as e:
        raise SystemExit(f"--peer-isa {isa}: {e}") from None
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, *sys.argv], env)


def describe() -> str:
    """One line for a results file: which kernels the peers ran."""
    if os.environ.get(APPLIED_ENV) != "avx2":
        return "the peers run the kernels they pick for the host"
    return ("the peers run their AVX2 kernels (benchmarks/peer_isa.py): torch with "
            + ", ".join(f"{k}={v}" for k, v in TORCH_AVX2_ENV.items())
            + "; ONNX Runtime with MLAS's AVX-512 set-up skipped (its AVX2/FMA3 kernels, its "
            + ("AVX-VNNI u8s8 int8 GEMM at 256 bits, this CPU having AVX-VNNI)"
               if host_has_avx_vnni() else "AVX2 u8s8 int8 GEMM)"))


def aicc_code() -> str:
    """One line for a results file: the CPU aicc's code is for (AICC_TARGET_CPU or the host)."""
    from compiler.targets.cpu.machine import cpu_machine

    m, host = cpu_machine(None), cpu_machine("host")  # None: $AICC_TARGET_CPU, else the host
    isa = (f"LLVM CPU {m.name}, {m.vector_bits}-bit vectors, "
           + (f"VNNI {m.vnni_bits}" if m.vnni_bits else "no VNNI"))
    return isa if m.name == host.name else f"aicc's code for {isa} (AICC_TARGET_CPU) on a {host.name} host"
