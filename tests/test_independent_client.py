"""tools/sglang-h200/independent_client.py (the H200 attach proof's reference) reads the truth of a known server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from test_attach_timing import timed_server

TOOLS = Path(__file__).resolve().parent.parent / "tools" / "sglang-h200"


def test_independent_client_reads_the_fake_servers_known_timings() -> None:
    with timed_server("--ttft-ms", "50", "--itl-ms", "10") as url:
        proc = subprocess.run([sys.executable, str(TOOLS / "independent_client.py"), "--url", url,
                               "--concurrency", "8", "--warmup-s", "1", "--measure-s", "3", "--stack", "stdlib"],
                              capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["errors"] == 0 and res["n"] >= 8
    assert 49.0 <= res["ttft_p50_ms"] <= 65.0 and 9.5 <= res["tpot_p50_ms"] <= 10.5, res
    # 8 streams of one token per 10 ms: about 800 tok/s arrive (less the gaps of each new request's TTFT)
    assert 600.0 <= res["output_tps"] <= 820.0, res
