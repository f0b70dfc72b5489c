"""The submission's process in profile mode: run each benchmark case under a profiler.

``tool`` is ``ncu`` (this process runs under Nsight Compute, which profiles only what runs
between ``cudaProfilerStart`` and ``cudaProfilerStop``) or ``torch`` (torch.profiler's table
per case, written to ``<out>/profile_<i>.txt``). Cases arrive as a JSON file with public seeds.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

WARM_CALLS = 3
PROFILED_CALLS = 5


def main(argv: list[str]) -> int:
    workdir, submission_name, cases_file, out_dir, device_name, tool, only, userns, parent_pid = argv
    from kernelcup.harness import child

    if userns == "1":
        child._enter_user_namespace()
    child._die_with_parent(int(parent_pid))
    import torch

    from kernelcup.harness.problem import Problem

    problem = Problem(Path(workdir))
    try:
        kernel = child.load_submission(Path(workdir) / submission_name)
    except child.LoadError as exc:
        print(f"could not load the submission: {exc}", file=sys.stderr)
        return 3
    cases = json.loads(Path(cases_file).read_text())
    out = Path(out_dir)
    cuda = device_name == "cuda"
    for index, case in enumerate(cases):
        if only != "all" and index != int(only):
            continue
        data = problem.generate(case, device_name)
        for _ in range(WARM_CALLS):
            kernel(data)
        if cuda:
            torch.cuda.synchronize()
        if tool == "ncu":
            torch.cuda.profiler.start()  # type: ignore[no-untyped-call]
            kernel(data)
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()  # type: ignore[no-untyped-call]
            continue
        activities = [torch.profiler.ProfilerActivity.CPU]
        if cuda:
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        with torch.profiler.profile(activities=activities) as prof:
            for _ in range(PROFILED_CALLS):
                kernel(data)
                if cuda:
                    torch.cuda.synchronize()
        sort_by = "cuda_time_total" if cuda else "cpu_time_total"
        table = prof.key_averages().table(sort_by=sort_by, row_limit=25)
        (out / f"profile_{index}.txt").write_text(
            f"torch.profiler, {PROFILED_CALLS} calls, case {json.dumps(case)}\n{table}\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
