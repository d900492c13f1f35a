"""Client memory of one ladder window on the simulated server: `sweep ladder` at one concurrency, its process tree's
resident memory sampled every half second (the simulated server's processes apart), and the window's requests and
streamed tokens read back from the database. Prints one JSON object: peak client RSS, growth over the window, bytes
per request and per token, and the extrapolation to a 15-minute window and a 1-hour soak at the same rate.

    .venv/bin/python tools/client_memory.py --concurrency 128 --seconds 60 [--driver http|virtual]

docs/memory.md has the numbers of a run.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]


def tree_rss(root: psutil.Process) -> tuple[int, int]:
    """(client bytes, server bytes): resident memory of root's process tree, the simulator's processes apart."""
    client = server = 0
    for p in [root, *root.children(recursive=True)]:
        try:
            rss, cmd = p.memory_info().rss, " ".join(p.cmdline())
        except psutil.Error:
            continue
        if "sglang_sim" in cmd:
            server += rss
        else:
            client += rss
    return client, server


def one_window(args: argparse.Namespace, seconds: float) -> dict[str, float]:
    """Run one window of `seconds`; its peak client and server RSS, requests and output tokens."""
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "m.db"
        argv = [sys.executable, "-m", "sweep.cli", "ladder", "--profile", args.profile, "--db", str(db),
                "--driver", args.driver, "--launcher", "sim", "--out", str(Path(tmp) / "out"),
                "--set", f"ladder=[{args.concurrency}]", "--set", f"window.measure_seconds={seconds}",
                "--set", "window.warmup_requests=0", "--set", "window.drain_seconds=5",
                "--set", "refine.enabled=false", "--set", "soak.enabled=false"]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        root = psutil.Process(proc.pid)
        t0, trace = time.monotonic(), []
        while proc.poll() is None:
            client, server = tree_rss(root)
            trace.append((round(time.monotonic() - t0, 1), client, server))
            time.sleep(0.5)  # a sampling interval, not a wait for a condition
        out = proc.stdout.read() if proc.stdout else ""
        if proc.returncode != 0:
            sys.exit(f"sweep ladder exited {proc.returncode}:\n{out[-2000:]}")
        con = sqlite3.connect(db)
        requests, tokens = con.execute("SELECT count(*), coalesce(sum(output_tokens), 0) FROM requests").fetchone()
        con.close()
    return {"seconds": seconds, "requests": requests, "output_tokens": tokens,
            "client_peak": max(c for _, c, _ in trace), "server_peak": max(s for _, _, s in trace)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--concurrency", type=int, default=128)
    ap.add_argument("--seconds", default="30,60", help="two window lengths: the growth is their difference")
    ap.add_argument("--driver", default="http")
    ap.add_argument("--profile", default=str(ROOT / "profiles" / "interactive.yaml"))
    args = ap.parse_args()
    short, long = (one_window(args, float(s)) for s in args.seconds.split(","))
    grown = long["client_peak"] - short["client_peak"]
    per_token = grown / max(long["output_tokens"] - short["output_tokens"], 1)
    per_request = grown / max(long["requests"] - short["requests"], 1)
    rate = long["output_tokens"] / long["seconds"]
    fixed = long["client_peak"] - per_token * long["output_tokens"]

    def at(seconds: float) -> int:
        return round((fixed + per_token * rate * seconds) / 2**20)

    print(json.dumps({
        "concurrency": args.concurrency, "driver": args.driver, "windows": [short, long],
        "output_tokens_per_s": round(rate), "requests_per_s": round(long["requests"] / long["seconds"], 1),
        "client_growth_bytes_per_token": round(per_token, 1), "client_growth_bytes_per_request": round(per_request),
        "client_fixed_mib": round(fixed / 2**20),
        "extrapolated_15min_window_mib": at(900), "extrapolated_1h_soak_mib": at(3600),
    }, indent=1))


if __name__ == "__main__":
    main()
