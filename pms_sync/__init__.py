"""pms-sync's Dagster integration: the layer that turns mapping files into Dagster definitions.

``PmsSyncComponent`` adds one connection (one mapping file) to any Dagster project through a
``defs.yaml`` (``dg scaffold defs pms_sync.PmsSyncComponent NAME``); ``dg`` finds it through the
``dagster_dg_cli.registry_modules`` entry point of the pms-sync distribution. pms-sync's own
code location (``assets/definitions.py`` in the checkout) is built from the same component.
Every module here is thin glue over ``connector/``.
"""

from pms_sync.component import PmsSyncComponent

__all__ = ["PmsSyncComponent"]
