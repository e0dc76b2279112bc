"""Secrets in a server URL never reach a message, a log line or a file.

`llm.base_url` may carry credentials: `https://user:token@host` (userinfo) or `?api_key=...` in its
query. Every judgeloop error passes its message through `redact` (pipeline.errors), and so does
every log line and printed URL that may quote the server, so that an error copied into an issue, a
CI log or `judgeloop status` shows `https://***@host/?api_key=***`.

Some services put the key in the path instead (`https://host/v1/sk-abc123.../`): a path segment that
looks like a secret (a known key prefix such as `sk-` or `hf_` and eight or more characters, a
run of 24 or more letters and digits mixing upper case, lower case and digits, or 32 or more hex
digits) is masked too; a model's name in a path (`gpt-4o-mini-2024-07-18`) is not.

Two nets: any URL's userinfo, query values and secret-looking path segments are masked wherever a
URL appears in a text; and the
secrets of every base_url judgeloop has validated in this process are remembered and masked on
their own too, since a server or a library may quote a credential outside a URL (an
"Authorization failed for user ..." message, a host:port/path without the scheme).
"""

from __future__ import annotations

import re
import threading
from urllib.parse import parse_qsl, urlsplit, urlunsplit

MASK = "***"
# A URL in a text (to the first space or quote), its userinfo, and a query parameter's value.
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>]*[^\s'\"<>.,:;)]")
_USERINFO = re.compile(r"^(?P<scheme>[^:]+://)[^/@?#]+@")
_QUERY_VALUE = re.compile(r"(?P<lead>[?&][^=&#]+=)[^&#]+")
_KEY_PREFIX = re.compile(
    r"(?i)(sk|pk|rk|hf|gsk|xai|ghp|gho|ghs|glpat|key|apikey|api[-_]key|token)[-_][A-Za-z0-9_-]{8,}"
)
_HEX = re.compile(r"[0-9a-fA-F]{32,}")
_TOKEN = re.compile(r"[A-Za-z0-9_-]{24,}")
_PATH_SEGMENT = re.compile(r"(?<=/)[^/?#]+")
# Shorter values are not masked on their own: "1" or "on" in a query would mask half a message.
_MIN_SECRET = 4

_secrets: set[str] = set()
_lock = threading.Lock()


def secret_segment(segment: str) -> bool:
    """Whether a URL path segment looks like a key rather than a name (see the module's docstring)."""
    if _KEY_PREFIX.fullmatch(segment) or _HEX.fullmatch(segment):
        return True
    return (
        _TOKEN.fullmatch(segment) is not None
        and any(c.isupper() for c in segment)
        and any(c.islower() for c in segment)
        and any(c.isdigit() for c in segment)
    )


def _masked_path(path: str) -> str:
    return _PATH_SEGMENT.sub(lambda m: MASK if secret_segment(m[0]) else m[0], path)


def _url_secrets(url: str) -> set[str]:
    try:
        parts = urlsplit(url)
    except ValueError:
        return set()
    found = {parts.username or "", parts.password or ""} if "@" in parts.netloc else set()
    found |= {value for _, value in parse_qsl(parts.query, keep_blank_values=False)}
    found |= {segment for segment in parts.path.split("/") if secret_segment(segment)}
    return {secret for secret in found if len(secret) >= _MIN_SECRET}


def remember(url: str) -> None:
    """Mask this URL's credentials in every later message of this process."""
    secrets = _url_secrets(url)
    if secrets:
        with _lock:
            _secrets.update(secrets)


def redact_url(url: str) -> str:
    """The URL with its userinfo and query values masked: for showing, never for connecting."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return redact(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{MASK}@{netloc.rsplit('@', 1)[1]}"
    query = "&".join(f"{name}={MASK}" for name, _ in parse_qsl(parts.query, keep_blank_values=True))
    return urlunsplit((parts.scheme, netloc, _masked_path(parts.path), query, ""))


def _masked(url: re.Match[str]) -> str:
    masked = _USERINFO.sub(lambda m: f"{m['scheme']}{MASK}@", url[0])
    masked = _QUERY_VALUE.sub(lambda m: f"{m['lead']}{MASK}", masked)
    scheme, sep, rest = masked.partition("://")
    host, slash, path = rest.partition("/")
    if not slash:
        return masked
    path, query_mark, query = path.partition("?")
    return f"{scheme}{sep}{host}/{_masked_path('/' + path)[1:]}{query_mark}{query}"


def redact(text: str) -> str:
    """`text` with every URL's userinfo and query values, and every remembered secret, masked."""
    if not text:
        return text
    text = _URL.sub(_masked, text)
    with _lock:
        secrets = sorted(_secrets, key=len, reverse=True)
    for secret in secrets:
        text = text.replace(secret, MASK)
    return text
