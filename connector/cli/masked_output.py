"""Everything the CLI prints passes through the secret masking (``connector.secrets``).

Commands print reports, quarantine rows, service messages and errors in many places; rather than
trusting each of them, the standard streams themselves are replaced by a writer that masks
every registered secret (in any encoding) and the values of sensitive members in what is
written. It exposes no binary ``buffer``: nothing can write around it.

``--json`` promises one JSON document on stdout: a secret masked where the document has a bare
number (a numeric password equal to a count) would break it, so a document that masking would
make invalid is masked value by value instead.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from typing import Any, TextIO

from connector.secrets import MASK, mask_text


class MaskingWriter:
    """A text stream that writes to ``stream`` what it is given, with secrets masked."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.written = False  # whether anything was written (``--json``: the one document)

    def write(self, text: str) -> int:
        if not isinstance(text, str):  # click probes whether a stream is binary with b""
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self.written = self.written or bool(text)
        masked = mask_text(text)
        if masked != text and _is_json(text) and not _is_json(masked):
            masked = _masked_json(text)
        self._stream.write(masked)
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return self._stream.isatty()

    def fileno(self) -> int:
        return self._stream.fileno()

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    @property
    def encoding(self) -> str:
        return getattr(self._stream, "encoding", None) or "utf-8"

    @property
    def errors(self) -> str:
        return getattr(self._stream, "errors", None) or "strict"

    @property
    def closed(self) -> bool:
        return self._stream.closed

    def __getattr__(self, name: str) -> Any:
        if name == "buffer":  # bytes written there would bypass the masking
            raise AttributeError("a masking stream has no binary buffer")
        return getattr(self._stream, name)


def _is_json(text: str) -> bool:
    if not text.lstrip().startswith(("{", "[")):
        return False
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _masked_json(text: str) -> str:
    """The JSON document in ``text`` with each key, string and number masked on its own."""

    def masked(value: Any) -> Any:
        if isinstance(value, dict):
            return {mask_text(key): masked(item) for key, item in value.items()}
        if isinstance(value, list):
            return [masked(item) for item in value]
        if isinstance(value, str):
            return mask_text(value)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return MASK if mask_text(str(value)) != str(value) else value
        return value

    body = text.strip()
    indent = 2 if "\n" in body else None
    ending = text[len(text.rstrip()) :]
    return json.dumps(masked(json.loads(body)), indent=indent, ensure_ascii=False) + ending


def mask_standard_streams() -> None:
    """Replace sys.stdout and sys.stderr by masking writers (once)."""
    if not isinstance(sys.stdout, MaskingWriter):
        sys.stdout = MaskingWriter(sys.stdout)
    if not isinstance(sys.stderr, MaskingWriter):
        sys.stderr = MaskingWriter(sys.stderr)
