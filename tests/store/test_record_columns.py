"""A record read by column name knows its columns: a misspelt name fails loudly instead of reading as an unset value
(the report printed "—" for it). Code that knows its column reads the record's field instead."""

from __future__ import annotations

import pytest

from sweep.store import RunRecord, RunSummary, StudyRecord


def _run(**cols: object) -> RunRecord:
    return RunRecord.from_row({"id": 1, "server_config_id": 2, "concurrency": 8, **cols})


def test_a_misspelt_run_column_is_an_error_not_an_unset_value() -> None:
    run = _run(goodput_tps=120.0, ttft_p99_ms=800.0, host="h1")
    assert (run.get("goodput_tps"), run.get("ttft_p99_ms"), run.get("host"), run.get("phase")) == (
        120.0, 800.0, "h1", "final")
    for wrong in ("goodput_tsp", "ttft_p75_ms", "stats", "placement"):
        with pytest.raises(KeyError, match=wrong):
            run.get(wrong)


def test_a_run_without_statistics_reads_its_stat_columns_as_unset() -> None:
    run = _run()
    assert run.stats is None and run.get("goodput_tps") is None and run.get("ttft_p99_ms") is None


def test_a_latency_percentile_reads_its_own_field_and_none_where_runs_keeps_no_such_percentile() -> None:
    """The report's SLA-percentile panels and soak line read RunStats.percentile_ms (fields, not a built column
    name): the percentile asked for, never another; None where runs stores no such percentile."""
    stats = _run(ttft_p50_ms=100.0, ttft_p90_ms=190.0, ttft_p95_ms=250.0, ttft_p99_ms=800.0, tpot_p95_ms=31.0,
                 e2e_p90_ms=4000.0).stats
    assert stats is not None
    assert [stats.percentile_ms("ttft", q) for q in (50, 90, 95, 99, 95.0)] == [100.0, 190.0, 250.0, 800.0, 250.0]
    assert (stats.percentile_ms("tpot", 95), stats.percentile_ms("e2e", 90), stats.percentile_ms("itl", 50)) == (
        31.0, 4000.0, None)
    assert stats.percentile_ms("ttft", 75) is None and stats.percentile_ms("ttft", 99.9) is None


def test_every_record_refuses_a_column_it_does_not_have() -> None:
    study = StudyRecord(1, "s")
    assert study.get("name") == "s"
    with pytest.raises(KeyError, match="'nmae'"):
        study.get("nmae")
    summary = RunSummary.from_row({"run_id": 1, "server_config_id": 2, "concurrency": 8, "study_name": "s"})
    assert summary.get("study_name") == "s" and summary.get("request_count") is None  # a count not asked for
    with pytest.raises(KeyError):
        summary.get("studyname")


def test_a_stored_value_reads_as_a_number_as_int_and_float_read_it() -> None:
    """sweep.core.numbers: the typed int()/float() the store's records use instead of `# type: ignore`."""
    from decimal import Decimal

    import numpy as np

    from sweep.core.numbers import as_float, as_int

    assert [as_int(v) for v in (3, True, "7", np.int64(5), Decimal("4"), 2.9)] == [3, 1, 7, 5, 4, 2]
    assert [as_float(v) for v in ("1.5", np.float32(2.5), Decimal("0.25"), 3)] == [1.5, 2.5, 0.25, 3.0]
    for convert in (as_int, as_float):
        with pytest.raises(TypeError):
            convert(None)
        with pytest.raises(ValueError):
            convert("x")
