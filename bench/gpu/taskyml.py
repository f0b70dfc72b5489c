"""A loader for the YAML subset that task.yml files use, for GPU machines without PyYAML.

Handles comments, ``key: value`` scalars, ``|``/``>`` block scalars, block lists, and flow
lists and mappings (``[a, b]``, ``{size: 1, seed: 2}``) with quoted or plain scalars. The GPU
script installs it as ``yaml`` only when the real PyYAML is missing.
"""

from __future__ import annotations

import re
from typing import Any


def _scalar(text: str) -> Any:
    text = text.strip()
    if not text:
        return None
    if text[0] in "\"'" and text[-1] == text[0]:
        return text[1:-1]
    if text in ("true", "True"):
        return True
    if text in ("false", "False"):
        return False
    if text in ("null", "~"):
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _split_flow(text: str) -> list[str]:
    parts, depth, quote, current = [], 0, "", ""
    for char in text:
        if quote:
            current += char
            if char == quote:
                quote = ""
            continue
        if char in "\"'":
            quote = char
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(current)
            current = ""
            continue
        current += char
    if current.strip():
        parts.append(current)
    return parts


def _flow(text: str) -> Any:
    text = text.strip()
    if text.startswith("[") and text.endswith("]"):
        return [_flow(part) for part in _split_flow(text[1:-1])]
    if text.startswith("{") and text.endswith("}"):
        out = {}
        for part in _split_flow(text[1:-1]):
            key, _, value = part.partition(":")
            out[str(_scalar(key))] = _flow(value)
        return out
    return _scalar(text)


def _strip_comment(line: str) -> str:
    quote = ""
    for index, char in enumerate(line):
        if quote:
            if char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1] in " \t"):
            return line[:index].rstrip()
    return line.rstrip()


def safe_load(text: str) -> Any:
    lines = text.splitlines()
    value, _ = _block(lines, 0, 0)
    return value


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _block(lines: list[str], start: int, indent: int) -> tuple[Any, int]:
    result: Any = None
    index = start
    while index < len(lines):
        raw = lines[index]
        line = _strip_comment(raw)
        if not line.strip():
            index += 1
            continue
        here = _indent(line)
        if here < indent:
            break
        body = line.strip()
        if body.startswith("- ") or body == "-":
            if result is None:
                result = []
            item = body[1:].strip()
            if item:
                result.append(_flow(item))
                index += 1
            else:
                value, index = _block(lines, index + 1, here + 1)
                result.append(value)
            continue
        match = re.match(r"([^:]+):(.*)$", body)
        if not match:
            raise ValueError(f"cannot parse line {index + 1}: {raw!r}")
        if result is None:
            result = {}
        key, rest = match.group(1).strip(), match.group(2).strip()
        if rest in ("|", ">", "|-", ">-"):
            block, index = [], index + 1
            while index < len(lines) and (not lines[index].strip() or _indent(lines[index]) > here):
                block.append(lines[index])
                index += 1
            pad = min((_indent(b) for b in block if b.strip()), default=0)
            joiner = "\n" if rest.startswith("|") else " "
            result[key] = joiner.join(b[pad:] for b in block).strip() + "\n"
        elif rest:
            result[key] = _flow(rest)
            index += 1
        else:
            value, index = _block(lines, index + 1, here + 1)
            result[key] = value
    return result, index
