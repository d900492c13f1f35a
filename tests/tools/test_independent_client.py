"""tools/sglang-h200/independent_client.py (the H200 attach proof's reference) reads the truth of a known server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.launchers.test_attach_timing import timed_server
from tests.simserver import sim_server

TOOLS = Path(__file__).resolve().parents[2] / "tools" / "sglang-h200"


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


def test_independent_client_sessions_resend_the_conversation_with_the_servers_reply() -> None:
    """--sessions (issue 31 §4) on the simulated server: later turns carry turn k-1's prompt and the output_ids the
    server streamed, so the server's cache hits them (a client that dropped them would hit at most the shared
    prefixes of turn 1, about 0.1 here), and the session figures sweep stores come out."""
    with sim_server() as url:
        proc = subprocess.run([sys.executable, str(TOOLS / "independent_client.py"), "--url", url, "--concurrency", "4",
                               "--warmup-s", "1", "--measure-s", "4", "--stack", "stdlib", "--sessions",
                               "--think-s", "0.05"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["errors"] == 0 and res["sessions_completed"] >= 3, res
    assert 2.0 <= res["turns_per_session"] <= 4.0 and res["session_p50_s"] > 0
    assert res["cache_hit_later"] > 0.8 and res["later_prompt_tokens"] > 1000, res
