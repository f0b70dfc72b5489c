"""The web adapter's settings: the ``web:`` section of the config file (no secrets: API tokens
live hashed in the database)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kernelcup.core.config import Settings, load_settings
from kernelcup.core.plugins import DeferredAdapter

TRUE = ("1", "true", "yes", "on")


def _flag(value: Any) -> bool:
    return value if isinstance(value, bool) else str(value).strip().lower() in TRUE


@dataclass(frozen=True)
class WebSettings:
    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = 8080
    public_url: str = ""  # e.g. https://kernelcup.example.org; empty: links are relative
    code_public_after_deadline: bool = True  # default for leaderboards whose task.yml says nothing
    cli_server: str = ""  # the terminal CLI's server (like --server); empty: the embedded kernelcup
    max_request_bytes: int = 16 * 1024 * 1024  # any request body; a submission's own limit is the core's
    # One client must not starve the others (adapters/web/connections.py, streams.py).
    header_timeout_s: float = 10.0  # request line and headers must arrive within this
    body_timeout_s: float = 30.0  # a request body that pauses longer than this is dropped
    keep_alive_s: float = 5.0  # an idle connection after a response is closed after this
    max_header_bytes: int = 16 * 1024
    max_connections: int = 16384  # open at once; never more than the descriptor limit allows
    max_event_streams: int = 4000  # server-sent event streams open at once, all clients
    max_event_streams_per_client: int = 20  # per client address

    @classmethod
    def load(cls, settings: Settings) -> WebSettings:
        section: dict[str, Any] = dict(settings.sections.get("web") or {})
        return cls(
            enabled=_flag(section.get("enabled", cls.enabled)),
            host=str(section.get("host", cls.host)),
            port=int(section.get("port", cls.port)),
            public_url=str(section.get("public_url") or "").rstrip("/"),
            code_public_after_deadline=_flag(section.get("code_public_after_deadline", True)),
            cli_server=str(section.get("cli_server") or "").rstrip("/"),
            max_request_bytes=int(section.get("max_request_bytes", cls.max_request_bytes)),
            header_timeout_s=float(section.get("header_timeout_s", cls.header_timeout_s)),
            body_timeout_s=float(section.get("body_timeout_s", cls.body_timeout_s)),
            keep_alive_s=float(section.get("keep_alive_s", cls.keep_alive_s)),
            max_header_bytes=int(section.get("max_header_bytes", cls.max_header_bytes)),
            max_connections=int(section.get("max_connections", cls.max_connections)),
            max_event_streams=int(section.get("max_event_streams", cls.max_event_streams)),
            max_event_streams_per_client=int(section.get("max_event_streams_per_client",
                                                         cls.max_event_streams_per_client)),
        )

    def url(self, path: str) -> str:
        """An absolute link when the public URL is known, else a path on this server."""
        return f"{self.public_url}{path}"


def configured(env: Mapping[str, str]) -> bool:
    """On unless ``web.enabled`` is false (the pages need no secret)."""
    return WebSettings.load(load_settings(env=dict(env))).enabled


# The ``kernelcup.adapters`` entry point: FastAPI and uvicorn are imported only when it is built.
ADAPTER = DeferredAdapter("kernelcup.adapters.web.adapter:WebAdapter", configured)
