"""`python bench/read_paths_db.py DB [--requests N]`: a big results database for timing the read paths (docs/bench-
read-paths.md), written straight through the store's write API (no study runs): two studies of the smoke profile,
`big` and `other` (another workload fingerprint), each 4 configurations x 6 ladder steps with a stored winner, and N
request rows over `big`'s windows (`other` holds a tenth as many). Only API that sweep has had since migration 0016
is used, so the same file builds the database for the tree before a change (run with that tree on PYTHONPATH) and
after. A measuring fixture: never committed."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sweep.core.types import RequestRecord
    from sweep.store import Store

LADDER = (2, 4, 8, 16, 32, 64)
CONFIGS: tuple[dict[str, float], ...] = ({}, {"max_running_requests": 32}, {"mem_fraction_static": 0.8},
                                         {"chunked_prefill_size": 4096})


def _stats(c: int, mrr: float | None, n: int, window_s: float) -> dict[str, object]:
    """A window's statistics: goodput that flattens past c=16 (sooner under a max_running_requests cap), the top
    step failing its SLA."""
    from sweep.store import STAT_COLUMNS

    cap = min(c, int(mrr or 10**6))
    tps = 120.0 * min(cap, 16) ** 0.9 * (1 + 0.02 * max(0, cap - 16) ** 0.5)
    passes = c < LADDER[-1]
    stats: dict[str, object] = {name: None for name in STAT_COLUMNS}
    stats.update(n_started=n, n_completed=n, n_errors=0, n_warmup=0, error_rate=0.0, throughput_rps=n / window_s,
                 output_tps=tps, goodput_tps=tps if passes else 0.0, goodput_rps=n / window_s if passes else 0.0,
                 attainment=1.0 if passes else 0.0, ttft_p50_ms=80.0 + c, ttft_p95_ms=120.0 + 4 * c,
                 ttft_p99_ms=150.0 + 6 * c, tpot_p50_ms=10.0, tpot_p95_ms=12.0 + c / 8, tpot_p99_ms=14.0 + c / 6,
                 retractions=0, steady=True, drift=0.01, client_bound=False, passes_sla=passes,
                 sla_failures="" if passes else f"TTFT P99 {150 + 6 * c} ms > 500 ms", window_s=window_s,
                 warmup_requests=c, warmup_s=1.0)
    return stats


def _records(n: int, c: int) -> list[RequestRecord]:
    from sweep.core.types import RequestRecord

    out = []
    for i in range(n):
        sent = 1000.0 + i * 0.01
        out.append(RequestRecord(index=i, concurrency=c, scheduled_at=sent, sent_at=sent + 0.001,
                                 first_token_at=sent + 0.2, finished_at=sent + 1.2, chunk_times=[sent + 0.2, sent + 1.1],
                                 chunk_tokens=[1, 63], prompt_tokens=512, output_tokens=64, sent_prompt_tokens=512,
                                 sent_output_tokens=64, cached_tokens=128))
    return out


def _study(store: Store, name: str, fingerprint: str, requests: int) -> None:
    from sweep.core.types import ServerConfig
    from sweep.profile import load_profile
    from sweep.store import WinnerRecord

    root = Path(__file__).resolve().parent.parent
    prof = load_profile(root / "profiles" / "smoke.yaml")
    sid = store.create_study(name, "smoke", prof.model_dump_json(), fingerprint, "grid", True,
                             "virtual", None)
    store.record_environment(sid, {"sglang_version": "0.5.17", "gpu_name": "NVIDIA H200", "host": "bench",
                                   "model_path": "m", "simulated": True})
    per_window = max(1, requests // (len(CONFIGS) * len(LADDER)))
    for trial, knobs in enumerate(CONFIGS):
        cfg = ServerConfig(**knobs)  # type: ignore[arg-type]
        cid = store.create_server_config(sid, cfg, "sim", [], trial)
        store.update_server_config(cid, status="running")
        for c in LADDER:
            rid = store.create_run(sid, cid, c, fingerprint, True, "virtual")
            store.finish_run(rid, _stats(c, knobs.get("max_running_requests"), per_window, 60.0),
                             _records(per_window, c), [], 1000.0)
        store.update_server_config(cid, status="completed")
    store.write_winners(sid, [WinnerRecord("default", True, 1, "default", json.dumps({}), "final", 32,
                                           2000.0, 1900.0, 2100.0)])
    store.finish_study(sid, "completed")


def build(db: Path, requests: int) -> None:
    """Write the two studies into a new SQLite file `db`."""
    from sweep.store import Store

    if db.exists():
        raise SystemExit(f"error: {db} exists; give a new path")
    store = Store(f"sqlite:///{db}")
    _study(store, "big", "f" * 16, requests)
    _study(store, "other", "e" * 16, max(1, requests // 10))
    store.close()


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python bench/read_paths_db.py", description=__doc__)
    ap.add_argument("db", type=Path)
    ap.add_argument("--requests", type=int, default=300_000)
    a = ap.parse_args(argv)
    build(a.db, a.requests)
    print(f"{a.db}: {a.requests:,} requests in study big")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
