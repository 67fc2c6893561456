"""A training recipe: everything that decides the numbers of a training run (optimiser,
schedule, length, batches, selection, AMP, DDP, seed), as one frozen dataclass.

:data:`MEDMNIST_V2` is the MedMNIST v2 paper's recipe (Adam, lr 1e-3, x0.1 at epochs 50 and 75,
100 epochs of batch 128 with the last batch kept, best validation AUC), as the authors'
``MedMNIST2D/train_and_eval_pytorch.py`` runs it; the baseline cards set the same values
through ``train.*`` config keys (:func:`recipe_from_config`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["MEDMNIST_V2", "OPTIMIZERS", "SELECT_ON", "TrainRecipe", "fit_config_options", "recipe_from_config"]

OPTIMIZERS = ("adamw", "adam", "sgd")
SELECT_ON = ("auroc", "accuracy")


@dataclass(frozen=True)
class TrainRecipe:
    """How to train. Fields by group:

    * optimiser: ``optimizer`` (``adamw``, ``adam`` with ``weight_decay`` as L2, ``sgd`` with
      ``momentum``), ``lr`` (the head's; the encoder's is ``lr * encoder_lr_scale``),
      ``weight_decay``, ``grad_clip`` (global norm);
    * schedule: ``lr_milestones`` (epochs) and ``lr_gamma`` give ``MultiStepLR`` stepped per
      epoch; without milestones, linear warm-up over ``warmup_steps`` (default
      min(20, max_steps // 10)) then cosine over whichever of steps / ``max_seconds`` ends first;
    * length: ``max_steps``, or ``epochs`` whole epochs (then ``max_steps`` = epochs x batches
      per epoch), and a wall-clock cap ``max_seconds``;
    * batches: ``batch_size`` (global under DDP), ``drop_last`` (None: drop an incomplete last
      batch when the data is larger than one batch), ``seed`` (the per-epoch order and the
      initial torch seed), ``cache`` (keep samples in memory), ``num_workers``;
    * selection: ``select_on`` (``auroc`` / ``accuracy`` on a validation set after every
      epoch), or a ``val_fn`` every ``val_every`` steps; ``patience`` validations without
      improvement stop; ``restore_best`` keeps the best weights; ``val_batch_size``;
    * after: ``bn_recalibration_batches`` (batch-norm statistics recomputed, when no selection);
    * numerics: ``amp`` (bf16 on CPU, fp16 + scaler on CUDA), ``deterministic``;
    * DDP: ``distributed`` (None: when a process group with more than one rank exists);
    * checkpoints: a training state every ``checkpoint_every`` steps (where: ``train``'s
      ``checkpoint_dir``).
    """

    optimizer: str = "adamw"
    lr: float = 1e-3
    weight_decay: float = 1e-4
    momentum: float = 0.9
    encoder_lr_scale: float = 1.0
    grad_clip: float | None = None
    lr_milestones: tuple[int, ...] | None = None
    lr_gamma: float = 0.1
    warmup_steps: int | None = None
    max_steps: int = 200
    epochs: int | None = None
    max_seconds: float | None = None
    batch_size: int = 16
    drop_last: bool | None = None
    seed: int = 0
    cache: bool = False
    num_workers: int = 0
    select_on: str | None = None
    val_every: int = 50
    val_batch_size: int | None = None
    patience: int | None = None
    restore_best: bool = True
    bn_recalibration_batches: int = 16
    amp: bool = False
    deterministic: bool = False
    distributed: bool | None = None
    checkpoint_every: int = 50

    def __post_init__(self) -> None:
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"fit(): optimizer={self.optimizer!r}; expected one of {OPTIMIZERS}")
        if self.select_on is not None and self.select_on not in SELECT_ON:
            raise ValueError(f"fit(): select_on={self.select_on!r}; expected one of {SELECT_ON}")
        if self.lr_milestones is not None:
            object.__setattr__(self, "lr_milestones", tuple(sorted(int(m) for m in self.lr_milestones)))

    def replace(self, **changes: Any) -> TrainRecipe:
        """A copy with ``changes`` (``MEDMNIST_V2.replace(epochs=2)``)."""
        return dataclasses.replace(self, **changes)

    @property
    def warmup(self) -> int | None:
        """Warm-up steps as the loop uses them: none with milestones unless asked for."""
        if self.lr_milestones is not None and self.warmup_steps is None:
            return 0
        return self.warmup_steps


#: MedMNIST v2 (Yang et al. 2023), as in MedMNIST/experiments MedMNIST2D/train_and_eval_pytorch.py
MEDMNIST_V2 = TrainRecipe(optimizer="adam", lr=1e-3, weight_decay=0.0, epochs=100, batch_size=128,
                          drop_last=False, lr_milestones=(50, 75), lr_gamma=0.1, select_on="auroc")


def fit_config_options(tcfg: Any) -> dict[str, Any]:
    """The recipe options of a ``train`` config node (``optimizer``, ``momentum``, ``epochs``,
    ``drop_last``, ``lr_milestones``, ``lr_gamma``, ``select_on``) as ``fit`` keyword arguments;
    keys absent or null are left out, so ``fit``'s defaults apply."""
    out: dict[str, Any] = {}
    conv: dict[str, Callable[[Any], Any]] = {
        "optimizer": lambda v: str(v).lower(), "momentum": float, "epochs": int, "drop_last": bool,
        "lr_milestones": lambda v: [int(m) for m in v], "lr_gamma": float, "select_on": str,
    }
    for key, f in conv.items():
        v = tcfg.get(key)
        if v is not None:
            out[key] = f(v)
    return out


def recipe_from_config(tcfg: Mapping[str, Any], *, seed: int = 0) -> TrainRecipe:
    """The :class:`TrainRecipe` of a ``train`` config node (as ``run_config`` trains it)."""
    opts = fit_config_options(tcfg)
    if "lr_milestones" in opts:
        opts["lr_milestones"] = tuple(opts["lr_milestones"])
    return TrainRecipe(max_steps=int(tcfg["max_steps"]), max_seconds=tcfg.get("max_seconds"), lr=float(tcfg["lr"]),
                       weight_decay=float(tcfg.get("weight_decay", 0.0)), batch_size=int(tcfg["batch_size"]),
                       seed=int(seed), cache=bool(tcfg.get("cache", False)),
                       num_workers=int(tcfg.get("num_workers", 0)), **opts)
