"""Issue 31 §1: a trace replays at its own timing. A FAST'25 Mooncake-format trace's entries are sent in file order
at their recorded offsets (its "timestamp" in ms), its hash-id blocks shared as the trace shares them; the ladder is
a time-scale ladder (arrival.scales: s x the recorded rate), refined like a rate ladder, and the answer says how far
the winner holds the trace. Before, `arrival: {kind: trace}` refused a Mooncake file ("not a timestamp") and the
entries were shuffled by the seed."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from sweep.cli import main
from sweep.core.errors import ProfileError
from sweep.profile import load_profile
from sweep.profile.trace import burstiness, load_trace
from sweep.workload.requests import workload_parts

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "tests" / "data" / "datasets" / "mooncake_trace.jsonl"  # synthetic, Mooncake format (tools/)
SMOKE = ROOT / "profiles" / "smoke.yaml"


def _recorded() -> tuple[np.ndarray, list[int]]:
    """The trace's own offsets (s, from its first entry) and input lengths, read here without sweep."""
    rows = [json.loads(line) for line in TRACE.read_text().splitlines() if line.strip()]
    t = np.asarray([r["timestamp"] for r in rows], dtype=float) / 1000.0
    return t - t[0], [r["input_length"] for r in rows]


def _profile(folder: Path, arrival: str, dataset: dict[str, object] | None = None) -> Path:
    shutil.copy(TRACE, folder / "trace.jsonl")
    ds = {"path": "trace.jsonl", **(dataset or {})}
    text = SMOKE.read_text().replace("workload:\n", "workload:\n  dataset: " + json.dumps(ds) + "\n", 1)
    text = text.replace("arrival: {kind: closed}", f"arrival: {arrival}")
    text = text.replace("shared_prefix: {groups: 2, length: 64, share: 0.5}", "shared_prefix: {groups: 0}")
    path = folder / "mine.yaml"
    path.write_text(text)
    return path


def test_a_mooncake_trace_file_gives_its_timestamps_in_seconds() -> None:
    t, _ = _recorded()
    assert np.allclose(load_trace(TRACE), t)
    assert np.allclose(load_trace(TRACE, 0.5), t * 0.5)
    cut = load_trace(TRACE, 1.0, start_s=30.0)
    assert cut[0] == 0.0 and np.allclose(cut, t[t >= 30.0] - t[t >= 30.0][0])


def test_the_dataset_of_a_trace_keeps_its_file_order_from_its_start(tmp_path: Path) -> None:
    t, lengths = _recorded()
    prof = load_profile(_profile(tmp_path, "{kind: trace, scales: [1, 2, 4], max_in_flight: 64}", {"start_s": 30}))
    parts = workload_parts(prof.workload, prof.folder)
    assert parts.items is not None
    first = int(np.searchsorted(t, 30.0))
    assert [len(it.input_ids) for it in parts.items] == lengths[first:]  # file order, not a seeded shuffle
    assert parts.items[0].send_at == 0.0
    assert prof.ladder_rates == pytest.approx([s * (len(t) - 1 - first) / (t[-1] - t[first]) for s in (1, 2, 4)])


@pytest.mark.parametrize("driver", ["virtual", "http"])
def test_a_trace_replays_in_order_at_its_offsets_and_scales(tmp_path: Path, driver: str) -> None:
    """Each window sends the trace's next entries in file order, entry k at (t_k - t_first) / scale after the
    window's first send (scheduled exactly; sent within one engine step on the virtual clock, 50 ms on the simulated
    server over HTTP), its prompt the entry's input_length."""
    t, lengths = _recorded()
    prof = _profile(tmp_path, "{kind: trace, scales: [1, 2, 4], max_in_flight: 256}")
    db = tmp_path / "r.db"
    rc = main(["ladder", "--profile", str(prof), "--db", str(db), "--out", str(tmp_path / "out"), "--launcher", "sim",
               "--driver", driver, "--set", "ladder=[1,2]", "--set", "arrival.scales=[1,2]", "--set", "window.warmup_requests=2",
               "--set", "window.warmup_seconds=0", "--set", "window.measure_seconds=8",
               "--set", "window.drain_seconds=20", "--config", "max_running_requests=32"])
    assert rc == 0
    with sqlite3.connect(db) as conn:
        runs = conn.execute("SELECT id, offered_rps FROM runs ORDER BY id").fetchall()
        assert len(runs) == 2
        rate = (len(t) - 1) / t[-1]
        assert [r[1] for r in runs] == pytest.approx([rate, 2 * rate])
        end = 0
        tol = 0.25 if driver == "virtual" else 0.05  # the virtual clock sends at the engine's next step boundary
        for (run_id, _), scale in zip(runs, (1, 2), strict=True):
            rows = conn.execute("SELECT idx, scheduled_at, sent_at, sent_prompt_tokens FROM requests WHERE run_id = ? "
                                "AND error IS NULL ORDER BY scheduled_at, idx", (run_id,)).fetchall()
            idx = [r[0] for r in rows]
            assert idx == sorted(idx) and idx[0] == end  # in trace order, from where the last window stopped
            sched = np.asarray([r[1] for r in rows])
            assert np.allclose(sched - sched[0], (t[idx] - t[idx[0]]) / scale, atol=1e-6)
            sent = np.asarray([r[2] for r in rows])
            assert np.max(np.abs(sent - sched)) < tol  # sent at its time (the cap of 256 is never reached)
            assert [r[3] for r in rows] == [lengths[i] for i in idx]
            end = idx[-1] + 1


@pytest.mark.integration
def test_a_study_on_a_trace_ends_with_a_winner_and_says_how_far_it_holds(tmp_path: Path) -> None:
    out = tmp_path / "out"
    rc = main(["knee", "--profile", "trace-replay", "--db", str(tmp_path / "r.db"), "--out", str(out),
               "--launcher", "sim", "--set", "window.measure_seconds=10", "--set", "window.drain_seconds=5"])
    assert rc == 0
    report = next(out.glob("*/report.md")).read_text()
    assert "- **Winner**: " in report and "No winner" not in report
    assert "- **Trace**: holds the trace up to " in report and "× its recorded rate" in report
    assert "recorded 1.90 req/s" in report
    assert "| the trace | | 1.90 req/s | 1.00× | 1139 | 1.83 | 2.63 |" in report
    with sqlite3.connect(tmp_path / "r.db") as conn:
        hit = conn.execute("SELECT min(cache_hit_rate) FROM runs WHERE status = 'completed'").fetchone()[0]
    assert hit > 0.4  # the trace's shared hash blocks are shared prefixes on the server


def test_the_trace_burstiness_is_its_own() -> None:
    even = burstiness(np.arange(100) * 0.5)
    assert even.gap_cv == pytest.approx(0.0) and even.peak_ratio == pytest.approx(1.0, abs=0.05)
    bursty = burstiness(np.concatenate([np.arange(50) * 0.01, 100 + np.arange(50) * 0.01]))
    assert bursty.gap_cv is not None and bursty.gap_cv > 5 and (bursty.peak_ratio or 0) > 5


@pytest.mark.parametrize(("arrival", "dataset", "message"), [
    ("{kind: trace, scales: [1, 2]}", True, "arrival.scales has 2 values for a ladder of 3 steps"),
    ("{kind: trace, scales: [2, 1, 4]}", True, "arrival.scales must be strictly ascending"),
    ("{kind: trace}", False, "a trace without a path replays the workload dataset's send times"),
])
def test_a_trace_ladder_that_cannot_run_is_refused(tmp_path: Path, arrival: str, dataset: bool, message: str) -> None:
    path = _profile(tmp_path, arrival)
    if not dataset:
        path.write_text(path.read_text().replace('  dataset: {"path": "trace.jsonl"}\n', ""))
    with pytest.raises(ProfileError, match=message):
        load_profile(path)


def test_an_openai_log_with_a_time_field_is_a_trace_in_file_order(tmp_path: Path) -> None:
    """A chat-completions request log stamped with "created" (Unix seconds) replays at its own times: its entries
    keep file order, their send times counted from the first."""
    rows = [{"created": 1_700_000_000 + t, "messages": [{"role": "user", "content": f"question {i} " * (i + 1)}],
             "max_tokens": 8} for i, t in enumerate((0.0, 0.5, 0.5, 2.25, 7.0))]
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert np.allclose(load_trace(log), [0.0, 0.5, 0.5, 2.25, 7.0])
    prof = load_profile(_profile(tmp_path, "{kind: trace, scales: [1, 2, 4]}"),
                        {"workload.dataset.path": str(log), "workload.dataset.format": "openai"})
    parts = workload_parts(prof.workload, prof.folder)
    assert parts.items is not None
    assert [it.send_at for it in parts.items] == [0.0, 0.5, 0.5, 2.25, 7.0]
    assert [len(it.input_ids) for it in parts.items] == [2 * (i + 1) for i in range(5)]


def test_a_scale_step_and_a_bisected_rate_replay_the_trace_at_that_rate(tmp_path: Path) -> None:
    """Step i of a time-scale ladder offers scales[i] x the recorded rate, and a refinement window's bisected rate
    (req/s) is the trace at rate / recorded: its gaps divided by that, its order kept."""
    from sweep.ladder.step_verdicts import offered_rate
    from sweep.profile import TraceArrival

    t, _ = _recorded()
    rec = (len(t) - 1) / t[-1]
    prof = load_profile(_profile(tmp_path, "{kind: trace, scales: [1, 2, 4]}"))
    top = prof.step_arrival(prof.ladder[2])
    assert isinstance(top, TraceArrival) and top.of_dataset
    assert top.mean_rate == pytest.approx(4 * rec) and offered_rate(prof, top) == pytest.approx(4 * rec)
    assert np.allclose(top.offsets(0.0), t / 4)
    mid = prof.rate_arrival(3 * rec)
    assert isinstance(mid, TraceArrival) and mid.mean_rate == pytest.approx(3 * rec)
    assert np.allclose(mid.offsets(0.0), t / 3)
    assert prof.ladder_rates == pytest.approx([rec, 2 * rec, 4 * rec])


def test_the_report_says_a_time_scale_ladder_replays_the_datasets_own_times() -> None:
    """The setup line of a trace replayed from its dataset (no arrival.path) named the trace `None` and gave the
    ladder's indices only (the H200 trace stage's report: "open loop replaying trace `None`")."""
    from sweep.profile.arrival import TraceArrival
    from sweep.report.setup import arrival_text

    text = arrival_text(TraceArrival(kind="trace", scales=[1, 2, 4]))
    assert "None" not in text and "the dataset's own send times" in text and "1×, 2×, 4× its recorded rate" in text


def test_an_unbracketed_time_scale_ladder_says_to_extend_its_scales() -> None:
    """A trace's time-scale ladder that passes its top step is told to extend arrival.scales (it said arrival.rates,
    a field such a profile does not use)."""
    from sweep.analysis.ladder_steps import LadderStep
    from sweep.analysis.run_stats import RunStats
    from sweep.ladder.refine import refine
    from sweep.profile import SLA, Refine

    def step(run_id: int, rate: float) -> LadderStep:
        stats = RunStats.from_row({"n_started": 100, "n_completed": 100, "goodput_tps": 100 * rate,
                                   "output_tps": 100 * rate, "passes_sla": True, "client_bound": False})
        return LadderStep(run_id, run_id, "final", stats, offered_rps=rate)

    steps = [step(1, 1.9), step(2, 3.8), step(3, 7.6)]
    r = refine(Refine(enabled=True), SLA(), steps, lambda _load: ([], None), lambda _: [], True,
               "arrival.scales (the trace's time scales)")
    assert "extend arrival.scales (the trace's time scales) past 7.6 req/s" in r.note, r.note
