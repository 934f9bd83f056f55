"""Benchmarks of pms-sync against its targets and against what a user would use instead.

``make bench`` (or ``python -m bench all``) runs every scenario at each size and writes
``bench/results.json`` and the table in ``BENCHMARKS.md``; ``python -m bench <scenario> --size N``
runs one. Every timed stage runs in a fresh subprocess, so its peak memory is its own.
"""
