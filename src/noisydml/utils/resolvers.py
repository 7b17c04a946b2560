"""The project's OmegaConf resolvers, registered on import: by the command line (which resolves the
launcher config in the submitting process) and by a run (which resolves its config)."""

from __future__ import annotations

from omegaconf import OmegaConf


def run_name(experiment: str | None) -> str:
    """An experiment's run name from its config path: ``le2019/fig2_cub`` -> ``le2019_fig2_cub``; a
    protocol chosen without an experiment (``+protocol=zhang2023``) names its runs after itself."""
    if experiment is None:
        from hydra.core.hydra_config import HydraConfig

        experiment = HydraConfig.get().runtime.choices.get("protocol") or "default"
    return experiment.replace("/", "_")


OmegaConf.register_new_resolver(
    "noisydml.gpus", lambda accelerator, devices: 0 if accelerator == "cpu" else devices, replace=True
)
# ``name: ${noisydml.run_name:${hydra:runtime.choices.experiment}}`` in the per-paper protocols.
OmegaConf.register_new_resolver("noisydml.run_name", run_name, replace=True)
# ``age_init: ${noisydml.times:0.8,${.age_max}}`` in conf/loss/bspml.yaml: a value that scales with another.
OmegaConf.register_new_resolver(
    "noisydml.times", lambda factor, value: float(factor) * float(value), replace=True
)


def batch_classes(batch_size: int, samples_per_class: int) -> int:
    """P of a P x K batch of ``batch_size`` with K = ``samples_per_class``, which must divide it."""
    classes, left = divmod(int(batch_size), int(samples_per_class))
    if left or classes < 1:
        raise ValueError(
            f"data.K={samples_per_class} does not divide the batch of {batch_size}: choose a K that does"
        )
    return classes


# ``P: ${noisydml.batch_classes:160,${data.K}}`` in conf/experiment/levi2021/fig5b_positives.yaml: a fixed
# batch swept over K.
OmegaConf.register_new_resolver("noisydml.batch_classes", batch_classes, replace=True)
