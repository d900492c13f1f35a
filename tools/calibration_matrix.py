"""The calibration matrix of workload shapes (issue 21 §2): one home for the shapes, and the runner that measures them.

A shape is (prompt length, output length, prefix share): prompts short ~200, medium ~1k or long ~4k tokens (uniform
+-10%), outputs short ~64 or long ~512 tokens (uniform +-25%, ignore_eos), and the share of every prompt behind one of
8 shared prefixes (0, 0.6 or 0.9 of the mean prompt). Its name says so: `pM-oS-x6` = medium prompt, short output,
0.6 of the prompt shared. Each shape is climbed 16 -> 32 -> 64 -> 128 on one running server through sweep's own
ladder (`sweep ladder --launcher attach`, one study per shape and configuration, the prefix cache flushed before
every step), so the windows, their stored profile and their replay (tools/calibrate.py) are sweep's own.

    python3 tools/calibration_matrix.py list                       # the shapes and the time each takes
    python3 tools/calibration_matrix.py run --url URL --db DB --config KNOBS --tag A --deadline-s 400 [SHAPE ...]

`run` measures the shapes in the given order and skips a shape whose estimated time no longer fits before the
deadline (a device call has a hard limit), so the order is the priority. tools/sglang-h200/calib-matrix.sh starts
the real server around it; tools/calibrate.py holds out whole shapes (`--holdout-shapes`).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LADDER = (16, 32, 64, 128)
PROMPTS = {"S": 200, "M": 1000, "L": 4000}
OUTPUTS = {"S": 64, "L": 512}
SHARES = {"0": 0.0, "6": 0.6, "9": 0.9}
PREFILL_TPS = 35000.0  # uncached prompt tokens per second on the 8B shape (a rough H200 figure, for planning)


@dataclass(frozen=True)
class Shape:
    """One workload shape of the matrix and the window that measures it."""

    prompt: str  # a PROMPTS key
    output: str  # an OUTPUTS key
    share: str  # a SHARES key

    @property
    def name(self) -> str:
        return f"p{self.prompt}-o{self.output}-x{self.share}"

    @property
    def warmup_s(self) -> float:
        return 4.0 if self.output == "L" else 2.0

    @property
    def measure_s(self) -> float:
        return 10.0 if self.output == "L" else 6.0

    def overrides(self) -> list[str]:
        """`--set` values of the interactive profile that make this shape's study."""
        p, o, x = PROMPTS[self.prompt], OUTPUTS[self.output], SHARES[self.share]
        prefix = ({"groups": 8, "length": round(p * x), "share": 1.0} if x > 0 else {"groups": 0, "share": 0.0})
        sets = {
            "workload.prompt_len": {"kind": "uniform", "low": round(p * 0.9), "high": round(p * 1.1)},
            "workload.output_len": {"kind": "uniform", "low": round(o * 0.75), "high": round(o * 1.25)},
            "workload.shared_prefix": prefix,
            "workload.num_requests": 20000,
            "ladder": list(LADDER),
            "refine": {"enabled": False},
            "window.warmup_requests": 0,
            "window.warmup_seconds": self.warmup_s,
            "window.measure_seconds": self.measure_s,
            "window.drain_seconds": 40,
        }
        out: list[str] = []
        for key, val in sets.items():
            out += ["--set", f"{key}={json.dumps(val, separators=(',', ':'))}"]
        return out

    def estimate_s(self) -> float:
        """Wall seconds of the whole ladder on the H200 (windows + the drain of the longest requests + the CLI)."""
        per_token = {16: 0.008, 32: 0.010, 64: 0.014, 128: 0.020}  # TPOT on the 8B shape, docs/calibration.md
        uncached = PROMPTS[self.prompt] * (1 - SHARES[self.share])
        total = 0.0
        for c in LADDER:  # closed loop: c in flight; a request's life is decode-bound or queued behind prefill
            decode = OUTPUTS[self.output] * 1.25 * per_token[c]
            life = max(decode + uncached / PREFILL_TPS, c * uncached / PREFILL_TPS)
            total += self.warmup_s + self.measure_s + min(life, 40.0) + 2.0
        return total + 4.0


def all_shapes() -> list[Shape]:
    return [Shape(p, o, x) for p in PROMPTS for o in OUTPUTS for x in SHARES]


def shape_named(name: str) -> Shape:
    for s in all_shapes():
        if s.name == name:
            return s
    raise SystemExit(f"calibration_matrix: no shape {name!r} (one of {', '.join(s.name for s in all_shapes())})")


def shape_of_study(study: str) -> str | None:
    """The shape a matrix study measured (`matrix-TAG-SHAPE`), None for another study."""
    parts = study.split("-", 2)
    if len(parts) == 3 and parts[0] == "matrix":
        try:
            return shape_named(parts[2]).name
        except SystemExit:
            return None
    return None


def run(args: argparse.Namespace) -> int:
    deadline = time.monotonic() + args.deadline_s
    shapes = [shape_named(n) for n in args.shapes] if args.shapes else all_shapes()
    done, skipped = [], []
    for s in shapes:
        left = deadline - time.monotonic()
        if s.estimate_s() > left:
            skipped.append(s.name)
            print(f"[matrix] skip {s.name}: needs ~{s.estimate_s():.0f} s, {left:.0f} s left", flush=True)
            continue
        cmd = [sys.executable, "-m", "sweep.cli", "ladder", "--profile", "interactive", "--launcher", "attach",
               "--set", f"server.url={args.url}", "--config", args.config, "--db", args.db, "--out", args.out,
               "--study", f"matrix-{args.tag}-{s.name}", *s.overrides()]
        t0 = time.monotonic()
        print(f"[matrix] {s.name} (estimate {s.estimate_s():.0f} s, {left:.0f} s left)", flush=True)
        rc = subprocess.run(cmd, cwd=ROOT, timeout=max(left, 1.0), check=False).returncode
        print(f"[matrix] {s.name}: exit {rc} after {time.monotonic() - t0:.0f} s", flush=True)
        done.append(s.name)
    print(f"[matrix] measured {len(done)}: {' '.join(done)}; skipped {len(skipped)}: {' '.join(skipped)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="the shapes and each one's estimated H200 time")
    r = sub.add_parser("run", help="measure shapes on a running server through sweep's attach ladder")
    r.add_argument("--url", required=True)
    r.add_argument("--db", required=True)
    r.add_argument("--out", default="reports")
    r.add_argument("--config", required=True, help="the running server's knobs, as `sweep ladder --config`")
    r.add_argument("--tag", required=True, help="names the configuration in the study names (matrix-TAG-SHAPE)")
    r.add_argument("--deadline-s", type=float, default=400.0)
    r.add_argument("shapes", nargs="*")
    args = ap.parse_args(argv)
    if args.cmd == "list":
        for s in all_shapes():
            print(f"{s.name:<10} ~{s.estimate_s():4.0f} s  {' '.join(s.overrides()[1::2][:3])}")
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
