"""Training as a recipe + loop: the recipe dataclass, the MedMNIST recipe as the cards compose
it, the hooks, and the progress a user waiting for a run sees (epoch n of N, loss, validation
value, best so far with its epoch, time left)."""

from __future__ import annotations

import io

import pytest
import torch

from medimg_bench.models.training import (
    MEDMNIST_V2,
    EpochEnd,
    TrainHooks,
    TrainProgress,
    TrainRecipe,
    fit,
    recipe_from_config,
    train,
)
from medimg_bench.models.training.progress import epoch_line, format_duration
from tests.models._fit_scenarios import LOSS, Toy, toy_model


def test_recipe_validates_and_sorts_milestones():
    assert TrainRecipe(lr_milestones=[75, 50]).lr_milestones == (50, 75)
    with pytest.raises(ValueError, match="optimizer"):
        TrainRecipe(optimizer="lbfgs")
    with pytest.raises(ValueError, match="select_on"):
        TrainRecipe(select_on="f1")
    assert MEDMNIST_V2.replace(epochs=2).epochs == 2 and MEDMNIST_V2.epochs == 100
    assert MEDMNIST_V2.warmup == 0 and TrainRecipe().warmup is None


@pytest.mark.parametrize("card", ["medmnist_v2_resnet18_28", "medmnist_v2_resnet50_28",
                                  "medmnist_v2_resnet18_224", "medmnist_v2_resnet50_224"])
def test_the_cards_train_overrides_compose_into_the_medmnist_recipe(card):
    from medimg_bench.baselines.cards import load_card
    from medimg_bench.runs import compose_config
    from medimg_bench.runs.compose import plain

    c = load_card(card)
    cfg = plain(compose_config([o.replace("{flag}", "breastmnist") for o in c["overrides"]]))
    recipe = recipe_from_config(cfg["train"], seed=cfg["seed"])
    assert recipe.replace(max_steps=MEDMNIST_V2.max_steps) == MEDMNIST_V2


def test_fit_and_train_with_the_same_recipe_are_the_same_run():
    kw = dict(epochs=3, batch_size=8, drop_last=False, lr=0.01, optimizer="adam", weight_decay=0.0,
              lr_milestones=[2], select_on="auroc")
    a, b = toy_model(), toy_model()
    ra = fit(a, Toy(20), loss_fn=LOSS, val_dataset=Toy(8, seed=1), progress=False, **kw)
    kw["lr_milestones"] = (2,)
    rb = train(b, Toy(20), TrainRecipe(**kw), loss_fn=LOSS, val_dataset=Toy(8, seed=1), progress=False)
    assert ra.losses == rb.losses and ra.val_curve == rb.val_curve and ra.best_epoch == rb.best_epoch
    for k, v in a.module.state_dict().items():
        assert torch.equal(v, b.module.state_dict()[k]), k


def test_hooks_see_every_step_and_epoch():
    steps, epochs = [], []
    hooks = TrainHooks(on_step=lambda s: steps.append((s.steps, s.losses[-1])), on_epoch=epochs.append)
    recipe = TrainRecipe(epochs=3, batch_size=8, drop_last=False, select_on="auroc", optimizer="adam", lr=0.01)
    res = train(toy_model(), Toy(20), recipe, loss_fn=LOSS, val_dataset=Toy(8, seed=1), hooks=hooks, progress=False)
    assert [s for s, _ in steps] == list(range(1, res.steps + 1)) and [x for _, x in steps] == res.losses
    assert [e.epoch for e in epochs] == [0, 1, 2] and [e.val for e in epochs] == [v for _, v in res.val_curve]
    last = epochs[-1]
    assert last.best_epoch == res.best_epoch and last.best_val == res.best_val and last.left == 0.0
    assert last.loss == pytest.approx(sum(res.losses[-3:]) / 3)  # 3 steps an epoch: 20 samples, batch 8
    assert all(e.n_epochs == 3 for e in epochs)


def test_a_custom_optimizer_and_validation_through_hooks():
    seen = []

    def evaluate(model, loader, metric):
        seen.append(metric)
        return float(len(seen))  # improves every epoch: the last is kept

    hooks = TrainHooks(make_optimizer=lambda name, groups, **kw: torch.optim.SGD(groups, lr=kw["lr"]), evaluate=evaluate)
    res = train(toy_model(), Toy(16), TrainRecipe(epochs=2, batch_size=8, select_on="accuracy"), loss_fn=LOSS,
                val_dataset=Toy(8), hooks=hooks, progress=False)
    assert seen == ["accuracy", "accuracy"] and res.best_epoch == 1


def test_progress_in_a_log_prints_one_line_per_validated_epoch(capsys):
    res = fit(toy_model(), Toy(20), loss_fn=LOSS, epochs=3, batch_size=8, drop_last=False, lr=0.01, optimizer="adam",
              select_on="auroc", val_dataset=Toy(8, seed=1), progress=True)
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("epoch ")]
    assert [ln.split()[1] for ln in lines] == ["1/3", "2/3", "3/3"]
    for ln, (_epoch, v) in zip(lines, res.val_curve):
        assert f"val auroc {v:.4f}" in ln and "elapsed" in ln and "left" in ln
    assert f"(epoch {res.best_epoch + 1})" in lines[-1] and f"best {res.best_val:.4f}" in lines[-1]
    assert "step 9/9" in lines[-1] and lines[-1].endswith("~0:00:00 left")


def test_progress_changes_no_number(capsys):
    kw = dict(loss_fn=LOSS, epochs=2, batch_size=8, select_on="auroc", val_dataset=Toy(8, seed=1))
    a = fit(toy_model(), Toy(16), progress=True, **kw)
    b = fit(toy_model(), Toy(16), progress=False, **kw)
    assert a.losses == b.losses and a.val_curve == b.val_curve


def test_without_validation_the_last_epoch_has_a_line(capsys):
    fit(toy_model(), Toy(16), loss_fn=LOSS, max_steps=12, batch_size=8, progress=True)
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("epoch ")]
    assert lines[-1].startswith("epoch 6/6") and "val" not in lines[-1]  # 16 samples, batch 8, last dropped


def test_epoch_line_and_durations():
    e = EpochEnd(epoch=36, n_epochs=100, steps=185, max_steps=500, loss=0.10321, val=0.90123, metric="auroc",
                 best_val=0.91877, best_epoch=20, elapsed=481.0, left=820.4)
    assert epoch_line(e) == ("epoch 37/100  step 185/500  loss 0.1032  val auroc 0.9012  best 0.9188 (epoch 21)  "
                             "0:08:01 elapsed, ~0:13:40 left")
    assert format_duration(None) == "?" and format_duration(3725) == "1:02:05"


def test_live_bar_runs_on_a_terminal():
    p = TrainProgress(max_steps=4, n_epochs=2, every_epoch=True, live=True)
    p.step(1, 0.5, 0)
    p.epoch(EpochEnd(epoch=0, n_epochs=2, steps=2, max_steps=4, loss=0.5, val=0.7, metric="auroc", best_val=0.7,
                     best_epoch=0, elapsed=1.0, left=1.0))
    p.close()
    stream = io.StringIO()
    quiet = TrainProgress(max_steps=4, n_epochs=None, every_epoch=False, live=False, stream=stream)
    quiet.epoch(EpochEnd(epoch=0, n_epochs=None, steps=2, max_steps=4, loss=0.5, val=None, metric=None,
                         best_val=None, best_epoch=None, elapsed=1.0, left=None))
    assert stream.getvalue() == ""  # neither validated, nor the last, nor 10 s since the last line
