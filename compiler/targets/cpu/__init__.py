"""The cpu target: x86-64 through LLVM, run in-process with MCJIT.

Its own passes: choose-schedule (a schedule on every matmul and packed conv, from the target
CPU's vector width and caches), tile-conv (packed convs as register-tile kernels), tile-matmul
(packing, cache blocks, micro-kernels), fuse-rows (row-wise
kernels as one loop nest) and lower-attention (attention as a loop nest). Its schedule space
is schedule.py, its machine description machine.py (`AICC_TARGET_CPU`), its code generator
compiler/codegen/llvm and its runtime runtime.py (O3 + MCJIT, the thread pool).
"""

from __future__ import annotations

import os

import time
from pathlib import Path

from compiler.stages import CompileOptions, PassTiming
from compiler.targets import Target

# "0": linalg-to-loops keeps the default loop order for windows (A/B timing)
WINDOW_INNER_ENV = "AICC_WINDOW_INNER"
# "0": no collapse-dims, elementwise loop nests keep their dims (A/B timing)
COLLAPSE_ENV = "AICC_COLLAPSE"
# "0": no fill-border, a padding's fill writes the whole padded buffer (A/B timing)
FILL_BORDER_ENV = "AICC_FILL_BORDER"
# "0": int8 3x3 convs keep the direct kernel where the integer Winograd one would run (A/B timing)
INT8_WINOGRAD_ENV = "AICC_INT8_WINOGRAD"
# "0" / "1": the matmul and packed conv kernels fetch the next block of a constant operand
# into L2 or not, whatever the machine's l2_prefetch_rule / conv_l2_prefetch_rule say (A/B
# timing)
L2_PREFETCH_ENV = "AICC_L2_PREFETCH"


def _pass(module: str, cls: str):
    def load():
        import importlib

        return getattr(importlib.import_module(f"compiler.targets.cpu.{module}"), cls)

    return load


class CPUTarget(Target):
    name = "cpu"
    dynamic_shapes = True
    description = "x86-64 CPU: LLVM IR through llvmlite, O3, MCJIT (AICC_TARGET_CPU picks the CPU)"
    stages = ("tensor", "linalg", "memref", "loops", "llvm", "asm")
    options = ("schedule", "target_cpu", "tune", "tune_budget", "int8_saturation")
    keyless_options = ("tune", "tune_budget")
    cacheable = True

    def machine(self, options: CompileOptions | None = None):
        from compiler.targets.cpu.machine import cpu_machine

        return cpu_machine(options.target_cpu if options else None)

    def pipeline(self, options: CompileOptions) -> list[tuple[str, list]]:
        from xdsl.transforms.dead_code_elimination import DeadCodeElimination

        from compiler.lowering import pipeline as shared
        from compiler.lowering.fuse_attention import FuseAttention
        from compiler.lowering.fold_conv_input_scale import FoldConvInputScale
        from compiler.lowering.fuse_linear_bias import FuseLinearBias
        from compiler.lowering.collapse_dims import CollapseDims
        from compiler.lowering.fill_border import FillBorder
        from compiler.targets.cpu.choose_schedule import ChooseSchedule
        from compiler.targets.cpu.fuse_rows import FuseRows
        from compiler.targets.cpu.lower_attention import LowerAttention
        from compiler.targets.cpu.qgemm import LowerQGemm
        from compiler.targets.cpu.schedule import (
            aliased_a_rule,
            conv_l2_prefetch_rule,
            conv_prefetch_rule,
            format_overrides,
            k_unroll_rule,
            l2_prefetch_rule,
            nhwc_kxk_rule,
            packed_1x1_rule,
            winograd4_rule,
        )
        from compiler.targets.cpu.tile_conv import TileConv
        from compiler.targets.cpu.tile_matmul import TileMatmul

        machine = self.machine(options)
        threads = options.threads or 0
        fuse = options.fuse
        # L2_PREFETCH_ENV, where set, over both L2 rules
        l2_forced = {"0": False, "1": True}.get(os.environ.get(L2_PREFETCH_ENV, ""))
        hooks = shared.StageHooks(
            graph=(FuseLinearBias(), *([FoldConvInputScale()] if fuse else [])),
            tensor=(FuseAttention(), DeadCodeElimination()) if fuse else (),
            linalg=(ChooseSchedule(vector_bits=machine.vector_bits, threads=threads,
                                   l1_bytes=machine.l1_bytes, l2_bytes=machine.l2_bytes,
                                   overrides=format_overrides(options.schedule),
                                   conv_pf=conv_prefetch_rule(machine),
                                   pack_aliased_a=aliased_a_rule(machine),
                                   conv_nhwc_flops=nhwc_kxk_rule(machine),
                                   l2_prefetch=l2_prefetch_rule(machine)
                                   if l2_forced is None else l2_forced,
                                   conv_l2_prefetch=conv_l2_prefetch_rule(machine)
                                   if l2_forced is None else l2_forced,
                                   k_unroll=k_unroll_rule(machine),
                                   record=self._record(machine)),),
            # tile-conv first: it folds the activation after a conv into the kernels, which
            # fuse-rows would otherwise group with a following reduction (an SE block's pool)
            memref=(TileConv(vector_bits=machine.vector_bits), *([FuseRows()] if fuse else []),
                    TileMatmul(threads=threads),
                    LowerQGemm(enabled=machine.has_avx2, vnni=machine.vnni_bits,
                               saturate=bool(options.target_options.get("int8_saturation")),
                               winograd=os.environ.get(INT8_WINOGRAD_ENV, "1") != "0")),
            # forward-copies: an interleave or transpose of a buffer larger than L2 (which
            # streams through memory twice) is written in place by its producer
            forward_permuted_min_bytes=machine.l2_bytes,
            # collapse-dims: an elementwise op's loop nest over as few dims as its operands
            # allow, so its innermost loop is long and all vectors
            # fill-border: a padding's fill stores the border only (its copy writes the rest)
            loops=(LowerAttention(vector_bits=machine.vector_bits),
                   *([FillBorder()] if os.environ.get(FILL_BORDER_ENV, "1") != "0" else []),
                   *([CollapseDims()] if os.environ.get(COLLAPSE_ENV, "1") != "0" else [])),
            transpose_tile=64,
            # AICC_WINDOW_INNER=0 keeps the default order (for A/B timing)
            window_inner=os.environ.get(WINDOW_INNER_ENV, "1") != "0",
            # the packed conv kernels are the default where they were measured to win: AVX2
            # (Zen 3) and AVX-512 (Zen 4: CNNs 5-36% faster than im2col and the direct loop);
            # on 128-bit targets AICC_CONV_LOWERING=packed or the op's attribute ask for them
            conv_packed=machine.vector_bits >= 256,
            conv_vector_bits=machine.vector_bits,
            conv_packed_1x1=packed_1x1_rule(machine),
            conv_winograd4_min_tiles=winograd4_rule(machine),
        )
        return shared.shared_stages(fuse, hooks)

    def build(self, module, stages, timings, options, n_inputs, n_outputs):
        from compiler.codegen.llvm import EXTERNAL_DATA_MIN_BYTES, LLVMEmitter
        from compiler.targets.cpu.runtime import CPUExecutable

        machine = self.machine(options)
        t0 = time.perf_counter()
        emitter = LLVMEmitter(external_data_min_bytes=EXTERNAL_DATA_MIN_BYTES,
                              vector_ldexp=machine.vector_ldexp)
        llvm_ir = str(emitter.emit(module))
        timings.append(PassTiming("emit-llvm", time.perf_counter() - t0))
        t0 = time.perf_counter()
        exe = CPUExecutable(llvm_ir, threads=options.threads, data=emitter.external_data,
                            machine=machine)
        timings.append(PassTiming("llvm-O3-and-jit", time.perf_counter() - t0))
        # loop nests outlined into functions, and the distinct ones LLVM compiled (identical
        # loop nests share one function)
        exe.codegen_stats = {"llvm_kernels": emitter.outlined,
                             "kernels_compiled": len(emitter.kernels),
                             "llvm_partitions": len(exe.object_codes())}
        stages["llvm"] = llvm_ir
        stages["asm"] = ""  # produced on demand: printing assembly costs a second codegen
        return exe

    def cache_key(self, options: CompileOptions) -> dict[str, str]:
        import llvmlite

        from compiler.targets.cpu.schedule import CONV_SCHEDULE_ENV, format_overrides
        from compiler.targets.cpu.tuning_record import record_digest

        machine = self.machine(options)
        return {"target": self.name, "cpu": machine.key(),
                "llvmlite": llvmlite.__version__, "schedule": format_overrides(options.schedule),
                "tuning": record_digest(machine.key()),
                "env": {k: os.environ.get(k, "")
                        for k in (CONV_SCHEDULE_ENV, WINDOW_INNER_ENV, COLLAPSE_ENV, INT8_WINOGRAD_ENV,
                                  L2_PREFETCH_ENV, FILL_BORDER_ENV)}}

    @staticmethod
    def _record(machine) -> str:
        """The machine's tuning record, when there is one, for choose-schedule."""
        from compiler.targets.cpu.tuning_record import record_path

        path = record_path(machine.key())
        return str(path) if path.exists() else ""

    def prepare(self, module, func_name: str, options: CompileOptions):
        """tune=True: measure the model's matmul schedules first (tune.py), so the compile
        that follows takes them from the record."""
        tune = options.target_options.get("tune")
        if not tune:
            return None
        from compiler.targets.cpu.tune import tune_module

        return tune_module(module, func_name, options,
                           workers="ray" if tune == "ray" else "local",
                           budget_s=options.target_options.get("tune_budget"))

    def save_executable(self, exe):
        """The machine code MCJIT loaded (an object per partition) and the weights kept out
        of it."""
        data = exe.data
        objects = exe.object_codes()
        meta = {"data": [[sym, a.dtype.str, list(a.shape)] for sym, a in data.items()],
                "objects": len(objects)}
        blobs = {**{f"object:{i}": o for i, o in enumerate(objects)},
                 **{f"data:{sym}": a for sym, a in data.items()}}
        return meta, blobs

    def load_executable(self, entry, options, n_inputs, n_outputs):
        from compiler.targets.cpu.runtime import CPUExecutable

        data = {sym: entry.array(f"data:{sym}", dtype, shape)
                for sym, dtype, shape in entry.meta["data"]}
        objects = [bytes(entry.blobs[f"object:{i}"]) for i in range(entry.meta["objects"])]
        return CPUExecutable(None, threads=options.threads, data=data,
                             machine=self.machine(options), object_code=objects)

    def export_library(self, m, out: Path, name: str) -> list[Path]:
        from compiler.targets.cpu.aot import write_library

        llvm_ir = m.ir("llvm")  # first: a model from the cache rebuilds its IR here
        return write_library(m, out, name, llvm_ir, m.rebuilt_executable().data,
                             self.machine(m.options))

    def load_library(self, directory: Path, meta: dict):
        from compiler.targets.cpu.aot import load_library

        return load_library(directory, meta)

    def workspace(self, nbytes: int):
        from compiler.targets.cpu.runtime import arena

        return arena(nbytes)

    def passes(self):
        return {
            "choose-schedule": _pass("choose_schedule", "ChooseSchedule"),
            "tile-matmul": _pass("tile_matmul", "TileMatmul"),
            "tile-conv": _pass("tile_conv", "TileConv"),
            "fuse-rows": _pass("fuse_rows", "FuseRows"),
            "lower-attention": _pass("lower_attention", "LowerAttention"),
            "lower-qgemm": _pass("qgemm", "LowerQGemm"),
        }

    def printers(self):
        def print_llvm(module, output) -> None:
            from compiler.codegen.llvm import emit_llvm

            output.write(emit_llvm(module, vector_ldexp=self.machine().vector_ldexp))

        # aicc-opt's `llvm` replaces xDSL's own (which goes through xDSL's llvm dialect);
        # `aicc-llvm` names the same output for xdsl-opt users
        return {"llvm": print_llvm, "aicc-llvm": print_llvm}

    def write_outputs(self, m, out: Path) -> list[Path]:
        written = []
        for stage in ("tensor", "linalg", "memref", "loops"):
            written.append(out / f"{stage}.mlir")
            written[-1].write_text(m.ir(stage))
        files = {"model.ll": m.ir("llvm"), "model.opt.ll": m.executable.optimized_ir,
                 "model.s": m.ir("asm")}
        for name, text in files.items():
            written.append(out / name)
            written[-1].write_text(text)
        written.append(out / "model.o")
        written[-1].write_bytes(m.executable.object_code())
        return written


TARGET = CPUTarget()

__all__ = ["CPUTarget", "TARGET"]
