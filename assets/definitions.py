"""The Definitions object of pms-sync: one asset group per mapping file, nothing per connection.

Loaded by ``workspace.yaml``. Adding a connection means adding a mapping file to ``mappings/``
(or to the folder named by ``PMS_SYNC_MAPPINGS_DIR``) and reloading the code location.
"""

from __future__ import annotations

from assets.connections import mappings_dir
from assets.factory import build_definitions
from assets.resources import PROJECT_ROOT

defs = build_definitions(mappings_dir(PROJECT_ROOT / "mappings"))
