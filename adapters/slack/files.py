"""Files in and out of Slack: downloading what a user shared (checked before and after the
download), uploading reply files into a message's thread with ``files_upload_v2``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from slack_sdk.web.async_client import AsyncWebClient

from kernelcup.adapters.slack.blocks import SlackFile
from kernelcup.core.errors import UserError
from kernelcup.core.file_names import shown_file_name
from kernelcup.core.messages import Attachment

DOWNLOAD_TIMEOUT_S = 30
# The bot token goes only to Slack's own file host (and the API host the client is pointed at,
# e.g. Slack GovSlack or a test's local Slack): a signed payload naming another URL gets nothing.
SLACK_FILE_HOSTS = frozenset({"files.slack.com", "files.slack-gov.com"})
_NOT_SOURCE = ("image/", "video/", "audio/")


async def download(
    http: aiohttp.ClientSession,
    file: Mapping[str, Any],
    *,
    token: str,
    api_base: str = "https://slack.com/api/",
    max_bytes: int,
    text_only: bool,
) -> Attachment:
    """One shared file as an attachment. Raises UserError with the reason when it cannot be used."""
    name = shown_file_name(str(file.get("name") or file.get("title") or "file"))  # the sharer's words
    kind = str(file.get("pretty_type") or file.get("filetype") or "binary")
    mode = file.get("mode")
    if mode == "external":
        raise UserError(f"{name} is a link to a file elsewhere.", "Upload the file itself to Slack.")
    if mode in ("tombstone", "hidden_by_limit") or file.get("is_hidden_by_limit"):
        raise UserError(f"Slack no longer shows {name} to apps ({mode or 'hidden by limit'}).",
                        "Share the file again.")
    size = int(file.get("size") or 0)
    if size > max_bytes:
        raise UserError(f"{name} is {size / 1024:.0f} KiB; the limit is {max_bytes // 1024} KiB.",
                        "Submit the kernel source only, without data or binaries.")
    if text_only and str(file.get("mimetype", "")).startswith(_NOT_SOURCE):
        raise UserError(f"{name} is a {kind} file, not source code.", "Share the .py or .cu file of your kernel.")
    url = file.get("url_private_download") or file.get("url_private")
    if not url:
        raise UserError(f"Slack gave no download link for {name}.", "Share the file again.")
    if not _slack_host(str(url), api_base):
        raise UserError(f"The download link of {name} does not point at Slack.", "Share the file again.")
    try:
        async with http.get(
            str(url),
            headers={"Authorization": f"Bearer {token}"},
            timeout=aiohttp.ClientTimeout(total=DOWNLOAD_TIMEOUT_S),
        ) as response:
            if response.status != 200:
                raise UserError(f"Could not download {name} from Slack (HTTP {response.status}).", "Try again.")
            # Without the files:read scope Slack answers with its sign-in page, not an error.
            if response.content_type == "text/html" and not name.endswith((".html", ".htm")):
                raise UserError(f"Could not download {name}: Slack sent a sign-in page.",
                                "An admin must give the Slack app the files:read scope.")
            content = await response.content.read(max_bytes + 1)
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise UserError(f"Could not download {name} from Slack ({type(exc).__name__}).", "Try again.") from exc
    if len(content) > max_bytes:
        raise UserError(f"{name} is larger than {max_bytes // 1024} KiB.", "Submit the kernel source only.")
    if text_only:
        check_text(name, kind, content)
    return Attachment(name, content)


def _slack_host(url: str, api_base: str) -> bool:
    target, api = urlsplit(url), urlsplit(api_base)
    if target.hostname in SLACK_FILE_HOSTS and target.scheme == "https":
        return True
    return (target.scheme, target.hostname, target.port) == (api.scheme, api.hostname, api.port)


def check_text(name: str, kind: str, content: bytes) -> None:
    try:
        if b"\x00" in content:
            raise UnicodeDecodeError("utf-8", content, content.index(b"\x00"), content.index(b"\x00") + 1, "NUL")
        content.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{name} is not a text file (Slack calls it {kind}; byte {exc.start} is not UTF-8 text).",
                        "Share the .py or .cu source of your kernel, saved as UTF-8.") from exc


async def upload(client: AsyncWebClient, channel: str, thread_ts: str | None, files: Sequence[SlackFile]) -> None:
    """All files in one files_upload_v2: one upload URL and one upload per file, one completion."""
    if not files:
        return
    await client.files_upload_v2(
        channel=channel,
        thread_ts=thread_ts,
        file_uploads=[{"content": f.content, "filename": f.name, "title": f.title} for f in files],
    )
