"""The knob vocabulary has one home, ServerConfig (sweep/core/types.py): every other module takes it from there."""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from pathlib import Path

import pytest

from sglang_sim.cli import POLICIES
from sglang_sim.params import EngineKnobs
from sweep.core.types import KNOB_LABELS, KNOB_NAMES, SCHEDULE_POLICIES, ServerConfig, _knob
from sweep.engines import SGLANG
from sweep.launchers.sglang import KEPT_INFO, pick_server_info
from sweep.profile import Space
from sweep.store.models import KNOB_COLUMNS, ServerConfigRow

ROOT = Path(__file__).resolve().parents[2]
KNOB_QUOTED = re.compile(r"[\"'](" + "|".join(KNOB_NAMES) + r")[\"']")


def test_every_stage_uses_server_configs_knob_list() -> None:
    assert KNOB_NAMES == tuple(f.name for f in fields(ServerConfig) if f.name not in ("flags", "fixed"))
    assert set(KNOB_LABELS) == set(KNOB_NAMES)
    assert tuple(Space.model_fields) == KNOB_NAMES  # the profile's search space: one field per knob
    assert KNOB_COLUMNS is KNOB_NAMES
    assert set(KNOB_NAMES) <= set(ServerConfigRow.__table__.columns.keys())
    assert set(KNOB_NAMES) <= set(KEPT_INFO)  # /server_info keeps every knob
    assert set(KNOB_NAMES) <= {f.name for f in fields(EngineKnobs)}  # the simulator honours every knob


def test_no_module_outside_server_config_spells_a_knob_list_out() -> None:
    """A knob name in quotes (a list, a dict key) appears only in sweep/core/types.py; the frozen Alembic migrations and
    the simulator (sglang_sim, not scanned: it parses SGLang's own flags and imports nothing from sweep) keep
    their own spelling."""
    offenders = []
    for path in sorted([*(ROOT / "sweep").rglob("*.py"), *(ROOT / "launchers").rglob("*.py")]):
        rel = path.relative_to(ROOT).as_posix()
        if rel == "sweep/core/types.py" or "/migrations/" in rel:
            continue
        text = path.read_text()
        lines = [i + 1 for i, ln in enumerate(text.splitlines()) if len(KNOB_QUOTED.findall(ln)) > 1]
        if lines:
            offenders.append(f"{rel}:{lines}")
    assert offenders == []


def test_schedule_policies_are_sglangs_and_the_simulators() -> None:
    assert tuple(POLICIES) == SCHEDULE_POLICIES
    assert Space(schedule_policy=["shortest-prefill-first"]).schedule_policy == ["shortest-prefill-first"]


def test_knob_args_is_the_one_flag_spelling() -> None:
    cfg = ServerConfig(max_running_requests=64, chunked_prefill_size=-1, schedule_policy="lpm")
    assert SGLANG.knob_args(cfg) == ["--max-running-requests", "64", "--chunked-prefill-size", "-1",
                             "--schedule-policy", "lpm"]
    assert cfg.label() == "mrr=64 chunk=-1 policy=lpm"
    assert ServerConfig().label() == "defaults" and SGLANG.knob_args(ServerConfig()) == []


def test_from_mapping_types_each_knob_and_ignores_other_keys() -> None:
    row = {"id": 3, "max_running_requests": "64", "mem_fraction_static": 1, "schedule_policy": "fcfs",
           "chunked_prefill_size": None, "status": "completed"}
    cfg = ServerConfig.from_mapping(row)
    assert cfg == ServerConfig(max_running_requests=64, mem_fraction_static=1.0, schedule_policy="fcfs")
    assert isinstance(cfg.mem_fraction_static, float)
    assert ServerConfig.from_mapping(cfg.columns()) == cfg
    assert ServerConfig.from_mapping(pick_server_info({"max_running_requests": 8, "api_key": "k"})) == \
        ServerConfig(max_running_requests=8)
    with pytest.raises(ValueError, match="max_running_requests='6.5' is not an int"):
        ServerConfig.from_mapping({"max_running_requests": "6.5"})


def test_a_fifth_knob_is_one_more_field() -> None:
    """Names, label, flag, typing and columns follow the fields; what else a knob needs (its search domain in
    profile.Space, a store column and its migration, the simulator's EngineKnobs) the first test names."""

    @dataclass(frozen=True)
    class WithFifth(ServerConfig):
        max_prefill_tokens: int | None = _knob("prefill", int)

    cfg = WithFifth.from_mapping({"max_prefill_tokens": "8192", "max_running_requests": 4})
    assert SGLANG.knob_args(cfg) == ["--max-running-requests", "4", "--max-prefill-tokens", "8192"]
    assert cfg.label() == "mrr=4 prefill=8192"
    assert cfg.columns()["max_prefill_tokens"] == 8192 and cfg.key() != ServerConfig(max_running_requests=4).key()
