"""Reports: the standalone HTML beside report.md, the study history plot, simulated labels, the contract."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest

from sweep.profile import load_profile
from sweep.report.html import markdown_to_html
from sweep.study.orchestrator import KneeRun, Orchestrator

ROOT = Path(__file__).resolve().parent.parent
SMOKE = ROOT / "profiles" / "smoke.yaml"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> KneeRun:
    tmp = tmp_path_factory.mktemp("rep")
    prof = load_profile(SMOKE, {"search.space": {"max_running_requests": [4, 8], "mem_fraction_static": [0.05, 0.85]}})
    return Orchestrator(prof, f"sqlite:///{tmp / 'r.db'}", tmp / "out", driver="virtual").knee("rep")


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


def test_contract_gap_names_fields_and_draws_no_conclusion(run: KneeRun, tmp_path: Path) -> None:
    from dataclasses import replace

    from sweep.report.document import write_report
    from sweep.store import Store
    from sweep.views.context import study_context

    ctx = study_context(Store(f"sqlite:///{run.report.markdown.parent.parent.parent / 'r.db'}"), run.study_id)
    ctx = replace(ctx, env=dict(ctx.env, sglang_version=None))
    files = write_report(ctx, tmp_path)
    assert files.missing == ["SGLang version"]
    text = files.markdown.read_text()
    assert "## No conclusion" in text and "launch_server" not in text


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


def test_free_text_from_servers_and_workers_is_no_raw_html_in_the_report(run: KneeRun, tmp_path: Path) -> None:
    """A failure reason holding `<!--<script>` and `</script><b>x</b>` (a server's log line): report.md holds it
    as entities, report.html shows the characters once escaped (not `&amp;lt;`)."""
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
    assert "&lt;!--&lt;script&gt; &lt;/script&gt;&lt;b&gt;x&lt;/b&gt; &amp; co" in md
    assert "<script" not in md and "<!--" not in md and "<b>x" not in md
    assert files.html is not None
    page = files.html.read_text()
    assert "&lt;!--&lt;script&gt; &lt;/script&gt;&lt;b&gt;x&lt;/b&gt; &amp; co" in page and "&amp;lt;" not in page
