"""What a study concludes when some configurations failed (item 6), on a real SQLite file written through Store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from faultkit import SMOKE

from sweep.core.types import ServerConfig
from sweep.profile import load_profile
from sweep.report.document import write_report
from sweep.store import Store
from sweep.views.context import study_context


def _good(goodput: float) -> dict[str, Any]:
    return {"n_started": 40, "n_completed": 40, "n_errors": 0, "error_rate": 0.0, "throughput_rps": 10.0,
            "output_tps": goodput * 1.1, "goodput_tps": goodput, "goodput_rps": 10.0, "ttft_p50_ms": 50.0,
            "ttft_p99_ms": 90.0, "tpot_p50_ms": 10.0, "tpot_p99_ms": 20.0, "cache_hit_rate": 0.3,
            "retractions": 0, "peak_gpu_mem_mib": 1000.0, "passes_sla": True, "window_s": 3.0,
            "warmup_requests": 4, "warmup_s": 0.0}


def _all_errors() -> dict[str, Any]:
    """A step where every request failed: no latency exists to report, and that is not missing data."""
    return {"n_started": 40, "n_completed": 0, "n_errors": 40, "error_rate": 1.0, "throughput_rps": 0.0,
            "output_tps": 0.0, "goodput_tps": 0.0, "goodput_rps": 0.0, "cache_hit_rate": None, "retractions": 0,
            "peak_gpu_mem_mib": 1000.0, "passes_sla": False, "sla_failures": "errors 100%", "window_s": 3.0,
            "warmup_requests": 4, "warmup_s": 0.0}


def _config(store: Store, sid: int, mrr: int, status: str, steps: list[dict[str, Any]]) -> int:
    cid = store.create_server_config(sid, ServerConfig(max_running_requests=mrr), "sim", [], None)
    for i, stats in enumerate(steps):
        rid = store.create_run(sid, cid, 2 ** (i + 1), "fp", True, "http")
        store.finish_run(rid, stats, [], [], 0.0)
    store.update_server_config(cid, status=status, failure_reason="hung: no response bytes" if status == "failed"
                               else None)
    return cid


def test_a_failed_configuration_never_wins_and_an_all_error_step_does_not_block_the_conclusion(
        tmp_path: Path) -> None:
    prof = load_profile(SMOKE)
    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    sid = store.create_study("v", "smoke", prof.model_dump_json(), prof.fingerprint(), "grid", True, "http", None)
    store.record_environment(sid, {"model_path": "models/x", "sglang_version": "0.5.17-sim", "gpu_name": "H200",
                                   "parallel": "TP 1, DP 1", "simulated": True})
    failed = _config(store, sid, 16, "failed", [_good(900.0), _good(1000.0)])  # hung at its third step
    good = _config(store, sid, 8, "completed", [_good(500.0), _good(600.0)])
    _config(store, sid, 4, "completed", [_good(300.0), _all_errors()])
    ctx = study_context(store, sid)
    assert ctx.winner is not None and ctx.winner.id == good, ctx.winner
    assert ctx.winner.id != failed
    files = write_report(ctx, tmp_path / "out")
    assert files.missing == [], files.missing
    text = files.markdown.read_text()
    assert "No conclusion" not in text
