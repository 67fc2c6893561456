"""Published baselines and run comparison: baseline cards (``cards.py``), ``medimg-bench
reproduce`` (``reproduce.py``) and ``medimg-bench compare`` (``compare.py``); see docs/baselines.md."""
