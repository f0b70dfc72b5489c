"""The submission form: ``/leaderboard submit`` without a file opens it (slash commands cannot
carry files). A file input and the leaderboard, mode and GPU menus, filled from the core's
autocomplete; picking a leaderboard narrows the GPU menu to that leaderboard's GPUs."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kernelcup.adapters.slack.blocks import SlackBlock, options
from kernelcup.core.commands.submit import MODES

CALLBACK_ID = "kernelcup_submit"
LEADERBOARD_ACTION = "kernelcup_leaderboard"
FILE_TYPES = ["py", "cu", "cuh", "txt", "text"]


@dataclass(frozen=True)
class FormValues:
    files: list[dict[str, Any]]
    leaderboard: str | None
    mode: str | None
    gpus: list[str]


def submit_view(
    *,
    leaderboards: list[str],
    gpus: list[str],
    channel: str,
    leaderboard: str | None = None,
    mode: str | None = None,
    chosen_gpus: list[str] | None = None,
) -> dict[str, Any]:
    board_select: SlackBlock = {
        "type": "static_select",
        "action_id": LEADERBOARD_ACTION,
        "placeholder": {"type": "plain_text", "text": "from the file's #!POPCORN line"},
        "options": options(leaderboards),
    }
    if leaderboard in leaderboards:
        board_select["initial_option"] = options([leaderboard])[0]
    mode_select: SlackBlock = {"type": "static_select", "action_id": "mode", "options": options(MODES),
                               "initial_option": options([mode if mode in MODES else "test"])[0]}
    gpu_select: SlackBlock = {
        "type": "multi_static_select",
        "action_id": "gpu",
        "placeholder": {"type": "plain_text", "text": "the leaderboard's default"},
        "options": options(gpus),
    }
    initial = [g for g in chosen_gpus or [] if g in gpus]
    if initial:
        gpu_select["initial_options"] = options(initial)
    blocks: list[SlackBlock] = [
        {
            "type": "input",
            "block_id": "file",
            "label": {"type": "plain_text", "text": "Kernel file"},
            "hint": {"type": "plain_text", "text": "A .py file that defines custom_kernel, or a .cu file."},
            "element": {"type": "file_input", "action_id": "file", "filetypes": FILE_TYPES, "max_files": 1},
        },
        {
            "type": "input",
            "block_id": "leaderboard",
            "optional": True,
            "dispatch_action": True,
            "label": {"type": "plain_text", "text": "Leaderboard"},
            "element": board_select,
        },
        {"type": "input", "block_id": "mode", "label": {"type": "plain_text", "text": "Mode"}, "element": mode_select},
    ]
    if gpus:  # a static menu must have options
        blocks.append({"type": "input", "block_id": "gpu", "optional": True,
                       "label": {"type": "plain_text", "text": "GPUs"}, "element": gpu_select})
    return {
        "type": "modal",
        "callback_id": CALLBACK_ID,
        "title": {"type": "plain_text", "text": "Submit a kernel"},
        "submit": {"type": "plain_text", "text": "Submit"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "private_metadata": json.dumps({"channel": channel}),
        "blocks": blocks,
    }


def form_values(view: dict[str, Any]) -> FormValues:
    values: dict[str, dict[str, Any]] = view.get("state", {}).get("values", {})

    def element(block: str) -> dict[str, Any]:
        return next(iter(values.get(block, {}).values()), {})

    board = (element("leaderboard").get("selected_option") or {}).get("value")
    mode = (element("mode").get("selected_option") or {}).get("value")
    gpus = [str(o["value"]) for o in element("gpu").get("selected_options") or []]
    return FormValues(files=list(element("file").get("files") or []), leaderboard=board, mode=mode, gpus=gpus)


def form_channel(view: dict[str, Any]) -> str:
    try:
        return str(json.loads(view.get("private_metadata") or "{}").get("channel") or "")
    except json.JSONDecodeError:
        return ""
