"""Masking of secrets and guest contact data before anything is logged, stored or displayed.

Door, building and Wi-Fi codes open real doors and networks; tokens open the service. They
must never reach logs, Dagster metadata, quarantine or dead-letter tables, or error messages.

Two mechanisms, used together at every sink:

- **By member name**: structured data (:func:`mask_payload`) and text that carries members
  (``"doorCode":"4711"``, ``client_secret=…``, ``Authorization: Bearer …``;
  :func:`mask_text`) lose the values of :data:`SECRET_MEMBERS` and :data:`CONTACT_MEMBERS`.
- **By value**: the process remembers every credential it was given (:func:`register_secret`:
  sync tokens, tokens files, Open API client secrets and access tokens, passwords in URLs, and
  mapping values read from environment variables whose name says secret, see
  :func:`is_secret_variable`). :func:`mask_text` replaces each of them, and the values a caller
  passes along (a record's own codes), in every encoding a service may echo them in: raw,
  JSON-escaped (``\\u00fc`` in either hex case, ``\\/``, nested escaping), URL-encoded
  (``%C3%BC`` in either case, ``+`` for a space) and HTML-escaped (``&uuml;``, ``&#252;``,
  ``&#xfc;``), or any mixture of them: the text is decoded into a view that remembers where
  each character came from, the secrets are searched there as plain strings, and their spans
  are masked in the original text.

Python logging is masked process-wide from the moment this module is imported
(:func:`install_log_masking`): every log record, whichever library creates it.
"""

from __future__ import annotations

import functools
import html
import json
import logging
import re
import threading
import traceback
import unicodedata
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any

from connector.errors import ConfigError

SECRET_MEMBERS: frozenset[str] = frozenset(
    {
        "wifiCode",
        "doorCode",
        "buildingCode",
        "apiToken",
        "token",
        "access_token",
        "client_secret",
        "authorization",
        "x-wishbox-auth-token",
    }
)
"""Members whose value is a credential: always fully masked."""

CONTACT_MEMBERS: frozenset[str] = frozenset({"email", "phone"})
"""Guest contact data: masked in previews and metadata, kept in the payload sent."""

MASK = "***"

MIN_SECRET_LENGTH = 3
"""Shorter values are not masked by value: masking "12" would garble every number in a text."""

_SENSITIVE_LOWER = frozenset(name.lower() for name in SECRET_MEMBERS | CONTACT_MEMBERS)


def is_sensitive(member: str) -> bool:
    """Whether a member (JSON key, column or header name) holds a secret or contact data."""
    return member.lower() in _SENSITIVE_LOWER


def mask_value(value: object) -> str:
    """A masked stand-in that keeps only whether a value was present."""
    return MASK if value not in (None, "") else ""


def mask_payload(payload: Any) -> Any:
    """A copy of a JSON-like value with every sensitive member masked, at any depth."""
    if isinstance(payload, Mapping):
        return {
            key: mask_value(value)
            if is_sensitive(str(key)) and not isinstance(value, (dict, list))
            else mask_payload(value)
            for key, value in payload.items()
        }
    if isinstance(payload, list):
        return [mask_payload(item) for item in payload]
    return payload


def sensitive_values(payload: Any) -> set[str]:
    """The values of every sensitive member of a JSON-like value, at any depth, as text."""
    found: set[str] = set()
    if isinstance(payload, Mapping):
        for key, member in payload.items():
            if is_sensitive(str(key)) and isinstance(member, str | int | float) and member != "":
                found.add(str(member))
            else:
                found |= sensitive_values(member)
    elif isinstance(payload, list):
        for item in payload:
            found |= sensitive_values(item)
    return found


# -- the registry of this process's credentials ------------------------------------------

_registry_lock = threading.Lock()
_registry: frozenset[str] = frozenset()


def register_secret(value: object) -> None:
    """Remember a credential: from now on every sink of this process masks it.

    Values shorter than :data:`MIN_SECRET_LENGTH` are ignored (see there).
    """
    global _registry
    if value is None:
        return
    text = str(value)
    candidates = {text, text.strip()} - _registry
    candidates = {c for c in candidates if len(c) >= MIN_SECRET_LENGTH}
    if not candidates:
        return
    with _registry_lock:
        _registry = _registry | candidates


def known_secrets() -> frozenset[str]:
    """Every credential registered in this process."""
    return _registry


_CONTROL_NAMES: dict[str, str] = {
    "\r": "carriage return",
    "\n": "line feed",
    "\t": "tab",
    "\x00": "nul",
}


def checked_secret(
    value: object, setting: str, *, account: str | None = None, secret: bool = True
) -> str | None:
    """A credential as read from ``setting`` (a variable, an option, a file, a resource
    field, a service's answer): registered as a secret (unless ``secret`` is false: a client
    id, say), surrounding whitespace stripped.

    A secret file saved on Windows ends in CR LF (``$(cat token.txt)`` keeps the CR), Notepad
    may begin it with a byte-order mark: both go. Any other character that is not visible (a
    CR, LF, NUL or tab inside, a zero-width character) would reach an HTTP header: a
    ConfigError naming the setting (and the account, for a tokens file), never the value.
    None stays None.
    """
    if value is None:
        return None
    text = str(value)
    stripped = text.strip().strip("\ufeff").strip()
    if secret:  # before anything could print it, whatever follows
        register_secret(text)
        register_secret(stripped)
    for character in stripped:
        if character.isprintable():
            continue
        where = f"{setting}, account {account!r}" if account is not None else setting
        name = _CONTROL_NAMES.get(character) or unicodedata.name(character, "control character")
        assert name is not None  # unicodedata.name's default is a str
        raise ConfigError(
            f"{where}: the value holds U+{ord(character):04X} ({name.lower()}) inside it, and "
            "a credential is visible characters only; remove it where the value is set (the "
            "value is not shown)"
        )
    return stripped


_SECRET_NAME_WORDS = (
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASS",
    "PWD",
    "KEY",
    "CREDENTIAL",
    "AUTH",
    "CODE",
    "DSN",
)
_URL_NAME_WORDS = ("URL", "URI", "DSN")


_PUBLIC_CODES = (
    "COUNTRY",
    "CURRENCY",
    "LANGUAGE",
    "LANG",
    "LOCALE",
    "POST",
    "POSTAL",
    "ZIP",
    "AREA",
    "DIAL",
    "STATUS",
    "RATE",
    "TAX",
)
"""Qualifiers of a CODE that is public data, not a credential (``HOTEL_COUNTRY_CODE``)."""


def is_secret_variable(name: str) -> bool:
    """Whether an environment variable's name says its whole value is a credential.

    A part of the name (split at ``_``), singular or plural, ending in TOKEN, SECRET,
    PASSWORD, PASSWD, PASS, PWD, KEY, CREDENTIAL, AUTH, CODE or DSN: ``PMS_SYNC_TOKEN``,
    ``HOTEL_DOORCODE``, ``API_KEYS``, ``DB_PASS``. A CODE qualified as public data
    (``COUNTRY_CODE``, ``POSTCODE``, ``CURRENCY_CODE``: :data:`_PUBLIC_CODES`) is not, and
    neither is ``HOTEL_BER_ACCOUNT`` (account ids are not secrets). A name such as ``MONKEY``
    matches: masking a harmless value costs less than a leak.
    """
    parts = name.upper().split("_")
    for index, part in enumerate(parts):
        word = part if part.endswith(_SECRET_NAME_WORDS) else part.removesuffix("S")
        if not word.endswith(_SECRET_NAME_WORDS):
            continue
        if word.endswith("CODE"):
            qualifier = word.removesuffix("CODE") or (parts[index - 1] if index else "")
            if qualifier in _PUBLIC_CODES:
                continue
        return True
    return False


def register_environment_value(name: str, value: str) -> None:
    """Register what a value read from environment variable ``name`` holds of a credential.

    The whole value when the name says secret (:func:`is_secret_variable`); for a ``*_URL``
    (``*_URI``, ``*_DSN``) its password. Anything else is configuration, not a secret.
    """
    if is_secret_variable(name):
        register_secret(value)
    if name.upper().rsplit("_", 1)[-1] in _URL_NAME_WORDS:
        register_url_password(value)


def register_url_password(url: str) -> None:
    """Register the password of a URL's user-info (``scheme://user:password@host``), if any."""
    password = url_password(url)
    if password:
        register_secret(password)
        register_secret(urllib.parse.unquote(password))


# -- URLs --------------------------------------------------------------------------------

_USER_INFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<info>[^/?#]*)@")


def url_password(url: str) -> str | None:
    """The password part of a URL's user-info as written (percent-encoded), or None."""
    match = _USER_INFO.match(url.strip())
    if match is None or ":" not in match["info"]:
        return None
    return match["info"].split(":", 1)[1] or None


def has_user_info(url: str) -> bool:
    """Whether the URL carries ``user[:password]@`` before its host."""
    return _USER_INFO.match(url.strip()) is not None


def redact_url(url: str, *, show_user: bool = False) -> str:
    """The URL without user-info, for any message or report.

    ``show_user`` keeps a user name before a password's ``***`` (``https://ops:***@host``), to
    tell the operator which part of the URL is refused; a lone user-info (possibly a token) is
    always shown as ``***``.
    """
    match = _USER_INFO.match(url.strip())
    if match is None:
        return url
    info = match["info"]
    if not show_user:
        shown = ""
    elif ":" in info:
        shown = f"{info.split(':', 1)[0]}:{MASK}@"
    else:
        shown = f"{MASK}@"
    return match["scheme"] + shown + url.strip()[match.end() :]


# -- files that hold secrets -------------------------------------------------------------


def parse_error_position(error: Exception) -> str:
    """``line L, column C`` of a YAML or JSON parse error, quoting nothing of the text.

    The parsers' own messages quote the offending line: in a tokens or config file, a secret.
    """
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    if mark is not None:
        return f"line {mark.line + 1}, column {mark.column + 1}"
    if isinstance(error, json.JSONDecodeError):
        return f"line {error.lineno}, column {error.colno}"
    return "position unknown"


# -- masking text ------------------------------------------------------------------------


# Escaped forms of one character: JSON (\uXXXX, a surrogate pair beyond the BMP, the short
# escapes), URL encoding (one UTF-8 character as %XX bytes, either case) and HTML references.
# JSON escapes come in two readings: "nested" takes any run of backslashes as one escape (a
# body quoted inside another JSON string doubles them), "json" reads one level exactly (so
# \\b is a backslash and a b). The third reading decodes no JSON at all.
_JSON_NESTED = r"""
    \\+u(?P<high>[dD][89abAB][0-9a-fA-F]{2})\\+u(?P<low>[dD][c-fC-F][0-9a-fA-F]{2})
    | \\+u(?P<unicode>[0-9a-fA-F]{4})
    | \\+(?P<short>["\\/bfnrt])
"""
_JSON_ONE_LEVEL = _JSON_NESTED.replace(r"\\+", r"\\")
_PERCENT_AND_HTML = r"""
    (?P<percent>%[0-7][0-9a-fA-F]
        | %[c-dC-D][0-9a-fA-F]%[89abAB][0-9a-fA-F]
        | %[eE][0-9a-fA-F](?:%[89abAB][0-9a-fA-F]){2}
        | %[fF][0-7](?:%[89abAB][0-9a-fA-F]){3})
    | (?P<html>&(?:\#[0-9]{1,7}|\#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});)
"""
_NESTED_READING = re.compile(_JSON_NESTED + "|" + _PERCENT_AND_HTML, re.VERBOSE)
_STRICT_READINGS = (
    re.compile(_JSON_ONE_LEVEL + "|" + _PERCENT_AND_HTML, re.VERBOSE),
    re.compile(_PERCENT_AND_HTML, re.VERBOSE),
)
_SHORT_ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def _decoded(match: re.Match[str]) -> str:
    groups = match.groupdict()
    if groups.get("high") is not None:
        high, low = int(groups["high"], 16), int(groups["low"], 16)
        return chr(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
    if groups.get("unicode") is not None:
        return chr(int(groups["unicode"], 16))
    if groups.get("short") is not None:
        return _SHORT_ESCAPES.get(groups["short"], groups["short"])
    if groups["percent"] is not None:
        return urllib.parse.unquote(groups["percent"], errors="strict")
    return html.unescape(groups["html"])


class _DecodedView:
    """A text with its escaped characters decoded, and where each decoded character came from.

    Secrets are searched in the decoded text, so a secret written partly raw, partly as JSON
    escapes and partly percent-encoded is still found; its span is mapped back to the original.
    """

    def __init__(self, text: str, reading: re.Pattern[str]) -> None:
        self.text = text
        self.starts: list[int] | None = None  # None: nothing was decoded, offsets are the same
        self.ends: list[int] = []
        pieces: list[str] = []
        starts: list[int] = []
        position = 0
        for match in reading.finditer(text):
            try:
                decoded = _decoded(match)
            except (ValueError, UnicodeDecodeError):
                continue  # not a character after all (bad UTF-8…)
            start, end = match.span()
            pieces.append(text[position:start])
            starts.extend(range(position, start))
            self.ends.extend(range(position + 1, start + 1))
            pieces.append(decoded)
            starts.extend([start] * len(decoded))
            self.ends.extend([end] * len(decoded))
            position = end
        if not pieces:
            return
        pieces.append(text[position:])
        starts.extend(range(position, len(text)))
        self.ends.extend(range(position + 1, len(text) + 1))
        self.text = "".join(pieces)
        self.starts = starts

    def original_span(self, start: int, end: int) -> tuple[int, int]:
        if self.starts is None:
            return start, end
        return self.starts[start], self.ends[end - 1]


def _searched_forms(secrets: frozenset[str]) -> tuple[tuple[str, ...], bool]:
    """What is searched for the secrets, and whether one holds a backslash.

    Each secret is searched as it is and as JSON and HTML write it, in the text and in its
    decoded views. quote_plus writes a space as "+", which the decoded views keep as it is.
    """
    forms: set[str] = set()
    for secret in secrets:
        forms |= {
            secret,
            secret.replace(" ", "+"),
            json.dumps(secret, ensure_ascii=False)[1:-1],
            json.dumps(secret)[1:-1],
            json.dumps(secret)[1:-1].replace("/", "\\/"),
            html.escape(secret),
        }
    ordered = tuple(sorted(forms, key=len, reverse=True))
    return ordered, any("\\" in secret for secret in secrets)


def _occurrences(text: str, forms: tuple[str, ...]) -> list[tuple[int, int]]:
    spans = []
    for form in forms:
        found = text.find(form)
        while found != -1:
            spans.append((found, found + len(form)))
            found = text.find(form, found + 1)
    return spans


_registered_forms = functools.lru_cache(maxsize=8)(_searched_forms)
"""The registry's forms, computed once per state of the registry."""


def _mask_values(text: str, extra: frozenset[str]) -> str:
    forms, backslash = _registered_forms(_registry)
    if extra - _registry:
        more, more_backslash = _searched_forms(extra - _registry)
        forms, backslash = (*more, *forms), backslash or more_backslash
    spans = _occurrences(text, forms)
    # The nested reading is right unless a secret holds a backslash, which it can misread.
    readings = (_NESTED_READING, *_STRICT_READINGS) if backslash else (_NESTED_READING,)
    encoded = "\\" in text or "%" in text or "&" in text
    for reading in readings if encoded else ():
        view = _DecodedView(text, reading)
        if view.starts is not None:
            spans += [view.original_span(*span) for span in _occurrences(view.text, forms)]
    if not spans:
        return text
    pieces: list[str] = []
    position = 0
    for start, end in sorted(spans):
        if end <= position:
            continue  # inside a span masked already
        if start < position:  # overlaps the previous span: extend it
            position = end
            continue
        pieces += [text[position:start], MASK]
        position = end
    pieces.append(text[position:])
    return "".join(pieces)


_MEMBER_NAMES = "|".join(
    re.escape(name) for name in sorted(SECRET_MEMBERS | CONTACT_MEMBERS, key=len, reverse=True)
)
# "doorCode": "4711" in JSON (quotes possibly escaped once or more), doorCode=4711 in a query
# or form body, and credentials in echoed headers.
_MEMBERS_IN_TEXT = re.compile(
    rf"""(?ix)
    (?P<json>\\*["'](?:{_MEMBER_NAMES})\\*["']\s*:\s*)
        (?P<json_value>\\*["'](?:\\+u[0-9a-f]{{4}}|\\+[^"'u\\]|[^"'\\])*|-?[\w.+-]+)
    | (?P<form>(?<![\w-])(?:{_MEMBER_NAMES})=)(?P<form_value>[^&\s"'<>]+)
    | (?P<header>(?:authorization|x-wishbox-auth-token)["']?\s*[:=]\s*["']?(?:bearer\s+|basic\s+)?)
        (?P<header_value>[^\s"',;]+)
    """
)


_MEMBER_HINTS = tuple(
    sorted({"token", "wificode", "doorcode", "buildingcode", "client_secret", "authorization"})
    + sorted(CONTACT_MEMBERS)
)
"""Parts of every member name: a text holding none of them has no member to mask."""


def _mask_member(match: re.Match[str]) -> str:
    if match["json"] is not None:
        found = match["json_value"]
        quote = re.match(r"\\*[\"']", found)
        if quote:
            return match["json"] + quote.group(0) + MASK
        if found in ("null", "true", "false"):
            return match.group(0)  # no value to hide
        return match["json"] + f'"{MASK}"'  # a bare number: quoted, the JSON stays valid
    if match["form"] is not None:
        return match["form"] + MASK
    return match["header"] + MASK


def mask_text(text: str, also: Iterable[str] = ()) -> str:
    """``text`` without a registered secret, without the values in ``also``, in any encoding,
    and without the values of sensitive members written in it (JSON, form or header form)."""
    extra = (
        frozenset(value for value in map(str, also) if len(value) >= MIN_SECRET_LENGTH)
        if also
        else frozenset()
    )
    if _registry or extra:
        text = _mask_values(text, extra)
    lowered = text.lower()
    if any(name in lowered for name in _MEMBER_HINTS):
        text = _MEMBERS_IN_TEXT.sub(_mask_member, text)
    return text


def mask_message(message: str, secrets: Iterable[str] = ()) -> str:
    """The message with every known secret (registered, or in ``secrets``) masked."""
    return mask_text(message, secrets)


# -- logging -----------------------------------------------------------------------------


class SecretMaskingFilter(logging.Filter):
    """Masks a log record's message (arguments included) and its exception text in place.

    Installed on every record by :func:`install_log_masking`; a deployment may also attach it
    to a handler of its own. Never drops a record.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        mask_record(record)
        return True


def mask_record(record: logging.LogRecord) -> None:
    """Replace the record's message, arguments and exception text by their masked forms."""
    try:
        message = record.getMessage()
    except Exception:  # a malformed record: logging reports it when it is emitted
        return
    masked = mask_text(message)
    if masked != message:
        record.msg, record.args = masked, None
    if record.exc_info and record.exc_info[1] is not None:
        text = "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
        masked = mask_text(text)
        if masked != text:
            # Handlers format exc_text when set; the exception object itself would carry the
            # secret on, so it goes.
            record.exc_text, record.exc_info = masked, None
    if record.stack_info:
        record.stack_info = mask_text(record.stack_info)


_install_lock = threading.Lock()
_installed = False


def install_log_masking() -> None:
    """Mask every log record of this process as it is created (idempotent).

    A filter on the ``connector`` logger would not see records of its children or of libraries
    (httpx, aiohttp, Dagster); the record factory sees them all, before any handler.
    """
    global _installed
    with _install_lock:
        if _installed:
            return
        create = logging.getLogRecordFactory()

        def masked_record(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = create(*args, **kwargs)
            mask_record(record)
            return record

        logging.setLogRecordFactory(masked_record)
        _installed = True


install_log_masking()
