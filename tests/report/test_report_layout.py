"""The report's layout (issue 22 §1) on a smoke study measured on the virtual driver with a soak: the answer and
the winner come before the evidence (setup, every step), the soak row says its offered rate, goodput intervals say
goodput's unit, and the report names the winner study_winners stores."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sweep.profile import load_profile
from sweep.study.orchestrator import KneeRun, Orchestrator

pytestmark = pytest.mark.integration  # every test here runs a whole study

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> KneeRun:
    tmp = tmp_path_factory.mktemp("layout")
    prof = load_profile(ROOT / "profiles" / "smoke.yaml", {"soak.enabled": True})
    return Orchestrator(prof, f"sqlite:///{tmp / 'r.db'}", tmp / "out", driver="virtual").knee("layout")


def _at(text: str, heading: str) -> int:
    at = text.find(heading)
    assert at >= 0, f"{heading!r} not in the report"
    return at


def test_the_answer_and_the_winner_come_before_the_evidence(run: KneeRun) -> None:
    md = run.report.markdown.read_text()
    lines = md.splitlines()
    assert lines[0].startswith("# Knee report: layout") and "SIMULATED" in lines[2]
    first_section = next(ln for ln in lines[1:] if ln.startswith("## "))
    assert first_section.startswith("## Answer")
    assert _at(md, "## Answer") < _at(md, "## Winner") < _at(md, "## Every configuration and step")
    assert _at(md, "## Winner") < _at(md, "## Configurations") < _at(md, "## Why the knees are where they are")
    html = run.report.html.read_text() if run.report.html else ""
    assert _at(html, "<h2>Answer") < _at(html, "<h2>Winner") < _at(html, "<h2>Every configuration and step")


def test_the_soak_row_says_its_offered_rate(run: KneeRun) -> None:
    md = run.report.markdown.read_text()
    soak = [ln for ln in md.splitlines() if ln.startswith("| ") and "| soak |" in ln]
    assert soak  # the steps table's row, and the cross-check's and cache tables' rows of the same window
    for row in soak:  # the Poisson rate in the concurrency column, never the in-flight cap
        assert re.fullmatch(r"[\d,]+\.\d\d req/s", row.split("|")[3].strip()), row
    assert re.search(r"- run \d+ \([^)]*\), [\d,.]+ req/s offered \(at most \d+ in flight\)", md)


def test_goodput_intervals_carry_goodputs_unit(run: KneeRun) -> None:
    md = run.report.markdown.read_text()
    cis = re.findall(r"95% CI [\d,]+–[\d,]+( output tok/s| tok/s)?", md)
    assert cis and all(unit for unit in cis), cis
    assert "| 95% CI (tok/s) |" in md


def test_the_report_names_the_stored_winner(run: KneeRun) -> None:
    from sweep.store import Store

    store = Store(f"sqlite:///{run.report.markdown.parents[2] / 'r.db'}",  # tmp/out/layout/report.md
                  readonly=True)
    stored = store.study_winners(store.get_study_by_name("layout").id)  # type: ignore[union-attr]
    primary = next(w for w in stored if w.is_primary)
    assert primary.label is not None
    md = run.report.markdown.read_text()
    assert f"**{primary.label}**: knee at concurrency {primary.concurrency}" in md
