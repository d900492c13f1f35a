"""The report shows what was sent and what the server counted (from the requests table) and the predicted cache hit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sweep.profile import load_profile
from sweep.report.inputs import cache_lines, input_rows
from sweep.store import RunRecord
from sweep.study.orchestrator import Orchestrator
from sweep.views.study import StudyContext

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "profiles" / "smoke.yaml"


def test_input_rows_per_modality_by_hand() -> None:
    rows = [("text", 100, 101, 20, 20, None), ("text", 300, 301, 40, 40, None),
            ("image", 600, 650, 10, 9, None), ("image", 800, 850, 10, 0, "timeout"),
            ("text", 50, 50, 5, 0, "never sent: the in-flight cap stayed full")]
    text, image, every = input_rows(rows)
    assert (text.modality, text.requests, image.modality, image.requests, every.requests) == ("text", 2, "image", 2, 4)
    assert text.sent_prompt is not None and text.sent_prompt.mean == 200 and text.sent_prompt.p50 == 200
    assert text.counted_prompt is not None and text.counted_prompt.mean == 201
    assert image.counted_output is not None and image.counted_output.mean == 9  # the failed request is not counted
    assert image.sent_prompt is not None and image.sent_prompt.p99 == pytest.approx(798)  # numpy's linear P99


def test_cache_lines_flag_above_the_perfect_bound_or_far_below_the_capped_one() -> None:
    rows_in = ((2, 0.12, 0.11, 0.11),  # within 2 points of the perfect bound: fine
               (4, 0.59, 0.11, 0.11),  # above the perfect bound: the server hit what was never sent twice
               (8, 0.50, 0.90, 0.62),  # 12 points below a cache of the pool's size
               (16, 0.57, 0.89, 0.61))  # 4 below the capped, far below the perfect: eviction, as predicted
    runs = [RunRecord.from_row({"id": c, "status": "completed", "server_config_id": 1, "concurrency": c,
                                "phase": "final", "cache_hit_rate": hit, "cache_hit_rate_predicted": perfect,
                                "cache_hit_rate_capped": capped}) for c, hit, perfect, capped in rows_in]
    lines = cache_lines(StudyContext(runs=runs, labels={1: "mrr=8"}, profile_raw={"window": {}, "workload": {}}))
    rows = [ln for ln in lines if ln.startswith("| mrr=8")]
    assert "⚠" not in rows[0] and "| 12% | 11% | 11% |" in rows[0]
    assert "⚠ above the perfect-cache bound by 48 points" in rows[1]
    assert "⚠ 12 points below a cache of the KV pool's size" in rows[2]
    assert "⚠" not in rows[3]


@pytest.mark.integration
def test_a_study_report_shows_sent_and_counted_inputs_and_predicted_hits(tmp_path: Path) -> None:
    data = tmp_path / "prompts.jsonl"
    data.write_text("".join(json.dumps({"prompt": " ".join(["word"] * (20 + 7 * i)), "output_len": 8}) + "\n"
                            for i in range(400)))
    prof = load_profile(SMOKE, {"search.space.max_running_requests": [8], "ladder": [2], "window.measure_seconds": 3.0,
                                "workload.dataset": {"path": str(data)}})
    run = Orchestrator(prof, f"sqlite:///{tmp_path / 'r.db'}", tmp_path, driver="virtual").knee("inputs")
    md = run.report.markdown.read_text()
    assert "uniform 64–512" not in md and str(data) in md  # the dataset, not the profile's default lengths
    section = md.split("## Inputs as sent and as the server counted them")[1].split("\n## ")[0]
    text_row = next(ln for ln in section.splitlines() if ln.startswith("| text |"))
    cells = [c.strip() for c in text_row.split("|")[1:-1]]
    sent_mean = float(cells[2].split(" / ")[0].replace(",", ""))
    assert 20 <= sent_mean <= 20 + 7 * 400 and cells[4].startswith("8 / 8 / 8")  # output_len 8 from every entry
    assert "## Prefix cache: measured vs predicted" in md
    html = run.report.html.read_text() if run.report.html else ""
    assert "Inputs as sent and as the server counted them" in html and "Prefix cache: measured vs predicted" in html


def test_the_setup_line_says_the_shared_prefixes_go_in_front_of_dataset_prompts() -> None:
    from sweep.profile import Workload
    from sweep.report.setup import workload_text

    prefixed = Workload.model_validate({"dataset": {"path": "p.jsonl"},
                                        "shared_prefix": {"groups": 8, "length": 512, "share": 0.6}})
    assert ("dataset `p.jsonl` (auto); output length the dataset's own (each turn's explicit length, else its "
            "recorded reply's; a turn with neither: uniform 64–512 tokens); 60% of requests start with one of 8 "
            "shared 512-token prefixes, put in front of the dataset's prompts; API `/generate`") in workload_text(prefixed)
    plain = Workload.model_validate({"dataset": {"path": "p.jsonl"}})
    assert "; no shared prefixes; API `/generate`" in workload_text(plain)
