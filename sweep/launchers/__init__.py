"""Starting and stopping servers: SGLang, the simulator, attach (a server already running) and the virtual one;
process groups and sessions, launch records, server logs, the API-key shim and GPU placement.
"""

from sweep.core.face import lazy

__getattr__, __dir__, __all__ = lazy(__name__, {
    "sweep.launchers.attach": ("AttachLauncher", "config_from_server_info", "on_this_host"),
    "sweep.launchers.base": ("Launcher", "LaunchRecord", "ServerHandle", "StopReport"),
    "sweep.launchers.launch_record": ("scrub_log",),
    "sweep.launchers.placement": ("WorkerSeat", "detect", "group_size", "required_gpus"),
    "sweep.launchers.prediction": ("Predictor", "gpu_of", "infeasible_reason", "predict_launch"),
    "sweep.launchers.procs": ("gpu_count",),
    "sweep.launchers.sglang": ("KEPT_INFO", "SGLangLauncher", "pick_server_info"),
    "sweep.launchers.virtual": ("VirtualLauncher", "refuse_faults"),
})
