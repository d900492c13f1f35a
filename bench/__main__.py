"""`python -m bench [NAME ...]`: run the named benchmarks (default: all) side by side in one process run;
`--help` lists them. Results go to stdout and reports/bench/ (bench.write_result), never into docs/."""

from __future__ import annotations

import importlib
import sys

BENCHES = {  # name: (module, what it measures)
    "client": ("bench.client", "load-generator capacity against a reference client"),
    "virtual": ("bench.virtual", "CPU cost of a 30-minute virtual-time window and of a whole study"),
    "search": ("bench.search", "simulated GPU-hours to a near-best knee per search strategy"),
    "search-prior": ("bench.search_prior", "GPU-hours to a near-best winner under window noise, with and without the "
                     "simulated prior"),
    "workers": ("bench.workers", "wall time of one study with 1, 2 and 4 workers"),
    "intervals": ("bench.intervals", "how often a refined study's boundary interval covers a dense scan's crossing "
                  "under window noise"),
    "read-paths": ("bench.read_paths", "sweep compare / explain / export parquet: wall time and peak memory, the tree "
                   "before (BENCH_BEFORE) against this one"),
    "early-stop": ("bench.early_stop", "how often the early stop ends a window that should pass (at and under the "
                   "bound, queued requests) and what it saves on one that fails"),
    "night": ("bench.night_lean", "the answer in one night: today's interactive study against the prior, short windows "
              "far from the knee and early stop (issue 29)"),
}


def usage() -> str:
    width = max(map(len, BENCHES))
    lines = ["usage: make bench [ARGS='NAME ...']   (python -m bench [NAME ...]; default: every one)", "",
             "benchmarks:"]
    lines += [f"  {name:<{width}}  {what}" for name, (_, what) in BENCHES.items()]
    lines += ["", "Each prints its numbers; virtual, workers, search-prior, intervals, read-paths, night and early-stop also write "
              "reports/bench/bench-<name>.md (git-ignored).",
              "docs/bench-*.md are kept by hand, with the reading of the numbers: nothing rewrites them."]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if any(a in ("-h", "--help", "help") for a in argv):
        print(usage())
        return 0
    names = argv or list(BENCHES)
    unknown = [n for n in names if n not in BENCHES]
    if unknown:
        print(f"error: unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(BENCHES)}", file=sys.stderr)
        return 2
    rc = 0
    for name in names:
        try:
            mod = importlib.import_module(BENCHES[name][0])
        except ModuleNotFoundError as exc:
            print(f"{name}: not available ({exc})", file=sys.stderr)
            rc = 1
            continue
        print(f"== bench {name} ==", flush=True)
        rc |= int(mod.main() or 0)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
