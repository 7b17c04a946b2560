"""``noisydml-dashboard``: runs and sweeps in MLflow's UI on 127.0.0.1, imported from their own files
(``results.json``, ``csv/metrics.csv``), so any run can be looked at, with no account and no internet."""
