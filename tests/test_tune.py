"""Autotuning (compiler/targets/cpu/tune.py, tuning_record.py, compiler/tune_worker.py): kernels
found per distinct signature, candidates that are always valid schedules, a search that beats
random sampling, measurements in a child process where a crash or a hang costs one candidate,
a record that later compiles use (`m.stats["tuned"]`), and the same search over a local Ray
cluster. Timing-free: real measurements only run with tiny budgets, and no test asserts a
time; the search itself is checked against a synthetic cost model."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import compiler
from compiler.stages import CompileOptions
from compiler.targets import get_target
from compiler.targets.cpu import tune, tuning_record
from compiler.targets.cpu.schedule import MatmulSchedule

ROOT = Path(__file__).resolve().parents[1]
rng = np.random.default_rng(11)
W1 = rng.standard_normal((96, 80)).astype(np.float32)
W2 = rng.standard_normal((80, 80)).astype(np.float32)
W3 = rng.standard_normal((80, 80)).astype(np.float32)
X = rng.standard_normal((33, 96)).astype(np.float32)


def mlp(x):
    h = np.maximum(x @ W1, 0.0)
    h = np.maximum(h @ W2, 0.0)  # two layers of one shape: one kernel to tune
    return h @ W3


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("AICC_CACHE_DIR", str(tmp_path))
    return tmp_path


def kernels_of(fn, inputs, threads=1):
    from frontends.numpy_trace import trace

    program = trace(fn, inputs, name="main")
    return tune.find_kernels(program.module, "main", CompileOptions(threads=threads),
                             get_target("cpu"))


class CostModel:
    """A synthetic measurer: a smooth cost with its optimum away from the heuristic's choice."""

    def __init__(self, model_gain: float = 0.1):
        self.calls = 0
        self.model_gain = model_gain  # whole-model time saved per tuned kernel (< 0: lost)
        self.model_jobs = 0

    @staticmethod
    def cost(s: dict) -> float:
        return (1.0 + abs(s["mr"] - 3) + 1.5 * abs(s["nr"] // s["vw"] - 1)
                + abs(math.log2(s["kc"] / 64)) + (0.0 if s["order"] == "nm" else 0.7)
                + (0.3 if s["pack_a"] else 0.0) + 0.2 * abs(math.log2(s["mc"] / (4 * s["mr"])))
                + (0.0 if s["ku"] == 2 else 0.25))

    def model(self, job) -> float:
        """A whole model's time: faster (or slower) by `model_gain` per tuned kernel."""
        self.model_jobs += 1
        records = list(Path(job["cache_dir"]).glob("tuning/*.json"))
        kernels = json.loads(records[0].read_text())["kernels"] if records else {}
        tuned = sum(1 for e in kernels.values() if e["ms"] < e["default_ms"])
        return 10.0 - self.model_gain * tuned

    def measure(self, jobs):
        self.calls += len(jobs)
        return [self.model(j) if j["schedule"] is None else self.cost(j["schedule"])
                for j in jobs]

    def close(self):
        pass


def test_kernels_are_found_once_per_signature():
    ks = kernels_of(mlp, (X,))
    assert [(k.m, k.n, k.k) for k in ks] == [(33, 80, 96), (33, 80, 80)]
    assert all(k.b_constant and not k.conv for k in ks)
    assert ks[0].signature == "b1_m33_n80_k96_c_e4_t1"
    MatmulSchedule.from_dict(ks[0].default)  # the heuristic's schedule, whole


@pytest.mark.parametrize("vw", [8, 16])  # AVX2 and AVX-512 tiles, whatever this host has
def test_every_candidate_is_a_valid_schedule(vw):
    from compiler.targets.cpu.machine import cpu_machine

    import random

    base = kernels_of(mlp, (X,))[0]
    for shape in ((1, 7, 129), (33, 80, 96), (129, 1, 7), (300, 513, 64)):
        k = replace(base, m=shape[0], n=shape[1], k=shape[2], vw=vw)
        space = tune.Space(k, 2, cpu_machine())
        r = random.Random(0)
        made = [space.random(r) for _ in range(40)]
        made += [space.mutate(r, s) for s in made if s is not None]
        good = [s for s in made if s is not None]
        assert len(good) > 40
        for s in good:
            assert MatmulSchedule.from_dict(s).vw == vw


def test_the_search_beats_random_sampling_and_never_loses_to_the_default():
    from compiler.targets.cpu.machine import cpu_machine

    k = kernels_of(mlp, (X,))[0]
    space = tune.Space(k, 1, cpu_machine())
    options = CompileOptions(threads=1)
    evo, rnd = [], []
    for seed in range(6):
        for strategy, out in (("evolutionary", evo), ("random", rnd)):
            r = tune.search(k, space, CostModel(), 1e9, options, seed=seed, max_candidates=48,
                            strategy=strategy)
            assert r.measured <= 48
            assert r.best_ms <= r.default_ms == CostModel.cost(k.default)
            out.append(r.best_ms)
    assert np.mean(evo) < np.mean(rnd), (evo, rnd)


def test_the_record_merges_keeps_the_faster_and_survives_damage(store):
    key = "test-cpu:+x"
    s = kernels_of(mlp, (X,))[0].default
    tuning_record.save_kernels(key, {"a": {"schedule": s, "ms": 2.0}})
    tuning_record.save_kernels(key, {"a": {"schedule": s, "ms": 3.0}, "b": {"schedule": s,
                                                                          "ms": 1.0}})
    path = tuning_record.record_path(key)
    kernels = tuning_record.load_record(path)
    assert {k: v["ms"] for k, v in kernels.items()} == {"a": 2.0, "b": 1.0}
    digest = tuning_record.record_digest(key)
    path.write_text(path.read_text()[:40])  # truncated
    assert tuning_record.load_record(path) == {}
    assert tuning_record.record_digest(key) != digest


def test_a_crashing_or_hanging_candidate_is_discarded_not_fatal():
    k = kernels_of(mlp, (X,))[1]
    job = {"module": k.module_text, "func": k.func_name, "schedule": k.default, "threads": 1,
           "min_s": 0.0}
    m = tune.LocalMeasurer()
    try:
        crash, ok = m.measure([{**job, "crash": True}, job])
        assert crash is None and ok is not None and ok > 0
        bad = m.measure([{**job, "schedule": {**k.default, "mr": 0}}])  # does not compile
        assert bad == [None]
        m.timeout_s = 0.001  # hangs, as far as the tuner can tell
        assert m.measure([job]) == [None]
        m.timeout_s = 60
        assert m.measure([job])[0] > 0  # a new process took over
    finally:
        m.close()


def test_tuned_schedules_are_recorded_and_used_by_later_compiles(store, monkeypatch):
    monkeypatch.setenv("AICC_CACHE", "1")
    cost = CostModel()
    monkeypatch.setattr(tune, "LocalMeasurer", lambda *a, **k: cost)
    before = compiler.compile(mlp, (X,), threads=1)
    assert before.stats["tuned"] == 0
    tuned = compiler.compile(mlp, (X,), threads=1, tune=True, tune_budget=2)
    report = tuned.tune_report
    assert len(report.kernels) == 2 and cost.calls > 2
    assert all(r.best_ms <= r.default_ms for r in report.kernels)
    assert report.reverted == [] and report.model_tuned_ms < report.model_default_ms
    assert tuned.stats["tuned"] == 3 and tuned.stats["cache"] == "stored"  # a new key
    record = json.loads(Path(report.record).read_text())
    assert set(record["kernels"]) == {r.signature for r in report.kernels}
    # a later compile without tune=True uses the record, and a cache hit keeps the count
    again = compiler.compile(mlp, (X,), threads=1)
    assert again.stats["tuned"] == 3 and again.stats["cache"] == "hit"
    np.testing.assert_allclose(again(X), mlp(X.astype(np.float64)), rtol=1e-4, atol=1e-3)
    assert "aicc.tuned" in compiler.compile(mlp, (X,), threads=1).ir("linalg")
    # tuning again finds everything recorded: nothing measured
    calls = cost.calls
    assert compiler.compile(mlp, (X,), threads=1, tune=True).tune_report.skipped == 2
    assert cost.calls == calls


def test_winners_that_slow_the_whole_model_go_back_to_the_default(store, monkeypatch):
    cost = CostModel(model_gain=-0.1)  # every tuned kernel makes the model slower
    monkeypatch.setattr(tune, "LocalMeasurer", lambda *a, **k: cost)
    m = compiler.compile(mlp, (X,), threads=1, tune=True, tune_budget=2)
    report = m.tune_report
    assert cost.model_jobs > 2
    assert sorted(report.reverted) == sorted(r.signature for r in report.kernels)
    assert report.model_tuned_ms == report.model_default_ms
    kernels = tuning_record.load_record(Path(report.record))
    for r in report.kernels:  # recorded with the default schedule: not searched again
        assert kernels[r.signature]["schedule"] == next(
            k.default for k in kernels_of(mlp, (X,)) if k.signature == r.signature)
    assert "reverted: slower in the model" in report.table()


def test_a_real_search_in_a_child_process(store):
    x = rng.standard_normal((7, 129)).astype(np.float32)
    w = rng.standard_normal((129, 33)).astype(np.float32)
    m = compiler.compile(lambda a: a @ w, (x,), threads=1, tune=True, tune_budget=1)
    (r,) = m.tune_report.kernels
    assert r.measured >= 2 and r.failed == 0 and 0 < r.best_ms <= r.default_ms
    assert m.stats["tuned"] == 1
    np.testing.assert_allclose(m(x), x.astype(np.float64) @ w, rtol=1e-4, atol=1e-4)


def test_tuning_on_a_local_ray_cluster(store):
    ray = pytest.importorskip("ray")
    try:
        x = rng.standard_normal((9, 64)).astype(np.float32)
        w = rng.standard_normal((64, 40)).astype(np.float32)
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        m = compiler.compile(lambda a: np.maximum(a @ w, 0.0), (x,), threads=1, tune="ray",
                             tune_budget=1)
        (r,) = m.tune_report.kernels
        assert r.measured >= 2 and r.best_ms <= r.default_ms and m.stats["tuned"] == 1
    finally:
        ray.shutdown()


def test_cli_tune_and_its_errors(store):
    run = subprocess.run([sys.executable, "-m", "tools.aicc", "examples/mlp.py", "--tune",
                          "--tune-budget", "1", "--threads", "1", "--repeat", "1"],
                         cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("tuned 2 kernel(s) in ")
    assert "tuned schedules in this compile: 2" in run.stdout
    bad = subprocess.run([sys.executable, "-m", "tools.aicc", "examples/mlp.py", "--tune",
                          "--target", "cuda-emu"], cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode == 1
    assert bad.stderr.strip().startswith("aicc: error: target 'cuda-emu' takes no option(s) tune")
