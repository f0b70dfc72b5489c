"""Bodies of GPU functions that the Modal tests deploy on the stub server (tests/stubs/modal)
beside, or instead of, runners/modal_app.py's own ``run_job``. Each runs in a stub container."""

from __future__ import annotations

import os
import signal
import sys
import types
from typing import Any

SCRIPT_ENV = "KERNELCUP_TEST_HARNESS_SCRIPT"  # set through the function's image, as Modal's Image.env


def scripted_job(spec_json: str, kill_after_s: float) -> dict[str, Any]:
    """``run_job`` as the container runs it (progress published to the Dict), with the harness
    swapped for tests/runners/scripted_harness.py and no standby harness."""
    from kernelcup.runners import modal_app  # the container's, against its own ``modal``

    command = [sys.executable, "-m", "tests.runners.scripted_harness", os.environ[SCRIPT_ENV]]
    return modal_app.run_harness(spec_json, kill_after_s, report=modal_app._report_to_dict, command=command)


def raises_value_error(spec_json: str, kill_after_s: float) -> dict[str, Any]:
    raise ValueError("bug in the function body")


def raises_what_only_the_container_knows(spec_json: str, kill_after_s: float) -> dict[str, Any]:
    """An exception whose class is defined only in the container's image: the bot cannot unpickle it."""
    module = types.ModuleType("container_only")
    exec("class GpuFault(Exception):\n    pass\n", module.__dict__)
    sys.modules[module.__name__] = module
    raise module.GpuFault("Xid 79: GPU has fallen off the bus")


def segfaults(spec_json: str, kill_after_s: float) -> dict[str, Any]:
    os.kill(os.getpid(), signal.SIGSEGV)
    raise AssertionError("unreachable")
