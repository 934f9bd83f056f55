"""``python tests/push/sync_source_file.py SOURCE.json``: one sync of a JSON source, as a process.

The kill test runs this in a child process so that SIGKILL hits a real sync mid-push. Settings
come from the environment (PMS_SYNC_BASE_URL, PMS_SYNC_TOKEN, PMS_SYNC_SNAPSHOT, …) as for the
CLI. SOURCE.json is ``{entity: [[accountId, resource], ...]}``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from connector.batches import mapped_records_from_resources
from connector.contract import Entity
from connector.pipeline import sync_batches
from connector.settings import load_settings


def main(source_path: str) -> int:
    source = json.loads(Path(source_path).read_text())
    batches = {
        Entity(entity): mapped_records_from_resources(Entity(entity), [tuple(i) for i in items])
        for entity, items in source.items()
    }
    report = sync_batches(batches, load_settings(), mapping=source_path)
    print(json.dumps(report.to_json_dict(), default=str), flush=True)
    return 0 if report.push.complete else 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
