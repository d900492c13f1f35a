"""The window each phase measures (screen, final, refine, soak), its length on the driver's clock, and how many
windows a ladder of a phase may run."""

from __future__ import annotations

from sweep.profile import Profile, Window


def phase_window(profile: Profile, phase: str) -> Window:
    """The measured window of a phase: screening shortens measure_seconds by the profile's fraction, the soak
    measures for soak.duration_s, a final (and a refinement step of it) measures the profile's window."""
    w = profile.window
    if phase == "soak":
        return w.model_copy(update={"measure_seconds": profile.soak.duration_s})
    if phase != "screen":
        return w
    return w.model_copy(update={"measure_seconds": w.measure_seconds * profile.search.screening.fraction})


def phase_seconds(profile: Profile, phase: str) -> float:
    """A window of `phase` on the driver's clock: warm-up + measured + drain."""
    w = phase_window(profile, phase)
    return w.warmup_seconds + w.measure_seconds + w.drain_seconds


def refines(profile: Profile, phase: str) -> bool:
    """Whether a ladder of `phase` is refined (section refine): final ladders only, never in coupled mode (one
    launch per step: no warm server to refine on). An open-loop arrival.rates ladder is refined by its rate."""
    return profile.refine.enabled and phase == "final" and profile.search.mode != "coupled"


def ladder_windows(profile: Profile, phase: str) -> int:
    """The most windows one configuration's ladder of `phase` runs: its steps, and its refinement steps."""
    return len(profile.ladder) + (profile.refine.max_steps if refines(profile, phase) else 0)
