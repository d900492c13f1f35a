"""Both kinds of stream (single requests, sessions) are one StreamView: drivers, the step inputs and the cache
prediction ask the base (capacity, first request, prefetch, a later view) instead of asking which kind it is."""

from __future__ import annotations

import pickle

from sweep.profile import Workload
from sweep.workload.sessions import SessionStream
from sweep.workload.stream import RequestStream, open_stream, spec_at, view_from
from sweep.workload.stream_view import StreamView

SESSIONS = {"turns": {"kind": "fixed", "value": 3}, "followup_len": {"kind": "fixed", "value": 20}}


def _workload(sessions: bool) -> Workload:
    return Workload.model_validate({"seed": 5, "num_requests": 40, "prompt_len": {"kind": "fixed", "value": 60},
                                    "output_len": {"kind": "fixed", "value": 8},
                                    **({"sessions": SESSIONS} if sessions else {})})


def test_both_streams_are_views_of_one_base() -> None:
    requests, sessions = open_stream(_workload(False)), open_stream(_workload(True))
    assert isinstance(requests, RequestStream) and isinstance(sessions, SessionStream)
    for stream in (requests, sessions):
        assert isinstance(stream, StreamView) and stream.capacity is None
        later = view_from(stream, 10)
        assert type(later) is type(stream) and isinstance(later, StreamView)
        assert later.start == 10 and later.parts is stream.parts  # one stream's parts, made once
        assert spec_at(later, 0) == spec_at(stream, 10) == stream.first_request(10)
        copy = pickle.loads(pickle.dumps(later))  # what a spawned client process gets
        assert type(copy) is type(stream) and copy.first_request(0) == later.first_request(0)


def test_a_session_view_hands_out_its_sessions_first_message_and_takes_no_warm_up_positions() -> None:
    sessions = SessionStream(_workload(True))
    assert sessions.first_request(2) == sessions.at(2).turns[0].branches[0]
    assert RequestStream(_workload(False)).first_request(2).index == 2
    assert (RequestStream.WARMUP_TAKES_POSITIONS, SessionStream.WARMUP_TAKES_POSITIONS) == (True, False)
