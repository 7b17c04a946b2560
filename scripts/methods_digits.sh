#!/usr/bin/env bash
# Every loss/miner combination on digits at noise 0 and 0.4, 3 seeds each (issue #3's table), then one
# report over them all: outputs/reports/methods_digits/. Each combination is its own Hydra multirun
# under outputs/sweeps/methods_digits/<combination>/, so a re-run skips the finished jobs.
#   scripts/methods_digits.sh                     # everything
#   scripts/methods_digits.sh seed=0 noise.rate=0  # extra overrides replace the sweep's
set -euo pipefail
BIN=${VENV:-.venv}/bin
OUT=${OUT:-outputs/sweeps/methods_digits}
COMMON=(name=methods_digits logger=csv trainer.enable_progress_bar=false cpu_threads=1
  trainer.max_epochs=10 trainer.check_val_every_n_epoch=10 noise.rate=0,0.4 seed=0,1,2)

# <folder> <overrides...>: the loss/miner pairings each loss's config recommends, the papers' variants.
COMBINATIONS=(
  "triplet_random_semihard loss=triplet miner=random_semihard"
  "triplet_fixed_semihard loss=triplet miner=fixed_semihard"
  "triplet_facenet_semihard loss=triplet miner=facenet_semihard"
  "triplet_batch_hard loss=triplet miner=batch_hard"
  "triplet_all loss=triplet miner=all"
  "triplet_eps_semihard loss=triplet miner=easy_positive miner.negatives=semihard"
  "triplet_eps_random loss=triplet miner=easy_positive miner.negatives=random"
  "marginal_random_semihard loss=marginal miner=random_semihard"
  "contrastive_all_pairs loss=contrastive miner=none"
  "contrastive_cosine_all_pairs loss=contrastive_cosine miner=none"
  "adapted_triplet_facenet_semihard loss=adapted_triplet miner=facenet_semihard"
  "semi_adapted_triplet_facenet_semihard loss=semi_adapted_triplet miner=facenet_semihard data.unlabeled_fraction=0.5"
  "bayesian_triplet_all_bayesian_mlp loss=bayesian_triplet miner=all backbone=bayesian_mlp"
  "bayesian_triplet_all_bayesian_linear loss=bayesian_triplet miner=all backbone=bayesian_linear"
  "margin_distance_weighted loss=margin miner=distance_weighted"
  "margin_eps_distance_weighted loss=margin miner=easy_positive miner.negatives=distance_weighted"
  "multi_similarity_multi_similarity loss=multi_similarity miner=multi_similarity"
  "multi_similarity_eps loss=multi_similarity miner=easy_positive miner.negatives=multi_similarity"
  "trimmed_triplet_random_semihard loss=trimmed miner=random_semihard"
  "trimmed_margin_distance_weighted loss=trimmed loss@loss.loss=margin miner=distance_weighted"
  "bspml_multi_similarity loss=bspml miner=multi_similarity"
  "triplet_smooth_batch_hard loss=triplet_smooth miner=batch_hard"
  "fastap_all_pairs loss=fastap miner=none"
  "rdml_all_triplets loss=rdml miner=none"
  "proxy_anchor loss=proxy_anchor miner=none module.loss_lr=0.1"
  "snr_all_pairs loss=snr miner=none"
)
if [[ -f conf/loss/proxy_nca.yaml ]]; then
  COMBINATIONS+=("proxy_nca loss=proxy_nca miner=none module.loss_lr=0.1")
fi

status=0
for combination in "${COMBINATIONS[@]}"; do
  read -r folder overrides <<<"$combination"
  # shellcheck disable=SC2086
  "$BIN/noisydml" -m "${COMMON[@]}" $overrides "$@" hydra.sweep.dir="$OUT/$folder" || status=1
done
"$BIN/noisydml-report" "$OUT"/* --name methods_digits || status=1
exit $status
