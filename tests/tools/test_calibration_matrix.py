"""The calibration matrix of workload shapes (tools/calibration_matrix.py) and the held-out judgement's stall
detector (tools/calibration_holdout.py): the shapes are valid studies of the interactive profile, the stored matrix
holds every shape, and a real server's one-off pause is told from ordinary latency."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

from calibration_holdout import HOLDOUT_SHAPES, server_stall  # noqa: E402
from calibration_matrix import LADDER, all_shapes, shape_of_study  # noqa: E402

from sweep.cli.app import load_profile_arg  # noqa: E402


def test_every_shape_is_a_valid_interactive_study():
    shapes = all_shapes()
    assert len(shapes) == 18 and len({s.name for s in shapes}) == 18
    for s in shapes:
        sets = s.overrides()
        prof = load_profile_arg("interactive", [v for k, v in zip(sets[::2], sets[1::2], strict=True)])
        assert list(prof.ladder) == list(LADDER)
        lo, hi = prof.workload.prompt_len.low, prof.workload.prompt_len.high
        sp = prof.workload.shared_prefix
        assert sp.length < hi if sp.groups else sp.share == 0, s.name  # the shared part never exceeds the prompt
        assert lo < hi and prof.window.measure_seconds >= 6 and not prof.refine.enabled
        assert shape_of_study(f"matrix-B-{s.name}") == s.name
    assert shape_of_study("kv-calib") is None and shape_of_study("matrix-A-pX-oS-x0") is None
    assert set(HOLDOUT_SHAPES) <= {s.name for s in shapes}


def test_the_stored_matrix_covers_every_shape_and_the_held_out_ones_on_two_configurations():
    from calibration_data import load_export

    windows = load_export(ROOT / "docs" / "calibration-data" / "matrix.json")
    assert {w.shape for w in windows} == {s.name for s in all_shapes()}
    held = {(w.shape, w.knobs.max_running_requests) for w in windows if w.shape in HOLDOUT_SHAPES}
    assert {cap for _, cap in held} == {256, 64}
    assert all(w.first_tokens for w in windows)  # send times kept: the stall detector needs them


@dataclass
class _W:
    first_tokens: tuple[tuple[float, float], ...]
    run_id: str = "x"
    config_id: str = "x"
    concurrency: int = 16
    real: dict[str, float] = field(default_factory=dict)
    shape: str | None = None


def test_a_server_stall_is_told_from_latency():
    ordinary = tuple((i * 0.05, 30.0 + (i % 7) * 9) for i in range(200))
    assert server_stall(_W(ordinary)) is None
    # five requests sent over 0.4 s all get their first token at t = 1.5 s: the server answered nobody meanwhile
    stalled = ordinary + tuple((1.1 + k * 0.1, (1.5 - 1.1 - k * 0.1) * 1000) for k in range(5))
    when, longest = server_stall(_W(stalled))
    assert abs(longest - 400.0) < 1e-6 and abs(when - 1.1) < 1e-6
    # slow requests answered at different instants are latency, not a stall
    spread = ordinary + tuple((1.0 + k, 300.0) for k in range(5))
    assert server_stall(_W(spread)) is None
