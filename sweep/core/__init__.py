"""The vocabulary every layer shares, with no I/O: the knobs (`ServerConfig`), the records stages hand each other
(`WindowResult`, `RequestRecord`, `Sample`, `Placement`), the one error family (`SweepError`) and interrupts."""

from sweep.core.errors import (
    LaunchError,
    ProfileError,
    ServerDied,
    StoreError,
    SweepError,
    UsageError,
    WorkloadError,
)
from sweep.core.types import (
    KNOB_LABELS,
    KNOB_NAMES,
    SCHEDULE_POLICIES,
    SERVER_DIED,
    ClientSamples,
    MediaItem,
    Modality,
    Placement,
    RequestRecord,
    RequestSpec,
    Sample,
    SchedulePolicy,
    ServerConfig,
    WindowResult,
)

__all__ = [
    "ClientSamples", "KNOB_LABELS", "KNOB_NAMES", "LaunchError", "MediaItem", "Modality", "Placement",
    "ProfileError", "RequestRecord", "RequestSpec", "SCHEDULE_POLICIES", "SERVER_DIED", "Sample",
    "SchedulePolicy", "ServerConfig", "ServerDied", "StoreError", "SweepError", "UsageError",
    "WindowResult", "WorkloadError",
]
