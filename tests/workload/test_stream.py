"""The request stream: request i is a pure function of (workload, i); replay and finite datasets; the hit-rate model."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from sweep.core.errors import ProfileError
from sweep.core.types import RequestRecord
from sweep.profile import Workload, load_profile
from sweep.workload.requests import build_workload
from sweep.workload.stream import RequestStream, StreamExhausted, next_position, spec_at

FIX = Path(__file__).parents[1] / "fixtures"
ROOT = Path(__file__).resolve().parents[2]
PREFIXED = {"groups": 3, "length": 32, "share": 0.5}


def test_request_i_is_the_same_from_any_view_and_after_pickling() -> None:
    w = Workload(seed=3, num_requests=50, shared_prefix=PREFIXED)
    stream = RequestStream(w)
    later = RequestStream(w).starting_at(40)
    assert [later.at(k) for k in range(20)] == [stream.at(40 + k) for k in range(20)]
    assert [s.index for s in (later.at(k) for k in range(20))] == list(range(40, 60))
    copy = pickle.loads(pickle.dumps(later))
    assert copy.at(7) == stream.at(47)
    assert build_workload(w) == [stream.at(i) for i in range(50)]  # the pool is the stream's first requests


def test_fresh_stream_never_repeats_a_prompt_but_replay_cycles_the_pool() -> None:
    w = Workload(seed=4, num_requests=30)
    fresh = RequestStream(w)
    prompts = [fresh.at(i).input_ids for i in range(90)]
    assert len(set(prompts)) == 90  # past num_requests: still new requests
    replay = RequestStream(w.model_copy(update={"replay": True}))
    assert replay.at(31).input_ids == replay.at(1).input_ids == fresh.at(1).input_ids
    assert replay.at(31).index == 31  # the position still names the send


def test_a_dataset_runs_out_with_one_line_naming_replay() -> None:
    w = Workload(dataset={"path": str(FIX / "workload_prompts.jsonl")})
    stream = RequestStream(w)
    assert stream.capacity == 4  # four entries (one line of the file is blank)
    assert len({stream.at(i).input_ids for i in range(4)}) == 4
    with pytest.raises(StreamExhausted, match="workload.replay: true") as exc:
        stream.at(4)
    assert "\n" not in str(exc.value)
    replayed = RequestStream(w.model_copy(update={"replay": True}))
    assert replayed.capacity is None and replayed.at(4).input_ids == replayed.at(0).input_ids


def test_spec_at_cycles_a_plain_list_and_next_position_is_past_the_highest_used() -> None:
    specs = build_workload(Workload(seed=1, num_requests=3))
    assert spec_at(specs, 4) == specs[1]
    recs = [RequestRecord(index=i, concurrency=1, scheduled_at=0, sent_at=0) for i in (10, 14, 12)]
    assert next_position(recs, 10) == 15
    assert next_position([], 10) == 10


@pytest.mark.parametrize(("field", "value"), [("workload.replay", 1), ("workload.replay", "yes"),
                                              ("window.flush_cache", 0), ("window.flush_cache", "no")])
def test_new_switches_take_booleans_only(field: str, value: object) -> None:
    with pytest.raises(ProfileError, match=field.split(".")[1]):
        load_profile(ROOT / "profiles" / "smoke.yaml", {field: value})


def test_defaults_send_fresh_requests_and_flush_between_steps() -> None:
    prof = load_profile(ROOT / "profiles" / "smoke.yaml")
    assert prof.workload.replay is False and prof.window.flush_cache is True


