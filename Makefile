# Two commands do all the set-up on a fresh machine:  make demo  |  make test
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test install lint bench clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -c constraints.txt -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/medimg-bench demo

test: $(STAMP)
	$(VENV)/bin/ruff check medimg_bench tests benchmarks
	$(PY) -m pytest -q -n 2 --dist loadfile

lint: $(STAMP)
	$(VENV)/bin/ruff check medimg_bench tests benchmarks

bench: $(STAMP)
	$(PY) benchmarks/seg_metrics.py
	$(PY) benchmarks/classification_metrics.py

clean:
	rm -rf $(VENV) runs outputs multirun .pytest_cache
