"""One answer everywhere (issue 22 §1): for a study with screening, whose best screening window beats the final
ladders' knee, the winner stored in study_winners is the one the report, `sweep show`, the live page's state, the
read model and optuna-dashboard's study attribute name; every Optuna trial carries its knobs and phase."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import optuna
import pytest

from sweep.store import Store
from sweep.views.live import read_state
from sweep.views.read_model import read_study

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.integration
def test_the_stored_winner_is_the_one_every_reader_names(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    proc = subprocess.run([sys.executable, "-m", "sweep.cli", "knee", "--profile", str(ROOT / "profiles" / "smoke.yaml"),
                           "--db", str(db), "--out", str(tmp_path / "rep"), "--driver", "virtual", "--study", "one",
                           "--no-progress", "--set", "search.screening.enabled=true",
                           "--set", "search.screening.fraction=0.4", "--set", "search.screening.keep=0.5"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    store = Store(f"sqlite:///{db}", readonly=True)
    study = store.get_study_by_name("one")
    assert study is not None
    [stored] = store.study_winners(study.id)
    assert stored.tier == "default" and stored.is_primary and stored.server_config_id is not None
    lo, hi, gp = stored.goodput_ci_low, stored.goodput_ci_high, stored.goodput_tps
    assert stored.phase == "final" and lo is not None and hi is not None and gp is not None
    assert lo <= gp <= hi  # goodput's unit, tok/s

    named = read_study(store, study.id).decision.named  # the read model
    assert named is not None and (named.id, named.knee.concurrency) == (stored.server_config_id, stored.concurrency)
    assert named.knee.goodput_tps == stored.goodput_tps and study.winner_config_id == stored.server_config_id
    live = read_state(store, study.id).winner  # the live page
    assert live is not None and (live.config, live.concurrency) == (stored.label, stored.concurrency)
    report = (tmp_path / "rep" / "one" / "report.md").read_text()
    assert f"- **Winner**: {stored.label}\n" in report
    assert f"{stored.goodput_tps:,.0f} output tok/s inside the SLA" in report
    [unbracketed] = [ln for ln in report.splitlines() if ln.startswith("> **Not bracketed** (")]
    assert unbracketed.count(f"{stored.label} (c=") == 1  # its screen and final ladders: one configuration, once
    shown = json.loads(subprocess.run([sys.executable, "-m", "sweep.cli", "show", "one", "--db", str(db), "--format",
                                       "json"], capture_output=True, text=True, timeout=120, cwd=tmp_path).stdout)
    assert shown["winners"][0]["server_config_id"] == stored.server_config_id
    assert shown["winners"][0]["knobs"] == stored.knobs() == named.config.knobs()

    storage = f"sqlite:///{db}"
    screen = optuna.load_study(study_name="one", storage=storage)
    final = optuna.load_study(study_name="one:final", storage=storage)
    # the screen's best trial is a short window that beats the final knee: Optuna's "best" is not the answer (1.2 s
    # screen windows: 1,011 against 968 tok/s; at fraction 0.5 the windows' warm-up, since issue 28 §1 counted in
    # completed requests, left the 1.5 s screen windows at 963) ...
    assert screen.best_value > stored.goodput_tps
    for st in (screen, final):  # ... the `winner` attribute is, with the trial that measured it
        attr = st.user_attrs["winner"]
        assert (attr["config_id"], attr["knee_concurrency"], attr["goodput_tps"]) == \
            (stored.server_config_id, stored.concurrency, stored.goodput_tps)
        assert attr["knobs"] == stored.knobs() and attr["trial"] == {"study": "one:final", "number": 0}
    for t in screen.trials + final.trials:  # every trial carries its knob values and its phase
        assert t.user_attrs["phase"] in ("screen", "final")
        knobs = {k: t.user_attrs[k] for k in ("max_running_requests", "mem_fraction_static")}
        assert t.user_attrs["config"] == f"mrr={knobs['max_running_requests']} mem={knobs['mem_fraction_static']}"
    assert final.trials[0].user_attrs["max_running_requests"] == stored.knobs()["max_running_requests"]
