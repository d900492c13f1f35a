"""The real H200 windows the simulator is calibrated against, stored in the repo (docs/calibration-data/).

Two sources, both plain JSON so the calibration is reproducible from a checkout:
- `kv-calib.json`: exported from a real results.db by `tools/calibrate.py --export DB` through sweep's Store
  (runs, the study's exact profile, the knobs, per-request TTFT/TPOT of every measured request), plus the KV pool
  size the real server logged (`pool_tokens`, from `Decode batch` lines: #token / token usage).
- `session1.json`: aggregates of the 2026-11-29 studies (the per-request database is gone), replayed with the same
  `interactive` workload and the window lengths those studies used.
`decode-lines.txt` keeps the `Decode batch` / `Prefill batch` lines of the real logs for the decode-step fit.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from calibration_matrix import shape_of_study

from sglang_sim.params import EngineKnobs
from sweep.profile import Profile
from sweep.store import Store

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "docs" / "calibration-data"
REAL_METRICS = ("output_tps", "tpot_p50_ms", "tpot_p99_ms", "ttft_p50_ms", "ttft_p99_ms", "goodput_tps",
                "goodput_rps", "passes_sla", "queue_len_mean", "kv_usage_max", "retractions", "cache_hit_rate",
                "client_bound")


@dataclass
class RealWindow:
    """One measured window of the real server and what is needed to replay it."""

    run_id: str  # unique across sources, e.g. "kv-calib/3"
    study: str
    config_id: str  # windows of one config share one engine, in ladder order
    profile: Profile
    knobs: EngineKnobs
    concurrency: int
    real: dict[str, float]
    ttft_by_modality: dict[str, float] = field(default_factory=dict)
    pool_tokens: int | None = None  # the real KV pool (max_total_num_tokens) where the log showed it
    source: str = ""
    shape: str | None = None  # the calibration matrix's workload shape (tools/calibration_matrix.py), if one
    first_tokens: tuple[tuple[float, float], ...] = ()  # (sent s from the window start, TTFT ms) per request

    @property
    def client_bound(self) -> bool:
        """sweep flagged the window client-bound (its own client, not the server, set the pace): no server figure."""
        return bool(self.real.get("client_bound"))

    @property
    def per_request(self) -> bool:
        """Measured with today's client and stored per request (every metric is scored), not a session-1 aggregate."""
        return self.source != "session1.json"


def export_db(db: str, out: Path, pool_tokens: dict[str, int]) -> int:
    """Write every completed real run of a results.db as JSON (read through a scratch copy: Store migrates)."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "results.db"
        shutil.copy(db, copy)
        store = Store(f"sqlite:///{copy}")
        try:
            runs = [r for r in store.list_runs(status="completed") if not r.run.simulated]
            studies: dict[str, Any] = {}
            for r in sorted(runs, key=lambda r: (r.run.server_config_id, r.run.concurrency)):
                st = studies.get(r.study_name)
                if st is None:
                    study = store.get_study_by_name(r.study_name)
                    assert study is not None  # the run was listed under it
                    prof = json.loads(study.profile_json)
                    prof["server"]["command"] = None  # a path of the measuring machine, not needed to replay
                    st = studies[r.study_name] = {"name": r.study_name, "profile": prof, "windows": []}
                reqs = [q for q in store.requests_for_run(r.run.id) if not q.warmup and q.error is None]
                st["windows"].append({
                    "run_id": r.run.id, "config_id": r.run.server_config_id, "concurrency": r.run.concurrency,
                    "knobs": {"max_running_requests": r.config.max_running_requests,
                              "mem_fraction_static": r.config.mem_fraction_static,
                              "chunked_prefill_size": r.config.chunked_prefill_size,
                              "schedule_policy": r.config.schedule_policy or "fcfs"},
                    "pool_tokens": pool_tokens.get(str(r.config.mem_fraction_static)),
                    "real": {m: r.get(m) for m in REAL_METRICS},
                    "requests": {"modality": [q.modality for q in reqs],
                                 "ttft_ms": [round(q.ttft_ms, 2) if q.ttft_ms is not None else None
                                             for q in reqs],
                                 "tpot_ms": [round(q.tpot_ms, 3) if q.tpot_ms is not None else None
                                             for q in reqs],
                                 "sent_s": [round(q.sent_at, 4) for q in reqs]}})
        finally:
            store.close()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"studies": list(studies.values())}, indent=1) + "\n")
    return sum(len(s["windows"]) for s in studies.values())


def _first_tokens(reqs: dict[str, list[Any]]) -> tuple[tuple[float, float], ...]:
    """(sent, TTFT) of every request with a first token, where the export kept send times (the matrix does)."""
    return tuple((s, t) for s, t in zip(reqs.get("sent_s", []), reqs["ttft_ms"], strict=False) if t is not None)


def load_export(path: Path) -> list[RealWindow]:
    """Windows of an export written by export_db, in ladder order per configuration."""
    doc = json.loads(path.read_text())
    out = []
    for st in doc["studies"]:
        stored = st["profile"]
        if "replay" not in stored.get("workload", {}):  # measured before requests were fresh: the pool was cycled
            stored = {**stored, "workload": {**stored.get("workload", {}), "replay": True},
                      "window": {**stored.get("window", {}), "flush_cache": False}}
        prof = Profile.model_validate(stored)
        for w in st["windows"]:
            by_mod: dict[str, list[float]] = {}
            for mod, t in zip(w["requests"]["modality"], w["requests"]["ttft_ms"], strict=True):
                if t is not None:
                    by_mod.setdefault(mod, []).append(t)
            out.append(RealWindow(f"{st['name']}/{w['run_id']}", st["name"], f"{st['name']}/{w['config_id']}", prof,
                                  EngineKnobs(**w["knobs"]), w["concurrency"],
                                  {k: float(v) for k, v in w["real"].items() if v is not None},
                                  {k: sum(v) / len(v) for k, v in by_mod.items()}, w.get("pool_tokens"),
                                  path.name, shape_of_study(st["name"]), _first_tokens(w["requests"])))
    return out


def load_session1(path: Path, base: Profile) -> list[RealWindow]:
    """The 2026-11-29 aggregates, replayed with `base`'s workload and each study's own window and ladder."""
    doc = json.loads(path.read_text())
    out = []
    for st in doc["studies"]:
        win = base.window.model_copy(update=st["window"])
        prof = base.model_copy(update={"window": win})
        for w in st["windows"]:
            knobs = EngineKnobs(max_running_requests=w["mrr"], mem_fraction_static=w["mfs"],
                                chunked_prefill_size=st["chunked_prefill_size"], schedule_policy=st["schedule_policy"])
            out.append(RealWindow(f"session1/{w['run_id']}", st["name"], f"session1/{st['name']}/{w['mrr']}", prof,
                                  knobs, w["concurrency"], {k: float(v) for k, v in w["real"].items()},
                                  source=path.name))
    return out


def load_all(data: Path = DATA) -> list[RealWindow]:
    """Every stored window: the per-request exports first (kv-calib, then the matrix of workload shapes, one file per
    configuration: matrix-TAG.json), then the session-1 aggregates."""
    kv = load_export(data / "kv-calib.json")
    matrix = [w for p in sorted(data.glob("matrix*.json")) for w in load_export(p) if not w.client_bound]
    s1 = data / "session1.json"
    return kv + matrix + (load_session1(s1, kv[0].profile) if s1.exists() else [])
