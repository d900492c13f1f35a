"""One error family: callers catch what they mean; the CLI maps each to an exit code and one line."""

from __future__ import annotations


class SweepError(Exception):
    """Base of every error a user can act on."""

    exit_code = 1


class ProfileError(SweepError):
    """A profile file is missing, unparsable or invalid."""

    exit_code = 2


class UsageError(SweepError):
    """A command-line argument is invalid (a --format, --since or --config value, a refused comparison)."""

    exit_code = 2


class NotFound(UsageError):
    """A study, run or configuration named on the command line is not in the results database (bad input, exit
    2: not an OS failure)."""


class WorkloadError(SweepError):
    """A dataset or workload definition cannot be turned into requests."""

    exit_code = 2


class StreamExhausted(WorkloadError):
    """A finite dataset ran out and the profile does not allow replaying it."""


# The failure reason's head of a configuration skipped before launch because its predicted memory plan says the
# server will not start (sweep.launchers.prediction); LaunchError.reason "predicted_infeasible" carries it.
PREDICTED_INFEASIBLE = "predicted infeasible"


# Launch failures that say nothing about the configuration: its port range taken (by another process, or by
# TIME_WAIT sockets of a crashed server), its disk full. A configuration that hit one is measured again, never failed.
HOST_FAULTS = frozenset({"port_in_use", "disk_full"})


class LaunchError(SweepError):
    """A server could not be started (reason in .reason: oom, cuda, port_in_use, disk_full, timeout, bad_flag,
    crash, predicted_infeasible)."""

    exit_code = 3

    @property
    def host_fault(self) -> bool:
        """The host, not the configuration, stopped the start (HOST_FAULTS): no verdict, the attempt is re-queued."""
        return self.reason in HOST_FAULTS

    def __init__(self, message: str, reason: str = "crash", log_path: str | None = None):
        super().__init__(message)
        self.reason = reason
        self.log_path = log_path


class ServerDied(SweepError):
    """The server process exited while a window was being measured."""

    exit_code = 4


class StoreError(SweepError):
    """The results database cannot be opened, migrated or written."""

    exit_code = 5


class Fenced(StoreError):
    """A write of a configuration attempt this worker no longer holds: while it was suspended (SIGSTOP, a VM
    pause, a partition) past the heartbeat grace, another worker failed its trial, aborted the attempt's row
    and re-queued the configuration. Nothing was written; the worker stops that server and takes other work."""

    def __init__(self, what: str, status: str):
        super().__init__(f"fenced: {what} was re-queued to another worker while this one was suspended "
                         f"({status} now); nothing more of this attempt is written")
        self.what = what
        self.status = status


class CrossCheckDiffers(SweepError):
    """`sweep crosscheck` measured, and a judged figure of sweep's differs from the reference client's."""

    exit_code = 6
