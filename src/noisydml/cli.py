"""``noisydml``: the Hydra command line. Light on imports, so ``--help`` and ``--cfg job`` answer at once:
torch and Lightning load only when a run starts (:mod:`noisydml.train`).
"""

from __future__ import annotations

import hydra
from omegaconf import DictConfig, OmegaConf

from noisydml import CONFIG_DIR
from noisydml.quiet import silence_known_noise

# The launcher config is resolved in the submitting process, which imports this module.
OmegaConf.register_new_resolver(
    "noisydml.gpus", lambda accelerator, devices: 0 if accelerator == "cpu" else devices, replace=True
)


@hydra.main(version_base="1.3", config_path=str(CONFIG_DIR), config_name="config")
def main(cfg: DictConfig) -> float | None:
    # Before the trainer's imports: faiss logs as it loads.
    silence_known_noise()
    from noisydml.train import train

    metrics = train(cfg)
    return metrics.get(cfg.get("optimized_metric") or "")
