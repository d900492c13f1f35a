"""The simulator's preset replayed on the held-out windows (tools/calibration_holdout.py judges them): what CI checks
(tests/sim/test_sim_calibration.py) and what a simulated report repeats (sglang_sim.fidelity.HELD_OUT). Apart from
calibrate.py and calibration_holdout.py so that neither imports the other at run time: calibrate.py's
`--holdout-shapes` prints the same table from its own fit."""

from __future__ import annotations

import functools
from pathlib import Path

import calibrate
from calibration_holdout import HOLDOUT_SHAPES, Holdout, holdout_report

from sglang_sim.params import Efficiency


@functools.cache
def held_out(data: Path | None = None) -> Holdout:
    """The preset (sglang_sim.params.Efficiency()) replayed on the stored held-out windows (once per process: the
    check and the bands read the same replay)."""
    held = [w for w in calibrate.load_all(data or calibrate.DATA) if w.shape in HOLDOUT_SHAPES]
    return holdout_report(held, calibrate.simulate(held, Efficiency()), calibrate.knee_of)


def held_out_check(data: Path | None = None) -> tuple[str, tuple[str, ...]]:
    h = held_out(data)
    return h.text, h.problems


def held_out_bands(data: Path | None = None) -> tuple[int, int, int]:
    """Worst judged held-out error, whole percent: throughput, TTFT P50, TTFT P99 (what a simulated report says)."""
    w = held_out(data).worst
    return (round(w["output_tps"] * 100), round(w["ttft_p50_ms"] * 100), round(w["ttft_p99_ms"] * 100))
