"""The window each phase measures (screen, final, refine, soak), its length on the driver's clock, how many
windows a ladder of a phase may run, and where a screen ladder starts near the prior's predicted knee."""

from __future__ import annotations

from collections.abc import Sequence

from sweep.profile import Profile, Window


def phase_window(profile: Profile, phase: str) -> Window:
    """The measured window of a phase: screening shortens measure_seconds by the profile's fraction, the soak
    measures for soak.duration_s, a final (and a refinement step of it) measures the profile's window; "probe" is
    the probe screen's window (`probe_window`)."""
    w = profile.window
    if phase == "probe":  # the probe screen's one window (stored as a screen window)
        return probe_window(profile)
    if phase == "soak":
        return w.model_copy(update={"measure_seconds": profile.soak.duration_s})
    if phase != "screen":
        return w
    return w.model_copy(update={"measure_seconds": w.measure_seconds * profile.search.screening.fraction})


def probe_window(profile: Profile) -> Window:
    """The probe screen's one window per survivor (search.screening.probe): measure_seconds x its fraction."""
    w = profile.window
    return w.model_copy(update={"measure_seconds": w.measure_seconds * profile.search.screening.probe.fraction})


def phase_seconds(profile: Profile, phase: str) -> float:
    """A window of `phase` on the driver's clock: warm-up + measured + drain."""
    w = phase_window(profile, phase)
    return w.warmup_seconds + w.measure_seconds + w.drain_seconds


def refines(profile: Profile, phase: str) -> bool:
    """Whether a ladder of `phase` is refined (section refine): final ladders only, never in coupled mode (one
    launch per step: no warm server to refine on). An open-loop arrival.rates ladder is refined by its rate."""
    return profile.refine.enabled and phase == "final" and profile.search.mode != "coupled"


CLIMB_RATE_DOUBLINGS = 3  # an open-loop rate ladder climbs on at most this many doublings past its top rate


def climbs_on(profile: Profile, phase: str) -> bool:
    """Whether a ladder of `phase` that passes its top step climbs on past it (issue 28 §2): final ladders only,
    never in coupled mode (one launch per step), and only while `ladder_max` lies above the ladder's top (a rate
    ladder's too: setting ladder_max to its top step turns climbing on off)."""
    if phase != "final" or profile.search.mode == "coupled":
        return False
    return profile.ladder_max > profile.ladder[-1]


def climb_steps(profile: Profile) -> int:
    """The most windows a final ladder climbs on past its top: doublings up to ladder_max (a rate ladder: at most
    CLIMB_RATE_DOUBLINGS doublings of its top rate)."""
    if not climbs_on(profile, "final"):
        return 0
    if profile.rate_ladder:
        return CLIMB_RATE_DOUBLINGS
    n, c = 0, profile.ladder[-1]
    while c < profile.ladder_max:
        c, n = min(2 * c, profile.ladder_max), n + 1
    return n


def ladder_windows(profile: Profile, phase: str) -> int:
    """The most windows one configuration's ladder of `phase` runs: its steps, the steps it climbs on past its top,
    and its refinement steps."""
    return (len(profile.ladder) + (climb_steps(profile) if climbs_on(profile, phase) else 0)
            + (profile.refine.max_steps if refines(profile, phase) else 0))


def ladder_loads(profile: Profile) -> list[float]:
    """A final ladder's loads at most: its steps and its climb past the top (refinement not included)."""
    loads = [float(x) for x in profile.ladder]
    c = loads[-1]
    for _ in range(climb_steps(profile) if climbs_on(profile, "final") else 0):
        c = min(2 * c, float(profile.ladder_max)) if not profile.rate_ladder else 2 * c
        loads.append(c)
    return loads


def probe_load(profile: Profile, predicted_knee: float | None) -> int | None:
    """The load a probe measures (search.screening.probe): the highest ladder step (its climb included) at or below
    the prior's predicted knee, the lowest step for a knee below every step; None without a prediction."""
    if predicted_knee is None or predicted_knee <= 0:
        return None
    loads = ladder_loads(profile)
    return int(max((x for x in loads if x <= predicted_knee * (1 + 1e-9)), default=loads[0]))


def step_load(profile: Profile, concurrency: int) -> float:
    """A ladder step's load: its offered rate (req/s) in an open-loop rate ladder, else its concurrency."""
    rates = profile.ladder_rates
    if rates and concurrency in profile.ladder:
        return float(rates[profile.ladder.index(concurrency)])
    return float(concurrency)


def near_knee_start(profile: Profile, ladder: Sequence[int], predicted_knee: float | None) -> int:
    """Where a screen ladder starts (search.screening.near_knee): the index into `ladder` of its first step whose
    load (`step_load`) is at or above predicted_knee / search.far_windows.factor; the steps before it are far below
    the knee (they pass and do not rank) and are skipped. No step that high: the top step alone. No prediction
    (None or <= 0), near_knee off, or an empty ladder: 0, the whole ladder. The skipped steps are measured downward
    only where every measured step fails its SLA (sweep.ladder.runner)."""
    if not profile.search.screening.near_knee or predicted_knee is None or predicted_knee <= 0 or not ladder:
        return 0
    floor = predicted_knee / profile.search.far_windows.factor
    return next((i for i, c in enumerate(ladder) if step_load(profile, c) >= floor * (1 - 1e-9)), len(ladder) - 1)
