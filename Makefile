# Two commands do all the set-up on a fresh machine:  make demo  |  make test
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test test-fixtures install lint bench clean

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

# the fixture comparisons again on torch's portable kernels (.ci/run, after `make test`): an
# assertion tighter than its computation's precision fails here before it fails elsewhere
test-fixtures: $(STAMP)
	ATEN_CPU_CAPABILITY=default $(PY) -m pytest -q -p no:cacheprovider -m fixture_compare

lint: $(STAMP)
	$(VENV)/bin/ruff check medimg_bench tests benchmarks

bench: $(STAMP)
	$(PY) benchmarks/seg_metrics.py
	$(PY) benchmarks/classification_metrics.py

clean:
	rm -rf $(VENV) runs outputs multirun .pytest_cache
