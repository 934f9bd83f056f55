"""pms-sync's Dagster code location: definitions generated from the mapping files.

Loaded by ``workspace.yaml`` (``assets/definitions.py``), never installed or imported by other
projects: a top-level package called ``assets`` would clash with other installed packages.
Every module here is thin glue over ``connector/``.
"""
