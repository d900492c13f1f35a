"""`python -m bench [NAME ...]`: run the named benchmarks (default: all) side by side in one process run."""

from __future__ import annotations

import importlib
import sys

BENCHES = {
    "client": "bench.client",  # load-generator capacity vs a reference client (issue: load generator)
    "virtual": "bench.virtual",  # CPU cost of a long virtual-time window (issue: simulated server)
    "search": "bench.search",  # GPU-hours to a near-best knee per sampler (issue: search)
    "workers": "bench.workers",  # wall time of one study with 1, 2, 4 workers (issue: many workers)
}


def main(argv: list[str]) -> int:
    names = argv or list(BENCHES)
    unknown = [n for n in names if n not in BENCHES]
    if unknown:
        print(f"error: unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(BENCHES)}", file=sys.stderr)
        return 2
    rc = 0
    for name in names:
        try:
            mod = importlib.import_module(BENCHES[name])
        except ModuleNotFoundError as exc:
            print(f"{name}: not available ({exc})", file=sys.stderr)
            rc = 1
            continue
        print(f"== bench {name} ==", flush=True)
        rc |= int(mod.main() or 0)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
