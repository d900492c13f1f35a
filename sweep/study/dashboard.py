"""What optuna-dashboard shows of a finished study: the winner, as the store holds it (study_winners), set as the
`winner` user attribute of every phase study (`<name>`, `<name>:baseline`, `<name>:final`, `<name>:soak`).

Optuna's own "best trial" of a phase study is its highest trial value, which for the screen is a short-window
screening result, not the study's answer; the attribute names the winner, its knee and the trial that measured it
(phase study and number). Each trial carries its knob values and phase as user attributes (sweep.study.search).
"""

from __future__ import annotations

import optuna

from sweep.core.types import JSON
from sweep.store import WinnerRecord
from sweep.study import liveness

PHASE_SUFFIXES = ("", ":baseline", ":final", ":soak")


def winner_attr(winner: WinnerRecord, trial: tuple[str, int] | None) -> dict[str, JSON]:
    """The `winner` user attribute: the primary tier's stored winner and the trial that measured its knee."""
    return {"tier": winner.tier, "config_id": winner.server_config_id, "config": winner.label,
            "knobs": winner.knobs(), "phase": winner.phase, "knee_concurrency": winner.concurrency,
            "goodput_tps": winner.goodput_tps, "goodput_ci_tps": [winner.goodput_ci_low, winner.goodput_ci_high],
            "why": winner.why, "trial": None if trial is None else {"study": trial[0], "number": trial[1]}}


def tell_winner(storage_url: str, study_name: str, winner: WinnerRecord) -> None:
    """Set the `winner` user attribute on every phase study of `study_name` that exists in the storage."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = liveness.optuna_storage(storage_url, 30.0, None)
    names = {s.study_name for s in optuna.get_all_study_summaries(storage, include_best_trial=False)}
    studies = [optuna.load_study(study_name=study_name + sfx, storage=storage)
               for sfx in PHASE_SUFFIXES if study_name + sfx in names]
    trial = None
    for st in studies:  # the winner's trial: its configuration, in the phase its knee comes from
        for t in st.get_trials(deepcopy=False):
            if (t.state == optuna.trial.TrialState.COMPLETE and winner.server_config_id is not None
                    and t.user_attrs.get("config_id") == winner.server_config_id
                    and t.user_attrs.get("phase") == winner.phase):
                trial = (st.study_name, t.number)
    attr = winner_attr(winner, trial)
    for st in studies:
        st.set_user_attr("winner", attr)
