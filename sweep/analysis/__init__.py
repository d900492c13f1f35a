"""Pure functions over measurements: a window's statistics (`measure`), the client's self-check, `/metrics`
parsing, the cross-check judge, the knee of a ladder, the winner rule and the soak verdict. No I/O.

Import each name from the module that defines it (this package lends none):
- `crosscheck`: `CrossCheck`, `Tolerance`, `compare_runs`, `histogram_check`, `quantile_bucket`, `server_checks`
- `knee`: `ConfigKnee`, `KneeResult`, `StepPoint`, `find_knee`, `gain_per_doubling`, `knee_goodput_ci`,
  `pareto_front`
- `ladder_steps`: `LadderStep`, `ladder_knee`, `step_points`
- `measure`: `client_bound_reasons`, `compute_stats`, `e2e_ms`, `histogram_quantile`, `in_window`, `itl_gaps_ms`,
  `loop_lag_limit_ms`, `loop_stall_limit_ms`, `percentile`, `succeeded`, `ttft_ms`
- `measure_client`: `client_stats`
- `run_stats`: `COLUMNS`, `ClientStats`, `RunStats`
- `server_metrics`: `HISTOGRAM_SOURCE`, `SAMPLED`, `MetricsSnapshot`, `buckets_as_samples`, `histogram_delta`,
  `histogram_samples`, `histograms_from_samples`, `only_names`, `parse_metrics`
- `session_time`: `SessionTurn`, `record_turn`, `session_times_s`
- `sessions`: `SessionStats`, `TurnStats`, `session_stats`
- `soak`: `SoakVerdict`, `judge`, `slope_per_min`, `soak_rate`
- `winner`: `HardwareRanking`, `Winner`, `hardware_lines`, `pick_winner`, `rank_by_hardware`
"""
