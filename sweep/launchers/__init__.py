"""Starting and stopping servers: SGLang, the simulator, attach (a server already running) and the virtual one;
process groups and sessions, launch records, server logs, the API-key shim and GPU placement.

Import each name from the module that defines it (this package lends none):
- `attach`: `AttachLauncher`, `config_from_server_info`, `on_this_host`
- `base`: `Launcher`, `LaunchRecord`, `ServerHandle`, `StopReport`
- `launch_record`: `scrub_log`
- `placement`: `WorkerSeat`, `detect`, `group_size`, `required_gpus`
- `prediction`: `Predictor`, `gpu_of`, `infeasible_reason`, `predict_launch`
- `procs`: `gpu_count`
- `sglang`: `KEPT_INFO`, `SGLangLauncher`, `pick_server_info`
- `virtual`: `VirtualLauncher`, `refuse_faults`
"""
