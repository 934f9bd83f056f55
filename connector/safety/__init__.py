"""Safety rails of unattended syncs (docs/safety-rails.md): the mass-change guard, the
export-stability check and count anomalies. Parent-failure holdback lives with the push
(:mod:`connector.push._holdback`), plan files with the pipeline that applies them (:mod:`connector.pipeline._plan_file`)."""
