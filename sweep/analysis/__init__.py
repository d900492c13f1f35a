"""Pure functions over measurements: a window's statistics (`measure`), the client's self-check, `/metrics`
parsing, the cross-check judge, the knee of a ladder, the winner rule and the soak verdict. No I/O."""

from sweep.analysis.crosscheck import (
    CrossCheck,
    Tolerance,
    compare_runs,
    histogram_check,
    quantile_bucket,
    server_checks,
)
from sweep.analysis.knee import (
    ConfigKnee,
    KneeResult,
    StepPoint,
    find_knee,
    gain_per_doubling,
    knee_goodput_ci,
    pareto_front,
)
from sweep.analysis.ladder_steps import LadderStep, ladder_knee, step_points
from sweep.analysis.measure import (
    client_bound_reasons,
    compute_stats,
    e2e_ms,
    histogram_quantile,
    in_window,
    itl_gaps_ms,
    loop_lag_limit_ms,
    loop_stall_limit_ms,
    percentile,
    succeeded,
    ttft_ms,
)
from sweep.analysis.measure_client import client_stats
from sweep.analysis.run_stats import COLUMNS, ClientStats, RunStats
from sweep.analysis.server_metrics import (
    HISTOGRAM_SOURCE,
    SAMPLED,
    MetricsSnapshot,
    buckets_as_samples,
    histogram_delta,
    histogram_samples,
    histograms_from_samples,
    only_names,
    parse_metrics,
)
from sweep.analysis.soak import SoakVerdict, judge, slope_per_min, soak_rate
from sweep.analysis.winner import HardwareRanking, Winner, hardware_lines, pick_winner, rank_by_hardware

__all__ = [
    "COLUMNS", "ClientStats", "ConfigKnee", "CrossCheck", "HISTOGRAM_SOURCE", "HardwareRanking",
    "KneeResult", "LadderStep", "MetricsSnapshot", "RunStats", "SAMPLED", "SoakVerdict", "StepPoint",
    "Tolerance", "Winner", "buckets_as_samples", "client_stats", "compare_runs", "compute_stats", "e2e_ms",
    "find_knee", "gain_per_doubling", "hardware_lines", "histogram_check", "histogram_delta",
    "histogram_quantile", "histogram_samples", "histograms_from_samples", "in_window", "itl_gaps_ms",
    "judge", "knee_goodput_ci", "ladder_knee", "loop_lag_limit_ms", "loop_stall_limit_ms", "client_bound_reasons", "only_names", "pareto_front",
    "parse_metrics", "percentile", "pick_winner", "quantile_bucket", "rank_by_hardware", "server_checks",
    "slope_per_min", "soak_rate", "step_points", "succeeded", "ttft_ms",
]
