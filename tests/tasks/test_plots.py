"""Task plots draw any class name literally (issue #35 item 6: a class named with ``$...$``
crashed the ROC plot in matplotlib's mathtext, and no report was written)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from medimg_bench.tasks.plots import _literal, plot_per_class, plot_roc

NAMES = ["$x_{$", "$\\frac{1}{$", "a $b$ c", "cost $5", "plain"]


def _samples() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for c in NAMES:
        for i in range(20):
            rows.append({"id": f"{c}-{i}", "class": c, "status": "ok", "label": i % 2,
                         "score": float(rng.random() * 0.5 + 0.5 * (i % 2)), "dice": float(rng.random())})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("draw", ["roc", "per_class"])
def test_dollar_class_names_are_drawn(tmp_path, draw):
    path = tmp_path / f"{draw}.png"
    out = (plot_roc(_samples(), path, title="$run_{") if draw == "roc"
           else plot_per_class(_samples(), "dice", path, title="$run_{"))
    assert out == path and Image.open(path).size[0] > 100


@pytest.mark.parametrize("name", NAMES)
def test_literal_text_shows_the_name_itself(name):
    from matplotlib.text import Text

    shown, is_math = Text(text=_literal(name))._preprocess_math(_literal(name))
    assert shown == name and not is_math
