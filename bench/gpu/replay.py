"""Replay traced case-rounds under this checkout's timing rules (harness/benchmark.py).

A traced run (``KERNELCUP_HARNESS_TRACE``, or ``TRACE=1`` of pairs.sh and lease.sh) holds every
case-round's no-op and timed calls. This reads them back and applies the clock check and the
outside-time rule to each, as the harness would now, so a change to those rules can be weighed
on calls already measured on a GPU before it meets one:

    python bench/gpu/replay.py g0.trace.jsonl g1.trace.jsonl [--device cuda|cpu] [--all]

It prints each case-round that fails the clock check or is charged outside time (``--all``:
every one, with its median), then a count of each. Run it under two commits to compare them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kernelcup.harness import benchmark
from kernelcup.harness.session import Timed
from kernelcup.harness.verdict import RunEnded


@dataclass(frozen=True)
class Replayed:
    label: str
    real: int
    among: int  # no-op calls taken among the real ones (after the calibrated ones)
    median_ns: float
    outside_ns: float
    tampering: str  # the clock check's verdict, "" where it passed


def replay(line: dict[str, Any], device: str) -> Replayed:
    """One traced case-round (a line of the trace, parsed) as the rules of this checkout judge it."""
    fields = [str(f) for f in line["fields"]]
    known = set(Timed.__dataclass_fields__)  # a trace of older code may hold fields since dropped

    def calls(key: str) -> list[Timed]:
        return [Timed(**{f: v for f, v in zip(fields, row, strict=True) if f in known}) for row in line[key]]

    real, noop = calls("real"), calls("noop")
    calibrated = int(line.get("calibrated", 0))
    on_gpu = device == "cuda"
    slack = benchmark.CLOCK_SLACK_NS if on_gpu else benchmark.CLOCK_SLACK_NS_CPU
    fraction = benchmark.CLOCK_SLACK_FRACTION if on_gpu else benchmark.CLOCK_SLACK_FRACTION_CPU
    label = str(line["label"])
    tampering = ""
    try:
        benchmark._check_clock(real, noop, label, slack, fraction, calibrated)
    except RunEnded as ended:
        tampering = ended.verdict
    outside = benchmark.outside_time(real, noop, slack, fraction, calibrated)
    times = benchmark._times(real, noop, device)[0]
    median = statistics.median(times) if times else float("nan")
    return Replayed(label, len(real), len(noop) - calibrated, median, outside, tampering)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("traces", nargs="+", type=Path)
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--all", action="store_true", help="print every case-round, not only those with a finding")
    args = parser.parse_args()
    done: list[Replayed] = []
    for path in args.traces:
        for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not text.strip():
                continue
            try:
                found = replay(json.loads(text), args.device)
            except (ValueError, KeyError, TypeError) as exc:
                print(f"{path}:{number}: not a traced case-round ({exc})", file=sys.stderr)
                continue
            done.append(found)
            if args.all or found.tampering or found.outside_ns:
                said = f"TAMPERING {found.tampering}" if found.tampering else ""
                said += f" outside {found.outside_ns / 1000:.1f} µs/call" if found.outside_ns else ""
                print(f"{path.name}:{number} {found.label}: {found.real} real, {found.among} no-op among, "
                      f"median {found.median_ns / 1000:.3f} µs{said and ';'} {said.strip()}")
    tampered = sum(1 for r in done if r.tampering)
    charged = sum(1 for r in done if r.outside_ns)
    print(f"{len(done)} case-rounds: {tampered} fail the clock check, {charged} charged outside time")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
