"""One configuration on one server: its ladder (sweep/ladder/), below the search over configurations (sweep/study/).

Import each name from the module that defines it (this package lends none):
- `runner`: `LadderRunner` (one configuration's ladder on one launch: steps, climbing on, refinement, flagged peaks
  measured again)
- `parts`: what a ladder produced and how a step starts (`LadderOutcome`, `StepStart`, `Climb`)
- `step_inputs`: a step's requests, warm-up and prefix-cache reset
- `step_verdicts`: a step's verdicts before it is stored
- `climb_on`: past a passing top step
- `refine`: the bisection between the last passing and the first failing step
- `far_windows`: steps far from the prior's predicted knee on short windows
- `launch`: launch bookkeeping (the prediction, the record at spawn)
- `recorder`: ended requests into the store while the window runs
- `crosscheck_step`: the reference client's window beside sweep's
- `environment`: the environment row of a study
- `soak`: the soak's hour at the winner's knee rate
- `wiring`: the launcher and driver a profile asks for
"""
