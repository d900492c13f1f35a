"""Reports: the standalone HTML beside report.md, the study history plot, simulated labels, the contract."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest

from sweep.profile import load_profile
from sweep.report.html import markdown_to_html
from sweep.study.orchestrator import KneeRun, Orchestrator

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "profiles" / "smoke.yaml"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> KneeRun:
    tmp = tmp_path_factory.mktemp("rep")
    prof = load_profile(SMOKE, {"search.space": {"max_running_requests": [4, 8], "mem_fraction_static": [0.05, 0.85]}})
    return Orchestrator(prof, f"sqlite:///{tmp / 'r.db'}", tmp / "out", driver="virtual").knee("rep")


@pytest.mark.integration
def test_html_is_standalone_with_every_plot_inlined(run: KneeRun) -> None:
    assert run.report.html is not None
    html = run.report.html.read_text()
    assert html.startswith("<!doctype html>")
    imgs = re.findall(r'<img alt="([^"]+)" src="data:image/png;base64,([^"]+)"', html)
    assert {a for a, _ in imgs} == {"ladder", "pareto", "history"}
    for _, data in imgs:
        assert base64.b64decode(data).startswith(b"\x89PNG")
    assert 'src="ladder.png"' not in html  # nothing refers to a file beside it
    assert "SIMULATED" in html and "<table>" in html and "python -m sglang.launch_server" in html


@pytest.mark.integration
def test_history_plot_and_markdown_beside_it(run: KneeRun) -> None:
    out = run.report.markdown.parent
    assert (out / "history.png").exists() and (out / "report.html").exists()
    md = run.report.markdown.read_text()
    assert "![history](history.png)" in md and "SIMULATED" in md
    assert "95% CI" in md and "infeasible" in md


def test_markdown_subset_renders_tables_code_and_escapes() -> None:
    html = markdown_to_html(["# T <x>", "", "| a | b |", "|---|---|", "| 1 | **2** |", "```", "a < b", "```",
                             "- `code` item", "> quote"], {})
    assert "<h1>T &lt;x&gt;</h1>" in html and "<td><b>2</b></td>" in html
    assert "<pre>a &lt; b</pre>" in html and "<li><code>code</code> item</li>" in html
    assert "<blockquote>quote</blockquote>" in html


@pytest.mark.integration
def test_contract_gap_names_fields_and_draws_no_conclusion(run: KneeRun, tmp_path: Path) -> None:
    from dataclasses import replace

    from sweep.report.document import write_report
    from sweep.store import Store
    from sweep.views.context import study_context

    ctx = study_context(Store(f"sqlite:///{run.report.markdown.parent.parent.parent / 'r.db'}"), run.study_id)
    ctx = replace(ctx, env=replace(ctx.env, sglang_version=None))
    files = write_report(ctx, tmp_path)
    assert files.missing == ["SGLang version"]
    text = files.markdown.read_text()
    assert "## No conclusion" in text and "launch_server" not in text


@pytest.mark.integration
def test_the_stored_profile_is_validated_again_and_another_versions_is_shown_in_words(run: KneeRun) -> None:
    import json

    from sqlalchemy import text

    from sweep.profile import Profile
    from sweep.report.setup import setup_lines
    from sweep.store import Store
    from sweep.views.context import study_context

    store = Store(f"sqlite:///{run.report.markdown.parent.parent.parent / 'r.db'}")
    ctx = study_context(store, run.study_id)
    stored = ctx.study.profile_json
    assert isinstance(ctx.profile, Profile) and ctx.profile == Profile.model_validate_json(stored)
    # a field this version does not know (a study made by a later sweep): no model, the setup in words, no crash
    other = json.dumps({**json.loads(stored), "future_field": 1})
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE sweep_studies SET profile_json = :p WHERE id = :i"), {"p": other, "i": run.study_id})
    try:
        old = study_context(store, run.study_id)
        assert old.profile is None and old.knees == ctx.knees
        setup = "\n".join(setup_lines(old))
        assert "- ladder: " in setup and "input distribution (configured)" not in setup
    finally:
        with store.engine.begin() as conn:
            conn.execute(text("UPDATE sweep_studies SET profile_json = :p WHERE id = :i"),
                         {"p": stored, "i": run.study_id})
        store.close()


def test_the_arrival_reads_in_words_for_each_kind() -> None:
    from sweep.profile import ClosedArrival, GammaArrival, RateArrival
    from sweep.report.setup import arrival_text

    assert arrival_text(ClosedArrival()) == "closed loop (each client sends its next request when the last one ends)"
    assert arrival_text(RateArrival(kind="constant", rate=2.0, rates=[1.0, 2.5])) == \
        "open loop, constant arrivals at 1, 2.5 req/s per step, at most 1,024 in flight"
    assert arrival_text(GammaArrival(rate=3.0, cv=2.0)).endswith("gamma arrivals at 3 req/s, gap cv 2, at most 1,024 in flight")
    assert ", shape 0.5," in arrival_text(GammaArrival(rate=3.0, shape=0.5))


@pytest.mark.integration
def test_free_text_from_servers_and_workers_is_no_raw_html_in_the_report(run: KneeRun, tmp_path: Path) -> None:
    """A failure reason holding `<!--<script>` and `</script><b>x</b>` (a server's log line): report.md holds it
    with each `<` that would open HTML as an entity, report.html shows the characters once escaped (not
    `&amp;lt;`)."""
    from sweep.report.document import write_report
    from sweep.store import Store
    from sweep.views.context import study_context

    hostile = "oom: <!--<script> </script><b>x</b> & co"
    store = Store(f"sqlite:///{run.report.markdown.parent.parent.parent / 'r.db'}")
    config = next(c for c in store.server_configs(run.study_id) if c.failure_reason)
    try:
        store.update_server_config(config.id, failure_reason=hostile, stop_reason=None)
        files = write_report(study_context(store, run.study_id), tmp_path)
    finally:
        store.update_server_config(config.id, failure_reason=config.failure_reason, stop_reason=config.stop_reason)
        store.close()
    md = files.markdown.read_text()
    assert "&lt;!--&lt;script> &lt;/script>&lt;b>x&lt;/b> & co" in md  # only what would open HTML is an entity
    assert "<script" not in md and "<!--" not in md and "<b>x" not in md
    assert files.html is not None
    page = files.html.read_text()
    assert "&lt;!--&lt;script&gt; &lt;/script&gt;&lt;b&gt;x&lt;/b&gt; &amp; co" in page and "&amp;lt;" not in page


def _copy_db(run: KneeRun, to: Path) -> str:
    """The fixture study's database copied (SQLite's backup API: the WAL included), to change without harm."""
    import sqlite3

    src = sqlite3.connect(run.report.markdown.parent.parent.parent / "r.db")
    dst = sqlite3.connect(to)
    src.backup(dst)
    src.close()
    dst.close()
    return f"sqlite:///{to}"


@pytest.mark.integration
def test_steps_that_passed_without_server_metrics_are_not_called_infeasible(run: KneeRun, tmp_path: Path) -> None:
    """Every step passed the SLA but /metrics answered too late (no cache hit rate, preemptions or GPU memory in
    any step): the report said "every configuration is infeasible"; it says what is missing and where from."""
    from sqlalchemy import text

    from sweep.report.document import write_report
    from sweep.store import Store
    from sweep.views.context import study_context

    store = Store(_copy_db(run, tmp_path / "slow-metrics.db"))
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE runs SET cache_hit_rate = NULL, retractions = NULL, peak_gpu_mem_mib = NULL"))
    ctx = study_context(store, run.study_id)
    assert ctx.winner is None and ctx.decision is not None
    why = ctx.decision.why_none()
    assert why.startswith("2 configurations passed the SLA at some step but none can be named: their steps lack "
                          "cache hit rate, peak GPU memory, preemption count (read from the server's /metrics"), why
    assert why.endswith("; 2 infeasible at launch (2 predicted infeasible)"), why
    md = write_report(ctx, tmp_path / "rep").markdown.read_text()
    assert "every configuration is infeasible" not in md and f"No winner: {why}." in md
    store.close()


def test_configurations_that_crashed_are_not_called_infeasible(tmp_path: Path) -> None:
    """No window measured because the servers crashed or hung: the line says so, by failure class."""
    from sweep.core.types import ServerConfig
    from sweep.report.document import write_report
    from sweep.store import Store
    from sweep.views.context import study_context

    prof = load_profile(SMOKE)
    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    sid = store.create_study("crashed", "smoke", prof.model_dump_json(), prof.fingerprint(), "grid", True, "virtual",
                             "optuna-crashed")
    for mrr, status, reason in ((4, "failed", "crash: server exited (exit 1)"), (8, "failed", "crash: exit 139"),
                                (16, "failed", "hung: no response bytes for 41 s"),
                                (32, "infeasible", "oom: Not enough memory")):
        cid = store.create_server_config(sid, ServerConfig(max_running_requests=mrr), "sim", [], 0)
        store.update_server_config(cid, status=status, failure_reason=reason)
    store.finish_study(sid, "completed")
    ctx = study_context(store, sid)
    assert ctx.decision is not None
    why = ctx.decision.why_none()
    assert why == "no configuration measured a window: 3 failed (2 crash, 1 hung), 1 infeasible at launch (1 oom)"
    md = write_report(ctx, tmp_path / "rep").markdown.read_text()
    assert "every configuration is infeasible" not in md and f"No winner: {why}." in md
