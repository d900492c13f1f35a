"""Soak: the winner under Poisson arrivals at its knee rate for a long window; storms, queues and leaks judged.

The article's last step: after the knee is found, hold the chosen setting under real (Poisson) traffic
for an hour or more and confirm no preemption storm builds up. The verdict is a pure function of the
window's samples (`judge`), so the report recomputes it from the store; the run itself is stored with
phase 'soak' and the verdict's one-line summary as its reason.
"""

from __future__ import annotations

from sweep.analysis.run_stats import RunStats
from sweep.analysis.soak import SoakVerdict, judge, soak_rate
from sweep.analysis.winner import Winner
from sweep.core.types import WindowResult
from sweep.ladder.runner import LadderRunner
from sweep.profile import Profile, RateArrival
from sweep.profile.phases import phase_window


def run_soak(profile: Profile, runner: LadderRunner, winner: Winner) -> SoakVerdict:
    """Relaunch the winner, offer Poisson arrivals at its knee rate for soak.duration_s, store and judge it:
    a one-step ladder (phase soak) whose run's reason is the verdict's summary."""
    soak = profile.soak
    arrival = RateArrival(kind="poisson", rate=soak_rate(profile, winner.knee), max_in_flight=soak.max_in_flight)
    window = phase_window(profile, "soak")
    verdicts: list[SoakVerdict] = []

    def judged(result: WindowResult, stats: RunStats) -> str:
        verdict = judge(result.samples, soak, stats.sla_failures)
        if result.aborted:
            verdict.passed = False
            verdict.reasons.append(f"window aborted: {result.aborted}")
        verdicts.append(verdict)
        return verdict.summary()

    outcome = runner.run_judged(winner.config, soak.max_in_flight, window, arrival, judged,
                                complete=f"soak at {arrival.rate:.2f} req/s")
    if verdicts:
        return verdicts[-1]
    if outcome.stop_reason.startswith("launch "):
        return SoakVerdict(False, [f"the winner failed to start for the soak: {outcome.stop_reason[7:]}"])
    return SoakVerdict(False, [f"server died during the soak: {outcome.failure}"])
