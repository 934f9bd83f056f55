"""The JSON Schema of the webhooks file, generated from the pydantic model.

    python -m connector.webhooks.schema mappings/webhooks.schema.json

A webhooks file starting ``# yaml-language-server: $schema=../webhooks.schema.json`` gets
completion and checks in editors; a test fails when the committed file is out of date.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from connector.webhooks._file import webhooks_schema


def render() -> str:
    return json.dumps(webhooks_schema(), indent=2, ensure_ascii=False, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    if len(arguments) != 1:
        print("usage: python -m connector.webhooks.schema OUTPUT.json", file=sys.stderr)
        return 2
    Path(arguments[0]).write_text(render(), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
