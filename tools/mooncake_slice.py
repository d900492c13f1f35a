"""Write a SYNTHETIC trace slice in the FAST'25 Mooncake trace format (one JSON object per line:
{"timestamp": ms, "input_length": tokens, "output_length": tokens, "hash_ids": [one id per 512-token block]}).

Not the recorded Mooncake trace (sweep's machines cannot download it): a deterministic stand-in with its shape, so
a replay exercises what the real one does: bursty arrivals (gamma gaps, CV about 1.6, under a slow swell of the
rate), shared system prompts (a few popular prefixes of 1-8 blocks, Zipf-chosen) and multi-turn sessions whose
later prompts repeat the earlier prompt's blocks and add new ones (35% of requests). The same arguments always
write the same file.

    python3 tools/mooncake_slice.py OUT.jsonl --seconds 180 --rate 4 --seed 31 [--max-blocks 16]
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

BLOCK = 512


def slice_lines(seconds: float, rate: float, seed: int, max_blocks: int = 16, systems: int = 12) -> list[str]:
    """The trace's lines: sends over `seconds` at `rate` req/s on average."""
    rng = np.random.default_rng([seed, 0x4D4F4F4E])
    next_id = 0

    def fresh(n: int) -> list[int]:
        nonlocal next_id
        ids = list(range(next_id, next_id + n))
        next_id += n
        return ids

    prefixes = [fresh(int(rng.integers(1, 9))) for _ in range(systems)]
    zipf = 1.0 / np.arange(1, systems + 1) ** 1.1
    zipf /= zipf.sum()
    live: list[tuple[list[int], float]] = []  # sessions that may continue: their last prompt's blocks, its time
    lines: list[str] = []
    t, shape = 0.0, 1.0 / 1.6**2
    while t < seconds:
        swell = 1.0 + 0.5 * math.sin(2 * math.pi * t / 60.0)  # the rate swells and ebbs over a minute
        ready = [k for k, (_, last) in enumerate(live) if t - last >= 3.0]  # a reply read and answered
        if ready and rng.random() < 0.35:
            k = ready[int(rng.integers(len(ready)))]
            ids = live[k][0] + fresh(int(rng.integers(1, 4)))  # the conversation so far, its reply, a new message
            if len(ids) > max_blocks:
                live.pop(k)
                ids = prefixes[int(rng.choice(systems, p=zipf))] + fresh(int(rng.integers(1, 4)))
                live.append((ids, t))
            else:
                live[k] = (ids, t)
        else:
            ids = prefixes[int(rng.choice(systems, p=zipf))] + fresh(int(rng.integers(1, 5)))
            live.append((ids, t))
            if len(live) > 64:
                live.pop(0)
        n_in = len(ids) * BLOCK - int(rng.integers(0, BLOCK))
        n_out = int(np.clip(rng.lognormal(math.log(160), 0.8), 1, 2048))
        lines.append(json.dumps({"timestamp": int(round(t * 1000)), "input_length": n_in, "output_length": n_out,
                                 "hash_ids": ids}))
        t += float(rng.gamma(shape, 1.0 / (rate * swell * shape)))
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--seconds", type=float, default=180.0)
    ap.add_argument("--rate", type=float, default=4.0)
    ap.add_argument("--seed", type=int, default=31)
    ap.add_argument("--max-blocks", type=int, default=16)
    a = ap.parse_args()
    lines = slice_lines(a.seconds, a.rate, a.seed, a.max_blocks)
    a.out.write_text("\n".join(lines) + "\n")
    print(f"{a.out}: {len(lines)} requests over {a.seconds:g} s (synthetic, Mooncake format)")


if __name__ == "__main__":
    main()
