"""Secrets kept out of anything goodbench stores or prints. An error body may quote the request's
Authorization header (some gateways echo it), a base URL may carry user:password: every error text a
record keeps, every URL written to run.json and every string the server says about itself (run.json's
server block) goes through scrub() first. Stdlib only."""

from __future__ import annotations

import re

REDACTED = "[redacted]"
_AUTH = re.compile(r"(?i)\b(bearer|basic|token)(\s+|=|:\s*)[A-Za-z0-9._~+/=:-]{6,}")
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/@\s:]+(:[^/@\s]*)?@")


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # C0 but tab and newline, DEL, C1


def visible(text: str) -> str:
    """text with its control characters written out (ESC as \\x1b): a server's or a file's string on a
    terminal must not clear the screen or set the clipboard (OSC 52)."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text) if _CONTROL.search(text) else text


def scrub(text: str | None, secrets=()) -> str | None:
    """text with every known secret (an API key: at least 4 characters), any bearer/basic credential and
        any URL user:password replaced by [redacted]. Runs on error texts and the server's self-description
    (client/serverinfo.py) only, never per chunk."""
    if not text:
        return text
    for s in secrets:  # in any case: a server may have lower-cased what it quotes
        if s and len(s) >= 4 and s.lower() in text.lower():
            text = re.sub(re.escape(s), REDACTED, text, flags=re.IGNORECASE)
    text = _AUTH.sub(lambda m: m.group(1) + m.group(2) + REDACTED, text)
    if "@" in text:
        text = _USERINFO.sub(lambda m: m.group(1) + REDACTED + "@", text)
    return visible(text)


def scrub_url(url: str | None) -> str | None:
    """A URL without its user:password (for run.json's target): everything before the authority's last "@"
    goes, a password holding "@" or an empty user included, and a query's credential values."""
    if not url:
        return url
    scheme, sep, rest = url.partition("://")
    if sep:
        end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
        auth, tail = rest[:end], rest[end:]
        if "@" in auth:
            url = f"{scheme}://{REDACTED}@{auth.rpartition('@')[2]}{tail}"
    return _QUERY_SECRET.sub(lambda m: m.group(1) + REDACTED, url)


_QUERY_SECRET = re.compile(r"(?i)([?&](?:token|key|api[_-]?key|access[_-]?token|password|secret|auth)[^=&#]*=)[^&#]*")
