"""Everything the CLI prints passes through the secret masking (``connector.secrets``).

Commands print reports, quarantine rows, service messages and errors in many places; rather than
trusting each of them, the standard streams themselves are replaced by a writer that masks
every registered secret (in any encoding) and the values of sensitive members in what is
written. It exposes no binary ``buffer``: nothing can write around it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any, TextIO

from connector.secrets import mask_text


class MaskingWriter:
    """A text stream that writes to ``stream`` what it is given, with secrets masked."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        if not isinstance(text, str):  # click probes whether a stream is binary with b""
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self._stream.write(mask_text(text))
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


def mask_standard_streams() -> None:
    """Replace sys.stdout and sys.stderr by masking writers (once)."""
    if not isinstance(sys.stdout, MaskingWriter):
        sys.stdout = MaskingWriter(sys.stdout)  # type: ignore[assignment]
    if not isinstance(sys.stderr, MaskingWriter):
        sys.stderr = MaskingWriter(sys.stderr)  # type: ignore[assignment]
