"""The JSON Schema of the mapping-file format, generated from the pydantic model.

    python -m connector.mapping.schema mappings/schema.json

Editors that understand ``# yaml-language-server: $schema=../schema.json`` complete and check
mapping files with it; a test fails when the committed file is out of date.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from connector.mapping.model import Mapping


def mapping_schema() -> dict[str, Any]:
    schema = Mapping.model_json_schema(by_alias=True, mode="validation")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://pms-sync.invalid/mappings/schema.json",
        **schema,
    }


def render() -> str:
    return json.dumps(mapping_schema(), indent=2, ensure_ascii=False, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    if len(arguments) != 1:
        print("usage: python -m connector.mapping.schema OUTPUT.json", file=sys.stderr)
        return 2
    Path(arguments[0]).write_text(render(), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
