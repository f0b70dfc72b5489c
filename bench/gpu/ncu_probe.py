"""Run the benchmark cases of one solution so Nsight Compute can time its kernels.

    ncu --clock-control none --cache-control all --profile-from-start off \
        --metrics gpu__time_duration.sum --csv --page raw --log-file LOG \
        python bench/gpu/ncu_probe.py FILES_DIR SUBMISSION_FILE CASES_JSON CALLS

FILES_DIR holds the leaderboard's files by final name (run_all.py writes it); CASES_JSON is a
list of cases, profiled in order. Each of the CALLS profiled calls per case sits between
cudaProfilerStart and cudaProfilerStop, after warm-up calls, on the same input: with
``--cache-control all`` ncu flushes caches before each kernel, the cache state the harness
times in.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def main() -> int:
    files_dir, submission_file, cases_json, calls = sys.argv[1:5]
    os.chdir(files_dir)
    sys.path.insert(0, files_dir)
    import reference  # type: ignore[import-not-found]
    import torch

    namespace: dict[str, object] = {"__name__": "submission"}
    source = Path(submission_file).read_text()
    exec(compile(source, submission_file, "exec"), namespace)
    kernel = namespace["custom_kernel"]
    for case in json.loads(cases_json):
        data = reference.generate_input(**case, device="cuda")
        for _ in range(5):
            kernel(data)  # type: ignore[operator]
        torch.cuda.synchronize()
        for _ in range(int(calls)):
            torch.cuda.profiler.start()  # type: ignore[no-untyped-call]
            kernel(data)  # type: ignore[operator]
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()  # type: ignore[no-untyped-call]
        del data
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
