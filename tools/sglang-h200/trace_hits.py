"""The `trace` proof stage's answer: per window of a trace replay, the prefix-cache hit rate measured (the requests'
cached tokens; the server's /metrics counters) against the prediction from the trace's shared hash blocks.

Predictions: `window` = a perfect prefix cache over exactly what the window sent (unbounded) and held to the KV
pool (capped), as the study stores them (sweep.workload.prefix_cache); `trace` = the same unbounded cache over the
whole trace file in order, its hash blocks as token blocks (what the trace itself shares, before any slicing).

    python3 tools/sglang-h200/trace_hits.py RESULTS.db STUDY TRACE.jsonl
"""

from __future__ import annotations

import sys
from pathlib import Path

from sweep.profile import Dataset
from sweep.profile.trace import burstiness, load_trace
from sweep.store import Store
from sweep.workload.datasets import read_entries
from sweep.workload.prefix_cache import perfect_prefix_hits


def _pct(x: float | None) -> str:
    return "   -  " if x is None else f"{x:6.1%}"


def main(db: str, study: str, trace: str) -> None:
    items, _ = read_entries(Path(trace), "mooncake", trace, block_tokens=Dataset(path=trace).block_tokens)
    hit, total = perfect_prefix_hits(tuple(it.input_ids) for it in items)
    whole = hit / total if total else 0.0
    print(f"trace {trace}: {len(items)} entries (a synthetic slice in the FAST'25 Mooncake format), "
          f"{burstiness(load_trace(trace)).text()}")
    print(f"predicted hit rate over the whole trace (perfect cache, its shared hash blocks): {whole:.1%}")
    with Store(f"sqlite:///{db}", create=False, readonly=True) as store:
        rec = store.get_study_by_name(study)
        if rec is None:
            sys.exit(f"no study {study} in {db}")
        runs = sorted(store.study_runs(rec.id), key=lambda r: r.id)
    print(f"{'phase':7} {'offered':>12} {'pass':>5} {'measured':>9} {'server':>7} {'pred.':>7} {'capped':>7}  TTFT p95")
    for r in runs:
        s = r.stats
        if s is None:
            print(f"{r.phase:7} {r.offered_rps or 0:8.2f} req/s  {r.status}")
            continue
        print(f"{r.phase:7} {r.offered_rps or 0:8.2f} req/s {'yes' if s.passes_sla else 'no':>5} "
              f"{_pct(s.cache_hit_rate):>9} {_pct(s.cache_hit_rate_server):>7} {_pct(s.cache_hit_rate_predicted):>7} "
              f"{_pct(s.cache_hit_rate_capped):>7}  {s.ttft_p95_ms or 0:,.0f} ms")


if __name__ == "__main__":
    main(*sys.argv[1:4])
