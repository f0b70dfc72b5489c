"""Messages between the harness and the submission's process over a Unix socket.

One message is a JSON object on one line, optionally followed by raw bytes (output
tensors on the CPU path). JSON and not pickle: the harness must never unpickle what the
submission's process sends, since unpickling runs code. Every read is bounded in size and
time, so a child that floods the socket or goes silent cannot hang or exhaust the harness.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Mapping
from typing import Any

Message = dict[str, Any]

MAX_LINE = 1 << 20  # one JSON message
# The payload's length travels under a key no message uses for anything else: a message field
# that happened to share it (a buffer size, say) would make the reader wait for bytes never sent.
PAYLOAD_KEY = "__payload_bytes__"
CHUNK = 1 << 20


class ChannelClosed(Exception):
    """The other side closed the socket (it exited or crashed)."""


class ChannelTimeout(Exception):
    """Nothing complete arrived before the deadline."""


class ProtocolError(Exception):
    """The other side sent something that is not a well-formed message."""


class Channel:
    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._buffer = bytearray()

    def fileno(self) -> int:
        return self._sock.fileno()

    def close(self) -> None:
        self._sock.close()

    def send(self, message: Mapping[str, Any], payload: bytes | bytearray | memoryview | None = None) -> None:
        """One order or message (``protocol.py``), and the bytes that follow it."""
        if payload is not None:
            message = {**message, PAYLOAD_KEY: len(payload)}
        line = json.dumps(message, separators=(",", ":")).encode() + b"\n"
        self._sock.sendall(line)
        if payload is not None and len(payload):
            self._sock.sendall(payload)

    def recv(self, deadline: float | None = None, max_payload: int = 0) -> tuple[Message, bytes]:
        """The next message and its payload (empty when it has none).

        ``deadline`` is a ``time.monotonic()`` instant; ``max_payload`` is the most payload
        bytes this call accepts.
        """
        line = self._read_line(deadline)
        try:
            message = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ProtocolError(f"not a JSON message: {line[:200]!r}") from exc
        if not isinstance(message, dict):
            raise ProtocolError("message is not a JSON object")
        nbytes = message.pop(PAYLOAD_KEY, 0)
        if not isinstance(nbytes, int) or nbytes < 0:
            raise ProtocolError("bad payload size")
        if nbytes > max_payload:
            raise ProtocolError(f"payload of {nbytes} bytes exceeds the limit of {max_payload}")
        payload = self._read_exact(nbytes, deadline) if nbytes else b""
        return message, payload

    def _fill(self, deadline: float | None) -> None:
        if deadline is None:
            self._sock.settimeout(None)
        else:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ChannelTimeout()
            self._sock.settimeout(remaining)
        try:
            chunk = self._sock.recv(CHUNK)
        except TimeoutError as exc:
            raise ChannelTimeout() from exc
        except OSError as exc:
            raise ChannelClosed(str(exc)) from exc
        if not chunk:
            raise ChannelClosed("end of stream")
        self._buffer += chunk

    def _read_line(self, deadline: float | None) -> bytes:
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                return line
            if len(self._buffer) > MAX_LINE:
                raise ProtocolError("message line too long")
            self._fill(deadline)

    def _read_exact(self, nbytes: int, deadline: float | None) -> bytes:
        while len(self._buffer) < nbytes:
            self._fill(deadline)
        data = bytes(self._buffer[:nbytes])
        del self._buffer[:nbytes]
        return data
