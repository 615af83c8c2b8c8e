"""Autotuning: matmul schedules measured on this machine instead of chosen by the heuristic.

`tune_module(module, func_name, options)` (`compile(..., tune=True)`, `aicc MODEL --tune`):

1. **Kernels.** The tensor stage's function, op by op: each op that lowers to exactly one
   matmul-like op (a matmul, linear + bias, a conv by im2col or as a matmul), extracted into
   a module of its own (`op_module`, with a transpose it reads in place), is a kernel; its
   signature is what choose-schedule sees (tuning_record.signature). Kernels with the same
   signature share one search; signatures the record already has are skipped.
2. **Search.** Evolutionary, as tinygrad's BEAM and TVM's evolutionary search do: the
   heuristic's schedule first (always a candidate, so the winner is never slower than the
   default as measured), then random schedules, then each generation mutates one or two
   fields of the fastest few. A candidate fixes some fields; `choose_matmul_schedule` chooses
   the others around them, so every candidate is a schedule the heuristic could complete.
   The budget (seconds) is shared out over the kernels.
3. **Measuring.** In a child process (`python -m compiler.tune_worker`) fed one candidate at
   a time with a timeout: a candidate that crashes or hangs is discarded and the process
   restarted. Locally one process measures, one candidate after the other. With Ray
   (`workers="ray"`), one actor per `threads` CPUs of the cluster each keeps such a process,
   pinned to its cores, and a generation's candidates are spread over them.
4. **In the model.** A kernel measured alone can behave otherwise next to the others, so the
   whole model is timed with and without the winners; a winner whose removal makes it faster
   goes back to the default schedule until the tuned model is faster than the default one.
5. **Record.** The winners go to the machine's tuning record (tuning_record.py), which every
   later compile on this machine reads.
"""

from __future__ import annotations

import json
import math
import os
import random
import selectors
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import BytesAttr, DenseIntOrFPElementsAttr, ModuleOp

from compiler.dialects import aicc
from compiler.dialects.extract import op_module
from compiler.errors import CompileError
from compiler.lowering.pipeline import make_context
from compiler.stages import CompileOptions
from compiler.targets.cpu.choose_schedule import ChooseSchedule, matmul_signature
from compiler.targets.cpu.schedule import (
    L1_BYTES,
    L2_BYTES,
    aliased_a_rule,
    l2_prefetch_rule,
    k_unroll_rule,
    choose_matmul_schedule,
    element_bytes,
    is_constant,
    match_matmul,
    schedule_of,
)
from compiler.targets.cpu.tuning_record import load_record, record_path, save_kernels
from compiler.threads import default_threads

DEFAULT_BUDGET_S = 60.0
MIN_KERNEL_S = 4.0  # below this a kernel's search is not worth starting
TIMEOUT_S = 60.0  # one candidate: compile and time
WORKER = [sys.executable, "-m", "compiler.tune_worker"]
STRIP_BYTES = 256  # constants bigger than this go to the worker as splats


@dataclass
class Kernel:
    signature: str
    module_text: str  # the op alone, weights stripped
    func_name: str
    default: dict  # the heuristic's schedule
    batch: tuple[int, ...]
    m: int
    n: int
    k: int
    a_trans: bool
    b_trans: bool
    b_constant: bool
    conv: bool
    elem_bytes: int
    vw: int
    origin: str = ""  # the op it was found on
    a_constant: bool = False


@dataclass
class KernelResult:
    signature: str
    default_ms: float
    best_ms: float
    schedule: dict
    measured: int
    seconds: float
    failed: int = 0  # candidates that crashed, hung or did not compile

    @property
    def speedup(self) -> float:
        return self.default_ms / self.best_ms if self.best_ms else 1.0


@dataclass
class TuneReport:
    kernels: list[KernelResult] = field(default_factory=list)
    skipped: int = 0  # kernels the record already had
    seconds: float = 0.0
    record: str = ""
    model_default_ms: float | None = None  # the whole model, checked after the searches
    model_tuned_ms: float | None = None
    reverted: list[str] = field(default_factory=list)  # winners that slowed the whole model

    def table(self) -> str:
        lines = [f"tuned {len(self.kernels)} kernel(s) in {self.seconds:.1f} s "
                 f"({self.skipped} already in the record {self.record})"]
        for r in self.kernels:
            back = "  (reverted: slower in the model)" if r.signature in self.reverted else ""
            lines.append(f"  {r.signature:<44} default {r.default_ms:9.3f} ms  tuned "
                         f"{r.best_ms:9.3f} ms  {r.speedup:5.2f}x  ({r.measured} measured, "
                         f"{r.failed} failed, {r.seconds:.1f} s){back}")
        if self.model_default_ms is not None:
            lines.append(f"  whole model: default {self.model_default_ms:.3f} ms, tuned "
                         f"{self.model_tuned_ms:.3f} ms "
                         f"({self.model_default_ms / self.model_tuned_ms:.2f}x)")
        return "\n".join(lines)


# ------------------------------------------------------------------------------ kernels


def _stripped(module: ModuleOp) -> str:
    """The module's text with big constants as splats (the worker refills them)."""
    module = module.clone()
    for op in module.walk():
        if isinstance(op, aicc.ConstantOp) and len(op.value.data.data) > STRIP_BYTES:
            t = op.value.get_type()
            one = np.zeros(1, aicc.numpy_dtype(t.element_type))
            op.value = DenseIntOrFPElementsAttr(t, BytesAttr(one.tobytes()))
    return str(module)


def find_kernels(module: ModuleOp, func_name: str, options: CompileOptions,
                 target) -> list[Kernel]:
    """The distinct tunable kernels of `module` (unchanged), in program order."""
    ctx = make_context()
    stages = dict(target.pipeline(options))
    work = module.clone()
    for p in stages["tensor"]:
        p.apply(ctx, work)
    # the heuristic's schedules, whatever a record says
    linalg = [replace(p, record="") if isinstance(p, ChooseSchedule) else p
              for p in stages["linalg"]]
    threads = options.threads or default_threads()
    fn = next(o for o in work.ops if isinstance(o, func.FuncOp) and o.sym_name.data == func_name)
    found: dict[str, Kernel] = {}
    for op in list(fn.body.walk()):
        if isinstance(op, aicc.ConstantOp | func.ReturnOp) or not op.results:
            continue
        one = op_module(op, func_name, keep_producer=lambda o: o.name == "aicc.transpose")
        text = _stripped(one)
        try:
            for p in [*stages["tensor"], *linalg]:
                p.apply(ctx, one)
        except CompileError:
            continue
        mms = [(o, match_matmul(o)) for o in one.walk()]
        mms = [(o, mm) for o, mm in mms if mm is not None]
        if len(mms) != 1:
            continue
        o, mm = mms[0]
        sig = matmul_signature(o, mm, threads)
        if sig in found:
            continue
        sched = schedule_of(o)
        found[sig] = Kernel(sig, text, func_name, asdict(sched), tuple(mm.batch), mm.m, mm.n,
                            mm.k, mm.a_trans, mm.b_trans, is_constant(mm.b),
                            "aicc.conv_lowering" in o.attributes,
                            element_bytes(mm.element_type), sched.vw,
                            op.name, is_constant(mm.a))
    return list(found.values())


# ------------------------------------------------------------------------------ candidates


class Space:
    """The schedules of one kernel: random ones, mutations, completion by the heuristic."""

    FIELDS = ("mr", "nr", "kc", "mc", "nc", "order", "pack_a", "pack_b", "ku", "pf",
              "parallel", "l2pf")

    def __init__(self, k: Kernel, threads: int, machine):
        self.k, self.threads = k, threads
        self.l1 = machine.l1_bytes or L1_BYTES
        self.l2 = machine.l2_bytes or L2_BYTES
        self.pack_aliased_a = aliased_a_rule(machine)
        self.l2_prefetch = l2_prefetch_rule(machine)
        self.ku = k_unroll_rule(machine)
        registers = 32 if k.vw * k.elem_bytes >= 64 else 16
        self.acc = registers - 4

    def value(self, rng: random.Random, name: str, s: dict):
        k = self.k
        if name == "nr":
            return k.vw * rng.randint(1, max(1, min(4, self.acc // max(1, s.get("mr", 1)),
                                                    -(-k.n // k.vw))))
        if name == "mr":
            nq = max(1, s.get("nr", k.vw) // k.vw)
            return rng.randint(1, max(1, min(14, self.acc // nq, k.m)))
        if name == "kc":
            return rng.choice([c for c in (32, 64, 96, 128, 192, 256, 320, 384, 512)
                               if c < k.k + 32] or [16])
        if name == "mc":
            mr = s.get("mr", 1)
            return mr * rng.randint(1, max(1, min(32, -(-k.m // mr))))
        if name == "nc":
            nr = s.get("nr", k.vw)
            return nr * rng.randint(1, max(1, min(64, -(-k.n // nr))))
        if name == "order":
            return rng.choice(["mn", "nm"])
        if name in ("pack_a", "pack_b"):
            return rng.random() < 0.5
        if name == "ku":
            return rng.choice([1, 2, 4, 8])
        if name == "pf":
            return rng.choice([0, 16, 32, 64])
        if name == "l2pf":
            return rng.choice([0, 1])
        return rng.choice(["bmn", "mn", "m", "n", *(["b"] if math.prod(k.batch) > 1 else [])])

    def complete(self, fixed: dict) -> dict | None:
        """The whole schedule around `fixed` (None when no valid one exists)."""
        k = self.k
        fixed = dict(fixed)
        if "mc" in fixed and "mr" in fixed:
            fixed["mc"] = -(-fixed["mc"] // fixed["mr"]) * fixed["mr"]
        if "nc" in fixed and "nr" in fixed:
            fixed["nc"] = -(-fixed["nc"] // fixed["nr"]) * fixed["nr"]
        try:
            s = choose_matmul_schedule(
                k.batch, k.m, k.n, k.k, vw=k.vw, elem_bytes=k.elem_bytes, threads=self.threads,
                l1_bytes=self.l1, l2_bytes=self.l2, b_constant=k.b_constant,
                a_constant=k.a_constant, a_trans=k.a_trans, b_trans=k.b_trans, conv=k.conv,
                pack_aliased_a=self.pack_aliased_a, l2_prefetch=self.l2_prefetch, ku=self.ku,
                fixed=fixed)
        except CompileError:
            return None
        return asdict(s)

    def random(self, rng: random.Random) -> dict | None:
        fixed: dict = {}
        for name in rng.sample(self.FIELDS, rng.randint(2, 6)):
            fixed[name] = self.value(rng, name, fixed)
        return self.complete(fixed)

    def mutate(self, rng: random.Random, parent: dict) -> dict | None:
        s = {f: parent[f] for f in self.FIELDS if f in parent}
        for name in rng.sample(self.FIELDS, rng.randint(1, 2)):
            s[name] = self.value(rng, name, s)
        return self.complete(s)


def _key(s: dict) -> str:
    return json.dumps(s, sort_keys=True)


# ------------------------------------------------------------------------------ measuring


class LocalMeasurer:
    """Candidates measured one at a time in a child process, each with a timeout."""

    def __init__(self, cores: list[int] | None = None, timeout_s: float = TIMEOUT_S):
        self.cores, self.timeout_s = cores, timeout_s
        self.proc: subprocess.Popen | None = None

    def _start(self) -> subprocess.Popen:
        env = {**os.environ, "AICC_CACHE": "0", "PYTHONPATH": os.pathsep.join(
            p for p in (_project_root(), os.environ.get("PYTHONPATH", "")) if p)}
        cores = self.cores
        pin = (lambda: os.sched_setaffinity(0, cores)) if cores else None
        return subprocess.Popen(WORKER, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True, env=env,
                                preexec_fn=pin)

    def measure(self, jobs: list[dict]) -> list[float | None]:
        out = []
        for job in jobs:
            if self.proc is None or self.proc.poll() is not None:
                self.proc = self._start()
            out.append(self._one(job))
        return out

    def _one(self, job: dict) -> float | None:
        proc = self.proc
        try:
            proc.stdin.write(json.dumps(job) + "\n")
            proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self.close()
            return None
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        ready = sel.select(self.timeout_s)
        sel.close()
        line = proc.stdout.readline() if ready else ""
        if not line:  # hung (timeout) or died: this candidate is discarded
            self.close()
            return None
        result = json.loads(line)
        return result.get("ms")

    def close(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


def _project_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))


class RayMeasurer:
    """One Ray actor per `threads` CPUs of the cluster (`ray.init()` locally, or
    $RAY_ADDRESS), each with a LocalMeasurer pinned to its cores; a batch of candidates is
    spread over the actors, each measuring one at a time."""

    def __init__(self, threads: int, timeout_s: float = TIMEOUT_S):
        try:
            import ray
        except ImportError:
            raise CompileError("tune='ray' needs Ray: pip install 'aicc[tune]'") from None
        self.ray = ray
        if not ray.is_initialized():
            ray.init(address=os.environ.get("RAY_ADDRESS") or None, include_dashboard=False,
                     log_to_driver=False, ignore_reinit_error=True)
        cpus = int(ray.cluster_resources().get("CPU", 1))
        slots = max(1, cpus // max(1, threads))
        actor = ray.remote(num_cpus=min(threads, cpus))(_MeasureActor)
        ncores = os.cpu_count() or 1
        self.actors = [actor.remote([(i * threads + c) % ncores for c in range(threads)],
                                    timeout_s) for i in range(slots)]

    def measure(self, jobs: list[dict]) -> list[float | None]:
        n = len(self.actors)
        parts = [jobs[i::n] for i in range(n)]
        done = self.ray.get([a.measure.remote(p) for a, p in zip(self.actors, parts) if p])
        out: list[float | None] = [None] * len(jobs)
        for i, times in enumerate(done):
            for j, t in enumerate(times):
                out[i + j * n] = t
        return out

    def close(self) -> None:
        for a in self.actors:
            self.ray.kill(a)


class _MeasureActor:
    def __init__(self, cores: list[int], timeout_s: float):
        self.m = LocalMeasurer(cores, timeout_s)

    def measure(self, jobs: list[dict]) -> list[float | None]:
        return self.m.measure(jobs)


# ------------------------------------------------------------------------------ search


def search(k: Kernel, space: Space, measurer, budget_s: float, options: CompileOptions, *,
           seed: int = 0, batch: int = 4, population: int = 8,
           max_candidates: int | None = None, strategy: str = "evolutionary") -> KernelResult:
    """The fastest schedule of `k` found within `budget_s` (and `max_candidates`);
    `strategy="random"` samples at random instead of mutating the best (for comparison)."""
    rng = random.Random(seed)
    limit = max_candidates or 1 << 30
    t0 = time.monotonic()
    times: dict[str, float] = {}
    schedules: dict[str, dict] = {}
    failed = 0

    def job(s: dict) -> dict:
        return {"module": k.module_text, "func": k.func_name, "schedule": s,
                "threads": options.threads or default_threads(),
                "target_cpu": options.target_cpu, "min_s": 0.1}

    def run(cands: list[dict]) -> None:
        nonlocal failed
        fresh = list({_key(c): c for c in cands if c is not None and _key(c) not in schedules}
                     .values())
        for c in fresh:
            schedules[_key(c)] = c
        for c, t in zip(fresh, measurer.measure([job(c) for c in fresh])):
            if t is None:
                failed += 1
            else:
                times[_key(c)] = t

    run([k.default])
    default_ms = times.get(_key(k.default))
    if default_ms is None:  # the default itself fails: nothing to compare against
        return KernelResult(k.signature, float("nan"), float("nan"), k.default, len(schedules),
                            time.monotonic() - t0, failed)
    run([space.random(rng) for _ in range(min(population, limit) - 1)])
    stale = 0
    while time.monotonic() - t0 < budget_s and stale < 3 and len(schedules) < limit:
        ranked = sorted(times, key=times.get)[:4]
        before = len(schedules)
        if strategy == "random":
            kids = [space.random(rng) for _ in range(batch + 1)]
        else:
            kids = [space.mutate(rng, schedules[rng.choice(ranked)]) for _ in range(batch)]
            kids += [space.random(rng)]  # some exploration in every generation
        run(kids[:limit - len(schedules)])
        stale = stale + 1 if len(schedules) == before else 0
    best = min(times, key=times.get)
    return KernelResult(k.signature, default_ms, times[best], schedules[best], len(schedules),
                        time.monotonic() - t0, failed)


def tune_module(module: ModuleOp, func_name: str, options: CompileOptions, *,
                workers: str = "local", budget_s: float | None = None,
                measurer=None, validate: bool = True) -> TuneReport:
    """Tune `module`'s kernels for `options` (cpu) and save the winners to the record."""
    from compiler.targets import get_target

    target = get_target("cpu")
    machine = target.machine(options)
    plain = replace(options, target_options={}, print_ir_after_all=None)
    t0 = time.monotonic()
    path = record_path(machine.key())
    known = load_record(path)
    kernels = find_kernels(module, func_name, plain, target)
    todo = [k for k in kernels if k.signature not in known]
    report = TuneReport(skipped=len(kernels) - len(todo), record=str(path))
    if not todo:
        report.seconds = time.monotonic() - t0
        return report
    threads = options.threads or default_threads()
    own = measurer is None
    if own:
        measurer = RayMeasurer(threads) if workers == "ray" else LocalMeasurer()
    batch = 4 * len(getattr(measurer, "actors", [0]))
    budget = float(budget_s if budget_s is not None else DEFAULT_BUDGET_S)
    winners: dict[str, dict] = {}
    defaults: dict[str, dict] = {}
    try:
        for i, k in enumerate(todo):
            left = budget - (time.monotonic() - t0)
            share = max(MIN_KERNEL_S, left / (len(todo) - i))
            r = search(k, Space(k, threads, machine), measurer, share, plain, seed=i,
                       batch=batch)
            report.kernels.append(r)
            if not math.isnan(r.best_ms):
                entry = {"schedule": r.schedule, "ms": round(r.best_ms, 5),
                         "default_ms": round(r.default_ms, 5), "measured": r.measured,
                         "search_s": round(r.seconds, 2), "found_on": k.origin}
                winners[k.signature] = entry
                defaults[k.signature] = {**entry, "schedule": k.default,
                                         "ms": round(r.default_ms, 5)}
        if winners and validate:
            winners = _validated(module, func_name, plain, machine, measurer, known, winners,
                                 defaults, report)
        if winners:
            save_kernels(machine.key(), winners)
    finally:
        if own:
            measurer.close()
    report.seconds = time.monotonic() - t0
    return report


def _validated(module: ModuleOp, func_name: str, options: CompileOptions, machine, measurer,
               known: dict, winners: dict, defaults: dict, report: TuneReport) -> dict:
    """The winners, checked in the whole model: a kernel measured alone can behave otherwise
    next to the others (caches, a fused epilogue). The whole model is timed with the record
    as it was and with the winners added; while it is not faster, the winner whose removal
    helps most goes back to the default schedule (recorded as such, so it is not searched
    again). The default keeps the last word: a tuned model is never slower than measured."""
    text = _stripped(module)

    def model_ms(kernels: dict) -> float:
        with tempfile.TemporaryDirectory(prefix="aicc-tune-") as d:
            if kernels:
                folder = Path(d) / "tuning"
                folder.mkdir()
                (folder / record_path(machine.key()).name).write_text(json.dumps(
                    {"format": 1, "machine": machine.key(), "kernels": kernels}))
            job = {"module": text, "func": func_name, "schedule": None, "cache_dir": d,
                   "threads": options.threads or default_threads(),
                   "target_cpu": options.target_cpu, "min_s": 0.3}
            times = [t for t in measurer.measure([job, job]) if t is not None]
        return min(times) if times else float("inf")

    base = model_ms(known)
    chosen = dict(winners)
    best = model_ms({**known, **chosen})
    while chosen and best >= base:
        trials = {sig: model_ms({**known, **{s: e for s, e in chosen.items() if s != sig}})
                  for sig in chosen}
        sig = min(trials, key=trials.get)
        del chosen[sig]
        best = min(trials[sig], base) if chosen else base
    report.model_default_ms, report.model_tuned_ms = base, min(best, base)
    report.reverted = sorted(set(winners) - set(chosen))
    return {**{s: defaults[s] for s in winners if s not in chosen}, **chosen}


__all__ = ["Kernel", "KernelResult", "LocalMeasurer", "RayMeasurer", "Space", "TuneReport",
           "find_kernels", "search", "tune_module"]
