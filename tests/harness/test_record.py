"""How a call is read from the GPU's record (``harness/record.py``), on records built by hand.

The record itself needs a GPU (the hiding places run for real in tests/compat on CUDA); what
is judged from it is plain data, tested here: which activities are the call's, what another
thread's work costs, and when a record is incomplete.
"""

from __future__ import annotations

from kernelcup.harness.record import CLOSING, MARKER, Activity, CallRecord, Launch, judge

MAIN = 7
OTHER = 9


class Record:
    """A record in the order things happen: each launch takes the next correlation id."""

    def __init__(self) -> None:
        self.activities: list[Activity] = []
        self.launches: list[Launch] = []
        self._next = 1

    def launch(self, name: str, thread: int = MAIN, gpu: tuple[int, int] | None = None, stream: int = 7) -> None:
        correlation = self._next
        self._next += 1
        self.launches.append(Launch(correlation, thread, "cudaLaunchKernel" if gpu else name))
        if gpu is not None:
            self.activities.append(Activity(gpu[0], gpu[1], stream, correlation, thread, name))

    def harness_before(self) -> None:
        self.launch("randn", gpu=(0, 50))  # the inputs
        self.launch("reduce_kernel flush", gpu=(100, 400))
        self.launch("cudaDeviceSynchronize")
        self.launch(f"at::cuda::{MARKER}(long)", gpu=(1_000, 1_001))

    def close(self) -> None:
        self.launch(CLOSING)

    def judge(self, still_on: bool = True) -> CallRecord:
        return judge(self.activities, self.launches, MAIN, still_on)


def test_a_call_runs_from_its_first_activity_to_its_last() -> None:
    record = Record()
    record.harness_before()
    record.launch("add", gpu=(1_200, 1_300))
    record.launch("mul", gpu=(1_350, 1_500))
    record.close()
    call = record.judge()
    assert (call.time_ns, call.busy_ns, call.activities, call.complete) == (300.0, 250.0, 2, True)
    assert abs(call.idle_share - 50 / 300) < 1e-12 and call.outside_ns == 0.0


def test_work_on_a_side_stream_that_is_never_joined_is_the_calls() -> None:
    record = Record()
    record.harness_before()
    record.launch("add", gpu=(1_200, 1_300))
    record.launch("hidden", gpu=(1_210, 5_000), stream=13)
    record.close()
    call = record.judge()
    assert call.time_ns == 3_800.0 and call.streams == 2


def test_work_another_thread_launches_during_the_call_is_the_calls() -> None:
    record = Record()
    record.harness_before()
    record.launch("add", gpu=(1_200, 1_300))
    record.launch("from a thread", thread=OTHER, gpu=(1_400, 2_000))
    record.close()
    assert record.judge().time_ns == 800.0


def test_another_threads_work_outside_the_call_is_charged_to_it() -> None:
    record = Record()
    record.launch("early, from a thread", thread=OTHER, gpu=(20, 520))  # while the inputs are made
    record.harness_before()
    record.launch("add", gpu=(1_200, 1_300))
    record.close()
    record.launch("late, from a thread", thread=OTHER, gpu=(3_000, 3_300))  # after the closing synchronize
    call = record.judge()
    assert call.time_ns == 100.0 and call.outside_ns == 800.0


def test_the_harness_own_work_before_the_marker_is_never_counted() -> None:
    record = Record()
    record.harness_before()
    record.close()
    call = record.judge()
    assert (call.time_ns, call.activities, call.outside_ns, call.complete) == (0.0, 0, 0.0, True)


def test_a_multi_gpu_barrier_between_the_flush_and_the_marker_is_the_harness_own() -> None:
    record = Record()
    record.launch("reduce_kernel flush", gpu=(100, 400))
    record.launch("ncclDevKernel_AllReduce barrier", gpu=(500, 900))
    record.launch(f"{MARKER}", gpu=(1_000, 1_001))
    record.launch("add", gpu=(1_200, 1_300))
    record.close()
    assert record.judge().time_ns == 100.0


def test_a_marker_the_submission_launches_too_does_not_move_the_calls_start() -> None:
    record = Record()
    record.harness_before()
    record.launch("add", gpu=(1_200, 1_300))
    record.launch(f"{MARKER}", gpu=(1_350, 1_351))
    record.launch("mul", gpu=(1_400, 1_500))
    record.close()
    assert record.judge().time_ns == 300.0


def test_a_synchronize_the_call_makes_itself_does_not_end_the_call() -> None:
    record = Record()
    record.harness_before()
    record.launch("add", gpu=(1_200, 1_300))
    record.launch(CLOSING)  # the submission's own
    record.launch("mul", gpu=(40_000, 40_100))
    record.close()
    call = record.judge()
    assert call.time_ns == 38_900.0 and call.waited


def test_an_item_per_call_is_a_wait_on_the_gpu() -> None:
    record = Record()
    record.harness_before()
    record.launch("sum", gpu=(1_200, 1_300))
    record.launch("cudaMemcpyAsync")
    record.launch("cudaStreamSynchronize")
    record.close()
    assert record.judge().waited
    quiet = Record()
    quiet.harness_before()
    quiet.launch("sum", gpu=(1_200, 1_300))
    quiet.close()
    assert not quiet.judge().waited  # the harness's closing synchronize is not the call's


def test_an_activity_with_no_recorded_launch_after_the_marker_is_the_calls() -> None:
    record = Record()
    record.harness_before()
    record.activities.append(Activity(1_100, 2_100, 7, 0, 0, "launched where the record ties nothing"))
    record.activities.append(Activity(10, 60, 7, 0, 0, "before the marker"))
    record.close()
    call = record.judge()
    assert call.time_ns == 1_000.0 and call.outside_ns == 50.0


def test_a_record_without_its_marker_or_closing_or_switched_off_is_incomplete() -> None:
    no_marker = Record()
    no_marker.launch("add", gpu=(1_200, 1_300))
    no_marker.close()
    assert not no_marker.judge().complete
    no_closing = Record()
    no_closing.harness_before()
    no_closing.launch("add", gpu=(1_200, 1_300))
    assert not no_closing.judge().complete
    switched_off = Record()
    switched_off.harness_before()
    switched_off.close()
    assert not switched_off.judge(still_on=False).complete
    other_threads_closing = Record()
    other_threads_closing.harness_before()
    other_threads_closing.launch(CLOSING, thread=OTHER)
    assert not other_threads_closing.judge().complete


def test_overlapping_activities_are_busy_once() -> None:
    record = Record()
    record.harness_before()
    record.launch("a", gpu=(1_200, 1_600))
    record.launch("b", gpu=(1_300, 1_500), stream=13)
    record.launch("c", gpu=(1_700, 1_800))
    record.close()
    call = record.judge()
    assert call.busy_ns == 500.0 and call.time_ns == 600.0


def test_a_kernel_launched_in_the_call_with_no_record_of_its_run_makes_the_record_incomplete() -> None:
    """The record paused around a launch (CUPTI's activity kinds switched off and on again inside
    the call) leaves the launch without its kernel: the call cannot be timed."""
    record = Record()
    record.harness_before()
    record.launch("add", gpu=(1_200, 1_300))
    record.launch("cudaLaunchKernel")  # the kernel's run is missing from the record
    record.close()
    assert not record.judge().complete


def test_a_graph_launch_is_matched_by_the_kernels_it_ran() -> None:
    record = Record()
    record.harness_before()
    record.launch("cudaGraphLaunch")
    graph = record.launches[-1].correlation
    record.activities += [
        Activity(1_200, 1_300, 7, graph, MAIN, "node 1"),
        Activity(1_300, 1_450, 7, graph, MAIN, "node 2"),
    ]
    record.close()
    call = record.judge()
    assert (call.complete, call.time_ns, call.activities) == (True, 250.0, 2)
