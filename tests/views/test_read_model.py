"""One winner rule (sweep/views/read_model.py): the live page's state and the report's context name the same winner,
or both refuse, for studies stored through Store's write API in a real SQLite file."""

from __future__ import annotations

from pathlib import Path

from sweep.core.environment import Environment
from sweep.core.types import Placement, ServerConfig
from sweep.profile import load_profile
from sweep.store import Store
from sweep.views.context import study_context
from sweep.views.live import read_state
from sweep.views.read_model import read_study

ROOT = Path(__file__).resolve().parents[2]
H200 = Placement(gpu_name="NVIDIA H200", gpu_memory_mib=143771.0)
A100 = Placement(gpu_name="NVIDIA A100", gpu_memory_mib=81920.0)
ENV: Environment = {"model_path": "Qwen/Qwen2.5-0.5B-Instruct", "sglang_version": "0.4.0", "gpu_name": "NVIDIA H200",
       "parallel": "tp=1", "simulated": True}


def _stats(goodput: float, passes: bool) -> dict[str, object]:
    """One window's stats: every per-step field of the report contract filled."""
    return {"goodput_tps": goodput, "goodput_rps": goodput / 100, "output_tps": goodput * 1.1, "passes_sla": passes,
            "ttft_p50_ms": 100.0, "ttft_p99_ms": 300.0, "tpot_p50_ms": 10.0, "tpot_p99_ms": 20.0,
            "cache_hit_rate": 0.5, "retractions": 0, "peak_gpu_mem_mib": 1000.0, "n_completed": 50,
            "window_s": 10.0, "warmup_requests": 4}


def _study(store: Store, name: str) -> int:
    prof = load_profile(ROOT / "profiles" / "smoke.yaml")
    sid = store.create_study(name, "smoke", prof.model_dump_json(), prof.fingerprint(), "grid", True, "virtual", None)
    store.record_environment(sid, ENV)
    return sid


def _config(store: Store, sid: int, mrr: int, status: str, goodputs: list[float],
            placement: Placement = H200) -> int:
    """A configuration with one final ladder step per goodput (each passes the SLA), then the given status."""
    cid = store.create_server_config(sid, ServerConfig(max_running_requests=mrr), "sim", [], None, placement)
    for i, g in enumerate(goodputs):
        rid = store.create_run(sid, cid, 2 ** (i + 1), "fp", True, "virtual", placement=placement)
        store.finish_run(rid, _stats(g, True), [], [], 0.0)
    store.update_server_config(cid, status=status, failure_reason="crash: server died" if status == "failed" else None)
    return cid


def _names(store: Store, sid: int) -> tuple[str | None, str | None]:
    """(the live page's winner, the report context's winner), as configuration labels."""
    page = read_state(store, sid).winner
    ctx = study_context(store, sid)
    return (page.config if page else None), (ctx.labels[ctx.winner.id] if ctx.winner else None)


def test_a_failed_top_configuration_wins_neither_the_page_nor_the_report(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    sid = _study(store, "failed-top")
    _config(store, sid, 8, "completed", [500.0, 900.0])
    _config(store, sid, 64, "failed", [800.0, 2000.0])  # its best step is higher, but its ladder failed
    store.finish_study(sid, "completed")
    assert _names(store, sid) == ("mrr=8", "mrr=8")
    assert read_study(store, sid).decision.named is not None


def test_a_configuration_missing_a_contract_field_wins_neither(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    sid = _study(store, "gap")
    _config(store, sid, 8, "completed", [500.0])
    cid = store.create_server_config(sid, ServerConfig(max_running_requests=32), "sim", [], None, H200)
    rid = store.create_run(sid, cid, 2, "fp", True, "virtual", placement=H200)
    store.finish_run(rid, {**_stats(3000.0, True), "cache_hit_rate": None}, [], [], 0.0)
    store.update_server_config(cid, status="completed")
    store.finish_study(sid, "completed")
    assert _names(store, sid) == ("mrr=8", "mrr=8")


def test_two_gpu_models_both_refuse_and_say_why(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    sid = _study(store, "mixed")
    _config(store, sid, 8, "completed", [500.0], H200)
    _config(store, sid, 16, "completed", [700.0], A100)
    store.finish_study(sid, "completed")
    assert _names(store, sid) == (None, None)
    state = read_state(store, sid)
    assert state.no_winner.startswith("no single winner: measured on 2 GPU models")
    ctx = study_context(store, sid)
    assert ctx.hardware is not None and ctx.hardware.reason is not None
    assert {k: w.id if w else None for k, w in ctx.hardware.winners.items()} == {
        "NVIDIA H200, 140 GiB": 1, "NVIDIA A100, 80 GiB": 2}
    assert study_context(store, sid, rank_mixed_hardware=True).winner is not None  # asked: ranked anyway


def test_the_stored_winner_is_what_the_page_and_the_report_name(tmp_path: Path) -> None:
    """study_winners is the one fact: where the stored primary row names another configuration than the rule would
    pick on these rows (a study ended by another version of sweep), the page and the report name the stored one."""
    from sweep.store import WinnerRecord

    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    sid = _study(store, "stored")
    low = _config(store, sid, 8, "completed", [500.0, 900.0])
    _config(store, sid, 16, "completed", [600.0, 1200.0])
    store.finish_study(sid, "completed")
    assert _names(store, sid) == ("mrr=16", "mrr=16")  # nothing stored yet: the rule decides
    store.write_winners(sid, [WinnerRecord("default", True, low, "mrr=8", "{}", "final", 4, 900.0)])
    assert _names(store, sid) == ("mrr=8", "mrr=8")
    model = read_study(store, sid)
    assert model.decision.named is not None and model.decision.named.id == low
    assert read_study(store, sid, rank_mixed_hardware=True).decision.named.id != low  # type: ignore[union-attr]
