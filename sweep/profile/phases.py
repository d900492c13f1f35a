"""The window each phase measures (screen, final, soak) and its length on the driver's clock."""

from __future__ import annotations

from sweep.profile import Profile, Window


def phase_window(profile: Profile, phase: str) -> Window:
    """The measured window of a phase: screening shortens measure_seconds by the profile's fraction, the soak
    measures for soak.duration_s, a final measures the profile's window."""
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
