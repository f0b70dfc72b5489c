"""Run the benchmark cases of one solution so Nsight Compute can time its kernels.

    ncu --clock-control none --cache-control {none|all} --profile-from-start off \
        --metrics gpu__time_duration.sum --csv --page raw --log-file LOG \
        python bench/gpu/ncu_probe.py FILES_DIR SUBMISSION_FILE CASES_JSON CALLS STATE

FILES_DIR holds the leaderboard's files by final name (run_all.py writes it); CASES_JSON is a
list of cases, profiled in order. Each of the CALLS profiled calls per case sits alone between
cudaProfilerStart and cudaProfilerStop, after warm-up calls. STATE picks what comes before it:

- ``harness``: the harness's own cache state. Fresh inputs for every call, then the harness's
  L2 flush (``kernelcup.harness.timing.CudaTimer.flush_l2``, the very code a timed call runs), outside
  the profiled range. Run under ``--cache-control none`` so ncu leaves that state alone: ncu
  then times the same kernel in the same cache state as the harness's median.
- ``ncu``: one input for every call and ncu's own flush (``--cache-control all``), which also
  empties L2 but leaves no clean lines of another buffer behind.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
WARMUP = 5


def main() -> int:
    files_dir, submission_file, cases_json, calls, state = sys.argv[1:6]
    os.chdir(files_dir)
    sys.path[:0] = [files_dir, str(REPO)]
    import reference  # type: ignore[import-not-found]
    import torch

    from kernelcup.harness.timing import CudaTimer

    timer = CudaTimer(torch.cuda.current_device())
    namespace: dict[str, object] = {"__name__": "submission"}
    source = Path(submission_file).read_text()
    exec(compile(source, submission_file, "exec"), namespace)
    kernel = namespace["custom_kernel"]
    for case in json.loads(cases_json):
        data = reference.generate_input(**case, device="cuda")
        for index in range(WARMUP + int(calls)):
            if state == "harness":
                del data
                data = reference.generate_input(**{**case, "seed": case["seed"] + 1 + index}, device="cuda")
                timer.flush_l2()
            torch.cuda.synchronize()
            profiled = index >= WARMUP
            if profiled:
                torch.cuda.profiler.start()  # type: ignore[no-untyped-call]
            kernel(data)  # type: ignore[operator]
            torch.cuda.synchronize()
            if profiled:
                torch.cuda.profiler.stop()  # type: ignore[no-untyped-call]
        del data
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
