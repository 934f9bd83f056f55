"""pms-sync's own Dagster code location: one ``PmsSyncComponent`` per bundled mapping file.

Loaded by ``workspace.yaml`` (``assets/definitions.py``), never installed or imported by other
projects: a top-level package called ``assets`` would clash with other installed packages. The
Dagster layer itself is the installed package ``pms_sync``; this folder holds only what is
pms-sync's own project: its definitions, ``make demo`` and the instance settings.
"""
