"""The `night` stage's two studies side by side (issue 29): each one's winner, knee and GPU cost.

usage: python3 tools/sglang-h200/night_summary.py RESULTS_DB STUDY [STUDY ...]
"""

from __future__ import annotations

import sys

from sweep.store import Store
from sweep.views.cost import study_cost
from sweep.views.read_model import read_study


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    store = Store(argv[0] if "://" in argv[0] else f"sqlite:///{argv[0]}")
    winners = []
    for name in argv[1:]:
        study = store.get_study_by_name(name)
        if study is None:
            print(f"{name}: not in {argv[0]}")
            continue
        model = read_study(store, study.id)
        w = model.decision.winner
        label = "no winner" if w is None else (f"{w.config.label()} knee c={w.knee.concurrency} "
                                               f"{w.knee.goodput_tps:.0f} tok/s")
        winners.append(None if w is None else w.config.label())
        windows = [r for r in model.runs if r.status == "completed"]
        short = sum(r.short_window for r in windows)
        print(f"{name}: winner {label}; {len(windows)} windows ({short} short); {study_cost(model).line()}")
    if len(winners) > 1:
        print("same winner" if len(set(winners)) == 1 and winners[0] is not None else "winners differ")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
