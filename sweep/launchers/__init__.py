"""Starting and stopping servers: SGLang, the simulator, attach (a server already running) and the virtual one;
process groups and sessions, launch records, server logs, the API-key shim and GPU placement."""

from sweep.launchers.attach import AttachLauncher, config_from_server_info, on_this_host
from sweep.launchers.base import Launcher, LaunchRecord, ServerHandle, StopReport
from sweep.launchers.launch_record import scrub_log
from sweep.launchers.placement import WorkerSeat, detect, group_size, required_gpus
from sweep.launchers.procs import gpu_count
from sweep.launchers.sglang import KEPT_INFO, SGLangLauncher, pick_server_info
from sweep.launchers.virtual import VirtualLauncher, refuse_faults

__all__ = [
    "AttachLauncher", "KEPT_INFO", "LaunchRecord", "Launcher", "SGLangLauncher", "ServerHandle",
    "StopReport", "VirtualLauncher", "WorkerSeat", "config_from_server_info", "detect", "gpu_count",
    "on_this_host", "pick_server_info", "group_size", "refuse_faults", "required_gpus", "scrub_log",
]
