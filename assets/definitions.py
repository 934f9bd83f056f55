"""The Definitions object of pms-sync: one ``PmsSyncComponent`` per mapping file.

Loaded by ``workspace.yaml`` (``make dev``). Adding a connection means adding a mapping file to
``mappings/`` (or to the folder named by ``PMS_SYNC_MAPPINGS_DIR``) and reloading the code
location; another Dagster project adds one with ``dg scaffold defs pms_sync.PmsSyncComponent``.
"""

from __future__ import annotations

from assets.project import MAPPINGS_DIR, PROJECT_ROOT
from pms_sync.component import folder_definitions
from pms_sync.connections import mappings_dir

defs = folder_definitions(mappings_dir(MAPPINGS_DIR), PROJECT_ROOT)
