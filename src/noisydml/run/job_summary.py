"""A line per job of a sweep as it ends: finished, or why it failed and where its traceback is.

Hydra's basic launcher reports only the first failure, after every job ran; this callback
(``conf/hydra/default.yaml``) reads each job's ``results.json`` instead, so the sweep's output says
which jobs failed and why.
"""

from __future__ import annotations

from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobReturn
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig

from noisydml.utils.run_directory import FINISHED, LEGACY_FINISHED, RunDir


class JobSummary(Callback):
    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        hydra = HydraConfig.get()
        if hydra.mode != RunMode.MULTIRUN:
            return
        run = RunDir(hydra.runtime.output_dir)
        results = run.read_results() or {}
        job = f"job {hydra.job.num} ({' '.join(job_return.overrides) or 'no overrides'})"
        if results.get("status") in (FINISHED, LEGACY_FINISHED):
            print(f"{job}: finished", flush=True)
            return
        error = str(results.get("error") or "no results.json written").splitlines()[0]
        where = f"; traceback in {run.traceback}" if run.traceback.is_file() else ""
        print(f"{job}: {results.get('status', 'failed')}: {error}{where}", flush=True)
