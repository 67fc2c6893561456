"""Published baselines and run comparison: ``medimg-bench compare`` (paired tests of two runs).
Baseline cards and ``reproduce`` are not built yet (see docs/baselines.md)."""
