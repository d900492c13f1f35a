"""Sessions (workload.sessions, issue 20 §1): every turn sends the conversation so far with the server's own replies."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from sweep.analysis.sessions import session_stats
from sweep.core.errors import ProfileError
from sweep.core.types import RequestRecord, ServerConfig, WindowResult
from sweep.drivers import worker
from sweep.drivers.http import HttpDriver
from sweep.drivers.virtual import VirtualDriver
from sweep.launchers.base import ServerHandle
from sweep.launchers.virtual import VirtualLauncher
from sweep.profile import Window, Workload, load_profile
from sweep.store.records import StoredRequestRow
from sweep.workload.sessions import Conversation, Reply, SessionStream
from tests.simserver import sim_server

ROOT = Path(__file__).resolve().parents[2]


def _workload(**sessions: object) -> Workload:
    return Workload.model_validate({
        "seed": 7, "prompt_len": {"kind": "uniform", "low": 40, "high": 120},
        "output_len": {"kind": "uniform", "low": 8, "high": 24},
        "shared_prefix": {"groups": 2, "length": 32, "share": 0.5},
        "sessions": {"turns": {"kind": "uniform", "low": 2, "high": 5}, "followup_len": {"kind": "fixed", "value": 20},
                     **sessions}})


def test_a_session_is_a_pure_function_of_seed_and_index() -> None:
    w = _workload(fanout={"kind": "uniform", "low": 1, "high": 3})
    a, b = SessionStream(w), SessionStream(w)
    assert a.at(5) == b.at(5) and a.at(5) != a.at(6)
    assert b.starting_at(5).at(0) == a.at(5)  # a view from position 5 holds the same session
    for k in range(40):
        s = a.at(k)
        assert 2 <= len(s.turns) <= 5 and all(1 <= len(t.branches) <= 3 for t in s.turns)
        assert all(len(m.input_ids) == 20 for t in s.turns[1:] for m in t.branches)  # later turns: followup_len
        first = s.turns[0].branches[0]
        assert 40 <= len(s.system_ids) + len(first.input_ids) <= 120  # turn 1: prompt_len, the system prompt included
        assert (s.prefix_group is None) == (s.system_ids == ())
    assert {a.at(k).prefix_group for k in range(40)} == {None, 0, 1}


def test_sessions_cannot_be_replayed_and_their_bounds_hold() -> None:
    with pytest.raises(ValueError, match="sessions are never replayed"):
        Workload.model_validate({"replay": True, "sessions": {}})
    with pytest.raises(ValueError, match="at most 16"):
        Workload.model_validate({"sessions": {"fanout": {"kind": "fixed", "value": 17}}})
    with pytest.raises(ProfileError, match="max_context"):
        load_profile(ROOT / "profiles" / "smoke.yaml", {"workload.sessions": {"max_context": 10**6}})


def test_turn_k_sends_turn_k_minus_1_and_the_reply_then_its_own_message() -> None:
    session = SessionStream(_workload()).at(3)
    conv = Conversation(session)
    previous: list[int] | None = None
    for t, turn in enumerate(session.turns):
        msg = turn.branches[0]
        body = conv.body("generate", msg, "m")
        ids = body["input_ids"]  # type: ignore[typeddict-item]
        assert ids[-len(msg.input_ids):] == list(msg.input_ids)
        if previous is not None:
            assert ids[:len(previous)] == previous
        reply = Reply(ids=[500 + t] * 7, text=" seven words of reply from the server")
        previous = list(ids) + reply.ids
        conv.add([(msg, reply)])
        chat = conv.body("chat", msg, "m")["messages"]  # type: ignore[typeddict-item]
        assert chat[-2] == {"role": "assistant", "content": reply.text}  # the reply is in the next turn's messages
    assert conv.tokens == len(previous or [])


def _virtual_window(w: Workload, users: int, *, warmup: int, measure_s: float) -> WindowResult:
    """One closed-loop window of sessions on the virtual driver, on a fresh simulated H200 (64 running slots)."""
    launcher = VirtualLauncher("H200")
    h = launcher.start(ServerConfig(max_running_requests=64))
    try:
        return VirtualDriver().run_window(h, SessionStream(w), users, Window(warmup_requests=warmup,
                                                                              measure_seconds=measure_s,
                                                                              drain_seconds=30.0))
    finally:
        launcher.stop(h)


def _records_by_session(records: list[RequestRecord]) -> dict[int, list[RequestRecord]]:
    out: dict[int, list[RequestRecord]] = defaultdict(list)
    for r in sorted(records, key=lambda r: (r.index, r.turn or 0, r.branch or 0)):
        out[r.index].append(r)
    return out


@pytest.mark.parametrize("api", ["generate", "chat"])
def test_on_the_wire_each_turn_carries_the_servers_own_reply(api: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Against the simulated server over HTTP: the body of turn k starts with turn k-1's body and the reply the
    server streamed to it (ids on /generate, the text on chat), and the server's cache hits that reply."""
    sent: list[tuple[object, Reply | None]] = []
    real = worker.Pool.stream

    async def recording(self: worker.Pool, path: str, body: object, sink: object) -> None:
        await real(self, path, body, sink)  # type: ignore[arg-type]
        sent.append((body, getattr(sink, "reply", None)))

    monkeypatch.setattr(worker.Pool, "stream", recording)
    w = _workload()
    with sim_server() as url:
        h = ServerHandle(config=ServerConfig(), url=url, simulated=True)
        res = HttpDriver(api=api).run_window(h, SessionStream(w), 3, Window(warmup_requests=0, measure_seconds=3.0,
                                                                             drain_seconds=10.0))
    assert len(sent) == len(res.records) > 6
    key = "input_ids" if api == "generate" else "messages"
    # every later turn's body begins with an earlier body of the same conversation plus that body's reply
    pairs = 0
    for body, _ in sent:
        prompt = body[key]  # type: ignore[index]
        found = False
        for other, reply in sent:
            before = other[key]  # type: ignore[index]
            if other is body or reply is None or len(before) >= len(prompt):
                continue
            if api == "generate" and prompt[:len(before) + len(reply.ids)] == list(before) + reply.ids:
                assert reply.ids  # the server sent its output ids and they came back verbatim
                found = True
            elif api == "chat" and prompt[:len(before) + 1] == [*before, {"role": "assistant", "content": reply.text}]:
                assert reply.text.strip()
                found = True
        pairs += found
    later = sum(1 for r in res.records if (r.turn or 0) > 1)
    assert pairs == later > 0
    if api == "generate":  # the simulated server caches a finished request's prompt and reply, as SGLang does
        for recs in _records_by_session(res.records).values():
            for a, b in zip(recs, recs[1:], strict=False):
                assert b.cached_tokens >= (a.prompt_tokens + a.output_tokens - 1) // 16 * 16 - 16


def test_fan_out_turns_run_in_parallel_and_the_next_turn_holds_every_branch() -> None:
    w = _workload(fanout={"kind": "fixed", "value": 3}, turns={"kind": "fixed", "value": 3})
    res = _virtual_window(w, 4, warmup=0, measure_s=20.0)
    sessions = _records_by_session(res.records)
    done = [recs for recs in sessions.values() if recs[0].session_turns == 3]
    assert done
    for recs in done:
        by_turn: dict[int, list[RequestRecord]] = defaultdict(list)
        for r in recs:
            by_turn[r.turn or 0].append(r)
        assert sorted(by_turn) == [1, 2, 3] and all(len(v) == 3 for v in by_turn.values())
        for t in (1, 2):
            branches = by_turn[t]
            ctx = branches[0].context_tokens
            assert {r.context_tokens for r in branches} == {ctx}
            assert len({r.sent_at for r in branches}) == 1  # sent together
            grown = ctx + sum(r.prompt_tokens - ctx + r.output_tokens for r in branches)
            assert by_turn[t + 1][0].context_tokens == grown
            assert min(r.sent_at for r in by_turn[t + 1]) >= max(r.finished_at or 0 for r in branches)


def test_cache_hits_rise_with_the_turn_on_the_virtual_driver() -> None:
    w = _workload(turns={"kind": "fixed", "value": 4})
    res = _virtual_window(w, 8, warmup=8, measure_s=30.0)
    rows = [StoredRequestRow(idx=r.index, scheduled_at=r.scheduled_at, sent_at=r.sent_at, warmup=r.warmup,
                             ttft_ms=1.0, e2e_ms=((r.finished_at or r.sent_at) - r.sent_at) * 1000,
                             prompt_tokens=r.prompt_tokens, cached_tokens=r.cached_tokens, error=r.error,
                             turn=r.turn, branch=r.branch, session_turns=r.session_turns) for r in res.records]
    stats = session_stats(rows)
    assert stats is not None and stats.sessions_completed > 5 and stats.turns_per_session == 4
    first, later = stats.turn(1), [stats.turn(k) for k in (2, 3, 4)]
    assert first is not None and first.cache_hit is not None and first.cache_hit < 0.4
    assert all(t is not None and t.cache_hit is not None and t.cache_hit > 0.7 for t in later), later


@pytest.mark.integration
@pytest.mark.slow
def test_a_sessions_study_reports_turns_and_its_cache_prediction_raises_no_false_warning(tmp_path: Path) -> None:
    """`sweep knee` on a sessions workload (virtual driver): the report's sessions section, and the measured hit rate
    of every step lies between the cache predictions from what was sent (no ⚠), as does a single-turn study's."""
    import json
    import sqlite3
    import subprocess
    import sys

    sess = json.dumps({"turns": {"kind": "uniform", "low": 2, "high": 5}, "followup_len": {"kind": "fixed",
                                                                                           "value": 40}})
    for name, extra in (("sessions", ["--set", f"workload.sessions={sess}"]), ("single", [])):
        db, out = tmp_path / f"{name}.db", tmp_path / name
        proc = subprocess.run([sys.executable, "-m", "sweep.cli", "knee", "--profile", "profiles/smoke.yaml", "--db",
                               str(db), "--out", str(out), "--driver", "virtual", "--no-progress", *extra],
                              cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
        with sqlite3.connect(db) as conn:
            rows = conn.execute("SELECT cache_hit_rate, cache_hit_rate_predicted, cache_hit_rate_capped FROM runs "
                                "WHERE status = 'completed'").fetchall()
        assert rows and all(p is not None and c is not None for _, p, c in rows), rows
        assert all(m <= p + 0.02 and c <= p + 1e-9 for m, p, c in rows), rows
        md = next(out.glob("*/report.md")).read_text()
        assert "⚠" not in md.split("## Prefix cache")[1].split("\n## ")[0]
        assert ("## Sessions (multi-turn)" in md) == (name == "sessions")
        if name == "sessions":
            assert all(m > 0.5 for m, _, _ in rows), rows  # later turns hit the conversation


def test_session_time_is_judged_only_on_completed_sessions_ending_in_the_window() -> None:
    from sweep.analysis.session_time import session_times_s

    rows = [  # (session, turn, session_turns, warmup, failed, sent s, finished s)
        (1, 1, 2, True, False, 0.0, 1.0), (1, 2, 2, False, False, 2.0, 3.5),  # began in the warm-up: 3.5 s
        (2, 1, 2, False, False, 1.0, 2.0), (2, 2, 2, False, True, 3.0, None),  # failed: not completed
        (3, 1, None, False, False, 1.0, 2.0),  # cut off by the window
        (4, 1, 1, True, False, 0.0, 0.5),  # ended inside the warm-up
        (5, None, None, False, False, 0.0, 1.0),  # not a session
    ]
    assert session_times_s(rows) == [3.5]


def test_an_sla_on_session_time_fails_a_step_and_a_tier_rejudges_it_alike() -> None:
    from sweep.analysis.measure import compute_stats
    from sweep.analysis.tiers import judge_stats
    from sweep.profile import SLA
    from sweep.store.queries import request_rows

    w = _workload(turns={"kind": "fixed", "value": 3})
    res = _virtual_window(w, 8, warmup=8, measure_s=30.0)
    loose, tight = SLA(session_s=600), SLA(session_s=0.05)
    assert compute_stats(res, loose, bootstrap=0).passes_sla
    stats = compute_stats(res, tight, bootstrap=0)
    assert not stats.passes_sla and "session P90" in stats.sla_failures, stats.sla_failures
    stored = [StoredRequestRow.from_row(row).judged() for row in request_rows(1, res.records, res.window_start)]
    base = compute_stats(res, loose, bootstrap=0)
    assert not judge_stats(base, stored, tight, bootstrap=0).passes_sla
    assert judge_stats(base, stored, loose, bootstrap=0).passes_sla


def test_images_stay_in_the_conversation_on_the_vl_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    """A multimodal session over the chat API against the simulated Qwen2.5-VL shape: a turn's images are sent
    again with every later turn (as chat clients keep them), and the server counts them in each prompt."""
    sent: list[dict[str, object]] = []
    real = worker.Pool.stream

    async def recording(self: worker.Pool, path: str, body: dict[str, object], sink: object) -> None:
        sent.append(body)
        await real(self, path, body, sink)  # type: ignore[arg-type]

    monkeypatch.setattr(worker.Pool, "stream", recording)
    w = Workload.model_validate({
        "seed": 3, "mix": {"text": 0.5, "image": 0.5}, "prompt_len": {"kind": "fixed", "value": 40},
        "output_len": {"kind": "fixed", "value": 8}, "media": {"image_width": 112, "image_height": 112},
        "sessions": {"turns": {"kind": "fixed", "value": 3}, "followup_len": {"kind": "fixed", "value": 10}}})
    with sim_server("--model-path", str(ROOT / "models" / "qwen2.5-vl-7b-shape")) as url:
        h = ServerHandle(config=ServerConfig(), url=url, simulated=True)
        res = HttpDriver(api="chat").run_window(h, SessionStream(w), 2, Window(warmup_requests=0, measure_seconds=3.0,
                                                                               drain_seconds=20.0))

    def images(body: dict[str, object]) -> list[str]:
        msgs = body["messages"]
        assert isinstance(msgs, list)
        return [p["image_url"]["url"] for m in msgs if isinstance(m["content"], list) for p in m["content"]
                if p.get("type") == "image_url"]

    assert all(r.error is None for r in res.records), [r.error for r in res.records]
    with_images = [b for b in sent if images(b)]
    assert with_images
    for body in sent:  # every image of an earlier user message is in this body, in order
        msgs = body["messages"]
        assert isinstance(msgs, list)
        users = [m for m in msgs if m["role"] == "user"]
        assert len(users) == sum(1 for m in msgs if m["role"] == "assistant") + 1
    by_session = _records_by_session(res.records)
    grew = 0
    for recs in by_session.values():
        kinds = [r.modality for r in recs]
        if "image" in kinds:
            first = kinds.index("image")
            assert all(k == "image" for k in kinds[first:])  # once an image is in, the conversation carries it
            grew += 1
        for a, b in zip(recs, recs[1:], strict=False):
            assert b.prompt_tokens > a.prompt_tokens + a.output_tokens  # the server counted the whole history
    assert grew > 0
