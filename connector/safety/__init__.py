"""Safety rails of unattended syncs (docs/safety-rails.md): the mass-change guard, the
export-stability check and count anomalies. Parent-failure holdback lives with the push
(:mod:`connector.holdback`), plan files with the plan (:mod:`connector.plan_file`)."""
