"""The simulated H200 against the real KV-bound windows stored in docs/calibration-data (issue 10 §5).

The real SGLang 0.5.17 server ran models/llama3-8b-shape (vocab 1024: 13.0 GiB of weights, not the 15 GiB of
Llama-3-8B); its logged KV pool was 52,275 tokens at --mem-fraction-static 0.14 and 86,495 at 0.17.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

from calibrate import knee_of, pool_check, replay_model, simulate  # noqa: E402
from calibration_data import load_export  # noqa: E402

from sglang_sim.params import Efficiency  # noqa: E402

DATA = ROOT / "docs" / "calibration-data"


def test_kv_pool_matches_the_real_server_log():
    """kv-calib (mem 0.14, 0.17) and the matrix (0.6, 0.85): the predicted pool within 2% of the logged one."""
    checks = pool_check(DATA)
    assert [f for f, _, _ in checks] == [0.14, 0.17, 0.6, 0.85]
    for _frac, real, sim in checks:
        assert abs(sim / real - 1) < 0.02, (real, sim)


def test_held_out_workload_shapes_stay_within_their_bounds():
    """Issue 21 §2: the preset replayed on the matrix's held-out shapes (whole workload shapes its fit never saw):
    throughput within 10%, TTFT P50 within 25%, TTFT P99 within 35% below the knee, the same knee; a figure outside
    fails unless calibration_holdout.KNOWN_MISSES names it with its reason (docs/calibration.md)."""
    from calibration_replay import held_out_check

    text, problems = held_out_check(DATA)
    assert not problems, text


def test_the_report_repeats_the_held_out_bands():
    """sglang_sim.fidelity.HELD_OUT (what a simulated report says) is what the held-out replay measures."""
    from calibration_replay import held_out_bands

    from sglang_sim.fidelity import HELD_OUT

    bands = held_out_bands(DATA)
    assert (HELD_OUT.throughput_pct, HELD_OUT.ttft_p50_pct, HELD_OUT.ttft_p99_pct) == bands


def test_replay_uses_the_shape_the_real_server_ran():
    prof = load_export(DATA / "kv-calib.json")[0].profile
    model = replay_model(prof)
    assert model.name == "llama3-8b-shape"
    assert 6.9e9 < model.params < 7.1e9  # vocab 1024: no 1e9 parameters of embeddings and lm_head


def _kv_bound_ladder():
    ladder = [w for w in load_export(DATA / "kv-calib.json") if w.knobs.mem_fraction_static == 0.14]
    assert [w.concurrency for w in ladder] == [16, 32, 64]
    return ladder, simulate(ladder, Efficiency())


def test_kv_bound_ladder_held_out_accuracy_and_knee():
    """mem 0.14 is held out of split A's fit (the preset): output tok/s within 15% at every step, the same knee,
    TTFT P50 within 25% below the knee."""
    ladder, sim = _kv_bound_ladder()
    for w in ladder:
        assert sim[w.run_id]["output_tps"] == pytest.approx(w.real["output_tps"], rel=0.15), w.run_id
    for w in ladder[:2]:
        assert sim[w.run_id]["ttft_p50_ms"] == pytest.approx(w.real["ttft_p50_ms"], rel=0.25), w.run_id
    thr = ladder[0].profile.search.flatten_threshold
    assert knee_of([(w.concurrency, sim[w.run_id]) for w in ladder], thr) == 32
    assert knee_of([(w.concurrency, w.real) for w in ladder], thr) == 32


@pytest.mark.xfail(strict=True, reason="known miss (docs/calibration.md): one step past the KV-bound knee the sim's "
                   "queue is shorter than the real one, TTFT P50 -34% to -45% (depends on the regenerated requests)")
def test_kv_bound_ttft_p50_past_the_knee_within_25_percent():
    ladder, sim = _kv_bound_ladder()
    w = ladder[2]
    assert sim[w.run_id]["ttft_p50_ms"] == pytest.approx(w.real["ttft_p50_ms"], rel=0.25)


def test_shape_preset_is_the_shipped_model_folder():
    from sglang_sim.params import model_preset
    from sglang_sim.shape import model_from_config

    folder, preset = model_from_config(ROOT / "models" / "llama3-8b-shape"), model_preset("llama3-8b-shape")
    assert preset.params == pytest.approx(folder.params, rel=1e-4)
    assert (preset.layers, preset.hidden, preset.kv_heads, preset.context_len) == (
        folder.layers, folder.hidden, folder.kv_heads, folder.context_len)
