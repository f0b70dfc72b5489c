"""Cross-site request forgery on the pages' two forms: sign in and sign out.

Every other write needs the Authorization header, which no other site can make a browser send.
These two act on cookies, so each carries a value another site cannot know, and a browser that
says where the form came from (``Origin``, ``Sec-Fetch-Site``) must name this site:

- sign out: a value derived from the session id, which the HttpOnly cookie keeps from any page;
- sign in (no session yet; a forged one would sign a victim in as the attacker and collect what
  they submit): a random value the sign-in page puts both in a cookie and in the form.
"""

from __future__ import annotations

import hmac
import secrets
from urllib.parse import urlsplit

from fastapi import Request as HttpRequest

from kernelcup.adapters.web.auth import ApiError

FORM_COOKIE = "kernelcup_form"
FIELD = "csrf"


def form_nonce() -> str:
    return secrets.token_urlsafe(32)


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


def same_site(request: HttpRequest, public_url: str) -> bool:
    """False when the browser says the form came from another site."""
    if request.headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        return False
    origin = request.headers.get("origin")
    if origin is None:
        return True  # not a browser, or an old one: the form value still has to match
    ours = {_origin(str(request.base_url))}
    if public_url:
        ours.add(_origin(public_url))
    return origin.lower() in ours


def check_form(request: HttpRequest, expected: str, given: str, public_url: str) -> None:
    """Refuse a forged form with 403 before it changes anything."""
    if not expected or not hmac.compare_digest(expected.encode(), given.encode()) \
            or not same_site(request, public_url):
        raise ApiError(403, "This form did not come from this site's own page, or the page is too old.",
                       "Open the page again and send the form from there.", "forbidden")
