"""The report tells the truth (issue 10 §4): peak GPU memory, per-modality latency, a soak verdict that includes
the SLA, unbracketed knees, ties, client-bound windows, a shell-quoted launch command with its caveats, and a
setup section written for people. Every study here is real (virtual driver, real SQLite store)."""

from __future__ import annotations

import re
import shlex
import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from sweep.analysis.soak import judge
from sweep.profile import Soak, load_profile
from sweep.report.document import write_report
from sweep.report.winner import launch_command, shape_only
from sweep.store import Store, StoredRequestRow
from sweep.study.orchestrator import KneeRun, Orchestrator
from sweep.views.context import study_context

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "profiles" / "smoke.yaml"
MEDIA = {"image_width": 64, "image_height": 64, "video_frames": 2, "video_width": 32, "video_height": 32}


def _knee(tmp: Path, overrides: dict[str, Any], name: str = "t") -> KneeRun:
    prof = load_profile(SMOKE, overrides)
    return Orchestrator(prof, f"sqlite:///{tmp / 'r.db'}", tmp / "out", driver="virtual").knee(name)


def _rerender(tmp: Path, run: KneeRun, out: Path) -> tuple[str, str]:
    files = write_report(study_context(Store(f"sqlite:///{tmp / 'r.db'}"), run.study_id), out)
    assert files.html is not None
    return files.markdown.read_text(), files.html.read_text()


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, KneeRun]:
    tmp = tmp_path_factory.mktemp("truth")
    return tmp, _knee(tmp, {"search.space": {"max_running_requests": [4, 8], "mem_fraction_static": [0.85]}})


def _table_rows(md: str, header_start: str) -> list[list[str]]:
    lines = md.splitlines()
    i = next(i for i, ln in enumerate(lines) if ln.startswith(header_start))
    rows = []
    for ln in lines[i:]:
        if not ln.startswith("|"):
            break
        rows.append([c.strip() for c in ln.strip().strip("|").split("|")])
    return [rows[0], *rows[2:]]


@pytest.mark.integration
def test_peak_gpu_memory_is_a_column_of_every_step_and_a_plot_panel(smoke: tuple[Path, KneeRun], tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    tmp, run = smoke
    md, html = run.report.markdown.read_text(), run.report.html.read_text()  # type: ignore[union-attr]
    rows = _table_rows(md, "| config | phase | concurrency")
    col = rows[0].index("peak GPU mem (GiB)")
    stored = sqlite3.connect(tmp / "r.db").execute(
        "SELECT peak_gpu_mem_mib FROM runs WHERE status = 'completed' ORDER BY server_config_id, concurrency")
    want = [f"{v / 1024:,.1f}" for (v,) in stored]
    assert want and [r[col] for r in rows[1:]] == want
    assert "<th>peak GPU mem (GiB)</th>" in html
    from matplotlib.figure import Figure

    from sweep.report.document import _plots

    seen: list[str] = []
    orig = Figure.savefig

    def spy(fig: Figure, *a: Any, **k: Any) -> Any:
        seen.extend(ax.get_title() for ax in fig.axes)
        return orig(fig, *a, **k)

    monkeypatch.setattr(Figure, "savefig", spy)
    _plots(study_context(Store(f"sqlite:///{tmp / 'r.db'}"), run.study_id), tmp_path)
    assert "peak GPU memory (GiB)" in seen


@pytest.mark.integration
def test_a_knee_at_the_top_of_the_ladder_says_extend_it(smoke: tuple[Path, KneeRun]) -> None:
    _, run = smoke
    md, html = run.report.markdown.read_text(), run.report.html.read_text()  # type: ignore[union-attr]
    # smoke's ladder [2, 4, 8] never flattens on the simulator: every knee is its top step
    assert "8 (top of ladder: not bracketed)" in md
    assert "**Not bracketed**" in md and "extend the ladder" in md.lower()
    assert "<b>Not bracketed</b>" in html


@pytest.mark.integration
def test_a_knee_below_the_top_is_bracketed(tmp_path: Path) -> None:
    # a TPOT bound the top step misses: the knee is one below it, and the failing step above brackets it
    run = _knee(tmp_path, {"search.space": {"max_running_requests": [4]}, "sla.ttft_ms": 150})
    md = run.report.markdown.read_text()
    winner = run.winner
    assert winner is not None and winner.knee.concurrency < 8, md
    assert "not bracketed" not in md.lower()


@pytest.mark.integration
def test_a_coupled_ladder_is_bracketed_as_one_ladder(tmp_path: Path) -> None:
    # coupled mode launches one configuration per step (mrr = c): only the top step's is unbracketed
    run = _knee(tmp_path, {"search.mode": "coupled", "search.space": {"max_running_requests": [4]}})
    md = run.report.markdown.read_text()
    rows = _table_rows(md, "| config | status | phase | knee concurrency")
    knees = [r[3] for r in rows[1:] if r[3] != "—"]
    assert len(knees) == 3 and knees.count("8 (top of ladder: not bracketed)") == 1, md


@pytest.mark.integration
def test_configurations_whose_intervals_overlap_the_winners_are_named_ties(tmp_path: Path) -> None:
    # mrr 8 and 16 behave the same up to c=8: their knees tie and the report must say so
    run = _knee(tmp_path, {"search.space": {"max_running_requests": [8, 16], "mem_fraction_static": [0.85]}})
    md = run.report.markdown.read_text()
    tie = re.search(r"> \*\*Ties\*\*: (.+)", md)
    assert tie is not None, md
    loser = "mrr=16 mem=0.85" if "**mrr=8 mem=0.85**" in md else "mrr=8 mem=0.85"
    assert loser in tie.group(1) and "overlaps the winner's" in tie.group(1)


@pytest.mark.integration
def test_distinct_configurations_are_not_ties(smoke: tuple[Path, KneeRun]) -> None:
    _, run = smoke  # mrr=4 saturates at c=8 (669 vs 944 tok/s): clearly behind
    assert "**Ties**" not in run.report.markdown.read_text()


@pytest.mark.integration
def test_a_client_bound_window_is_flagged(smoke: tuple[Path, KneeRun], tmp_path: Path) -> None:
    tmp, run = smoke
    assert run.winner is not None
    db = sqlite3.connect(tmp / "r.db")
    (rid,) = db.execute("SELECT id FROM runs WHERE status = 'completed' AND server_config_id = ? AND "
                        "concurrency = ?", (run.winner.id, run.winner.knee.concurrency)).fetchone()
    assert not db.execute("SELECT count(*) FROM runs WHERE client_bound").fetchone()[0]
    assert "Client-bound" not in run.report.markdown.read_text()
    db.execute("UPDATE runs SET client_bound = 1 WHERE id = ?", (rid,))
    db.commit()
    try:
        md, html = _rerender(tmp, run, tmp_path)
    finally:
        db.execute("UPDATE runs SET client_bound = 0 WHERE id = ?", (rid,))
        db.commit()
    rows = _table_rows(md, "| config | phase | concurrency")
    col = rows[0].index("client-bound")
    assert [r[col] for r in rows[1:]].count("**yes**") == 1
    assert f"at c={run.winner.knee.concurrency}" in md and "> **Client-bound**:" in md
    # issue 28 §5: the flagged window is no longer the knee; the report says it was set aside
    assert f"> **Client-bound window set aside**: c={run.winner.knee.concurrency} (" in md
    assert "<b>Client-bound window set aside</b>" in html


def test_launch_command_is_shell_quoted_and_round_trips() -> None:
    cmd = launch_command("/models/my model's dir", {"max_running_requests": 8, "schedule_policy": "lpm"},
                         ["--load-format", "dummy", "--json-model-override-args", '{"a": 1}', "--trust-remote-code"])
    argv = shlex.split(cmd.replace("\\\n", " "))
    assert argv == ["python", "-m", "sglang.launch_server", "--model-path", "/models/my model's dir",
                    "--enable-metrics", "--max-running-requests", "8", "--schedule-policy", "lpm",
                    "--load-format", "dummy", "--json-model-override-args", '{"a": 1}', "--trust-remote-code"]
    assert "  --max-running-requests 8 \\\n" in cmd  # one flag and its value per line


def test_shape_only_folders_are_told_from_real_ones(tmp_path: Path) -> None:
    assert shape_only("models/llama3-8b-shape") and shape_only(str(ROOT / "models" / "qwen2.5-vl-7b-shape"))
    real = tmp_path / "real"
    real.mkdir()
    (real / "config.json").write_text("{}")
    assert shape_only(str(real))
    (real / "model-00001-of-00002.safetensors").write_bytes(b"x")
    assert not shape_only(str(real))
    assert not shape_only("meta-llama/Llama-3.1-8B-Instruct")  # a hub id: nothing to tell here


@pytest.mark.integration
def test_winner_command_warns_about_dummy_weights_and_shape_folder(smoke: tuple[Path, KneeRun]) -> None:
    _, run = smoke
    md, html = run.report.markdown.read_text(), run.report.html.read_text()  # type: ignore[union-attr]
    assert "`--load-format dummy`" in md and "random weights" in md
    assert "`models/llama3-8b-shape` is a shape-only folder" in md
    assert "random weights" in html and "shape-only folder" in html


@pytest.mark.integration
def test_setup_is_written_for_people(smoke: tuple[Path, KneeRun]) -> None:
    _, run = smoke
    md, html = run.report.markdown.read_text(), run.report.html.read_text()  # type: ignore[union-attr]
    setup = md.split("## Setup", 1)[1].split("\n## ", 1)[0]
    for raw in ("null", "{", '"kind"', "None"):
        assert raw not in setup, setup
    assert "text 100%; prompt length uniform 64–512 tokens; output length uniform 16–48 tokens" in setup
    assert "50% of requests start with one of 2 shared 64-token prefixes" in setup
    assert "closed loop" in setup and "ladder 2, 4, 8" in setup
    assert "TTFT P95 ≤ 1,000 ms, TPOT P95 ≤ 100 ms, errors ≤ 5.0%" in setup
    assert "warm-up 4 requests completed, measured 3 s, drain 5 s" in setup
    assert "TTFT P95 ≤ 1,000 ms" in html


@pytest.mark.integration
def test_unknown_environment_fields_read_unknown(smoke: tuple[Path, KneeRun], tmp_path: Path) -> None:
    tmp, run = smoke
    ctx = study_context(Store(f"sqlite:///{tmp / 'r.db'}"), run.study_id)
    ctx = replace(ctx, env=replace(ctx.env, sglang_version=None, gpu_name=None))
    md = write_report(ctx, tmp_path).markdown.read_text()
    setup = md.split("## Setup", 1)[1].split("\n## ", 1)[0]
    assert "SGLang version: unknown" in setup and "GPU: unknown;" in setup and "None" not in setup


def test_soak_judge_fails_on_a_missed_sla() -> None:
    v = judge([], Soak(), sla_failures="TTFT P95 3500 ms > 2000 ms")
    assert not v.passed and "SLA missed: TTFT P95 3500 ms > 2000 ms" in v.summary()
    assert judge([], Soak(), sla_failures="").passed


@pytest.mark.integration
def test_a_soak_that_misses_the_sla_is_reported_as_a_fail(tmp_path: Path) -> None:
    # one request in flight at 85% of the knee's rate: the client queue grows, TTFT P95 runs far past 1 s,
    # while the server's own queue, retractions and memory stay flat (the storm/leak checks all pass)
    run = _knee(tmp_path, {"search.space": {"max_running_requests": [8]}, "ladder": [2, 4, 8],
                           "soak": {"enabled": True, "duration_s": 6, "max_in_flight": 1}})
    db = sqlite3.connect(tmp_path / "r.db")
    passes, failures, reason = db.execute(
        "SELECT passes_sla, sla_failures, reason FROM runs WHERE phase = 'soak'").fetchone()
    assert not passes and "TTFT P95" in failures
    assert reason.startswith("soak FAIL") and "SLA missed" in reason
    md = run.report.markdown.read_text()
    verdict = next(ln for ln in md.splitlines() if ln.startswith("- **verdict**"))
    assert "soak FAIL" in verdict and "SLA missed: TTFT P95" in verdict
    soak_line = next(ln for ln in md.splitlines() if ln.startswith("- run ") and "TTFT P95" in ln)
    assert "(SLA ≤ 1.00 s)" in soak_line and "peak GPU memory" in soak_line
    assert "SLA missed: TTFT P95" in run.report.html.read_text()  # type: ignore[union-attr]


@pytest.mark.integration
def test_mixed_workload_has_a_per_modality_table(tmp_path: Path) -> None:
    run = _knee(tmp_path, {"search.space": {"max_running_requests": [8]}, "ladder": [2, 4],
                           "workload.mix": {"text": 0.5, "image": 0.3, "video": 0.2}, "workload.media": MEDIA,
                           "server.model_path": "models/qwen2.5-vl-7b-shape"})
    md, html = run.report.markdown.read_text(), run.report.html.read_text()  # type: ignore[union-attr]
    assert "## Per modality (winner)" in md and "<h2>Per modality (winner)</h2>" in html
    rows = _table_rows(md, "| phase | concurrency | modality")
    head = rows[0]
    by = {(r[1], r[2]): dict(zip(head, r, strict=True)) for r in rows[1:]}
    assert [r[2] for r in rows[1:4]] == ["text", "image", "video"]
    db = sqlite3.connect(tmp_path / "r.db")
    for (conc, modality), row in by.items():
        c = int(conc.split()[0])
        n, p50 = _stored(db, c, modality)
        assert int(row["requests"].replace(",", "")) == n > 0
        assert row["TTFT P50 (s)"] == f"{p50 / 1000:,.2f}"
    assert any(k[0] == "4 (knee)" for k in by)


def _stored(db: sqlite3.Connection, concurrency: int, modality: str) -> tuple[int, float]:
    """Measured, successful requests of one modality at one step, and their TTFT P50, straight from SQL."""
    import numpy as np

    rows = db.execute(
        "SELECT q.ttft_ms FROM requests q JOIN runs r ON r.id = q.run_id WHERE r.concurrency = ? AND "
        "q.modality = ? AND NOT q.warmup AND q.error IS NULL AND q.e2e_ms IS NOT NULL AND q.scheduled_at >= 0 "
        "AND q.scheduled_at < r.window_s AND r.phase = 'final'", (concurrency, modality)).fetchall()
    return len(rows), float(np.percentile([t for (t,) in rows], 50))


@pytest.mark.integration
def test_text_only_workload_has_no_per_modality_table(smoke: tuple[Path, KneeRun]) -> None:
    assert "Per modality" not in smoke[1].report.markdown.read_text()


def _req(modality: str, at: float, ttft: float | None, warmup: bool = False,
         error: str | None = None) -> StoredRequestRow:
    return StoredRequestRow.from_row({"idx": 0, "sent_at": at, "modality": modality, "warmup": warmup,
                                      "scheduled_at": at, "error": error, "ttft_ms": ttft,
                                      "tpot_ms": None if ttft is None else ttft / 10,
                                      "e2e_ms": None if error else (ttft or 0) + 100})


def test_modality_stats_count_what_measure_counts() -> None:
    from sweep.views.study import modality_stats

    rows = [_req("image", 0.5, 300.0), _req("image", 1.0, 500.0), _req("text", 0.1, 40.0),
            _req("text", 0.2, 9999.0, warmup=True), _req("text", 10.0, 9999.0),  # warm-up; sent after the window
            _req("image", 1.5, None, error="HTTP 500")]
    text, image = modality_stats(rows, window_s=5.0)
    assert (text.modality, text.count, text.errors, text.ttft_p50_ms) == ("text", 1, 0, 40.0)
    assert (image.modality, image.count, image.errors) == ("image", 2, 1)
    assert image.ttft_p50_ms == 400.0 and image.ttft_p99_ms == 498.0 and image.e2e_p50_ms == 500.0


def test_a_tie_is_a_configuration_the_winner_beats_with_probability_below_0_9() -> None:
    """Issue 19 §4: the CI-overlap rule became a number: P(the winner's knee goodput is higher) by bootstrap;
    below 0.9 the two are tied. A winner without an interval ties with nothing."""
    from sweep.analysis.knee import ConfigKnee
    from sweep.analysis.significance import win_probabilities
    from sweep.views.study import tied_with

    def knee(g: float, lo: float | None, hi: float | None) -> ConfigKnee:
        return ConfigKnee(8, g, g / 100, lo, hi, "final", "test")

    pool = {1: knee(1000, 950, 1050), 2: knee(990, 940, 1040), 3: knee(700, 650, 750), 4: knee(900, None, None)}
    p = win_probabilities(1, pool)
    assert 0.5 < p[2] < 0.9 and p[3] > 0.99
    assert tied_with(1, pool) == (2,)
    assert tied_with(4, pool) == () and tied_with(None, pool) == ()
