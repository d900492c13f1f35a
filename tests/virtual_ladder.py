"""One configuration's ladder on the simulated server through the virtual-time driver, with a prior's predicted knee:
the LadderRunner set up as a study would set it up (its store, study row, launcher, driver and request stream)."""

from __future__ import annotations

import uuid
from pathlib import Path

from sweep.ladder.parts import LadderHooks
from sweep.ladder.runner import LadderRunner
from sweep.ladder.wiring import make_driver, make_launcher, model_path
from sweep.profile import Profile
from sweep.store import Store
from sweep.workload.lexicon import for_model
from sweep.workload.stream import RequestStream

ROOT = Path(__file__).resolve().parents[1]


def virtual_runner(prof: Profile, tmp_path: Path, predicted_knee: float | None,
                   name: str = "ladder") -> tuple[LadderRunner, Store, int]:
    """A runner on the simulator (virtual driver) whose hooks predict `predicted_knee` for every configuration; its
    store (a SQLite file in `tmp_path`) and the study id its windows land in."""
    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    study_id = store.create_study(f"{name}-{uuid.uuid4().hex[:8]}", prof.name, prof.model_dump_json(),
                                  prof.fingerprint(), "grid", True, "virtual", None)
    launcher = make_launcher(prof, "sim", "virtual", tmp_path / "logs")
    specs = RequestStream(prof.workload, base_dir=ROOT, lexicon=for_model(model_path(prof)))
    runner = LadderRunner(prof, launcher, make_driver(prof, "virtual", launcher), store, study_id, specs, "virtual",
                          LadderHooks(predicted_knee=lambda _c: predicted_knee))
    return runner, store, study_id
