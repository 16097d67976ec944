"""A trained model saved by one notebook and loaded by a later one (10.6 and 10.7 save, 10.8 loads).

Checkpoints live in one folder beside the notebooks' folders (``checkpoints/`` next to
``10.6-encoder-decoder/`` when a notebook runs in such a folder, else in the working folder, as on
Colab), one file ``<name>.pt`` each: the model's weights and the ``extras`` that say what it was
trained on. Every notebook still runs alone: :func:`load` says why it could not load (no file,
other extras, weights that do not fit the model) and returns False, and the notebook trains.

In quick mode (grading, the tests) nothing is saved or loaded: the result never depends on what
ran before.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import torch
from torch import nn

from course import quick_mode

FOLDER = "checkpoints"
FOLDER_ENV = "COURSE_CHECKPOINTS"  # another folder, when set (the bench runs each notebook alone)
_ASSIGNMENT = re.compile(r"\d+\.\d+-")  # 10.6-encoder-decoder: a notebook's own folder


def folder(cwd: Path | None = None) -> Path:
    """Where checkpoints go: ``$COURSE_CHECKPOINTS`` when set, else beside the assignment folders,
    or in ``cwd`` outside them."""
    if os.environ.get(FOLDER_ENV):
        return Path(os.environ[FOLDER_ENV])
    cwd = Path.cwd() if cwd is None else cwd
    return (cwd.parent if _ASSIGNMENT.match(cwd.name) else cwd) / FOLDER


def path(name: str) -> Path:
    return folder() / f"{name}.pt"


def save(name: str, model: nn.Module, **extras) -> Path | None:
    """Save ``model``'s weights and ``extras`` (plain values: numbers, strings, lists, dicts) as
    ``name``; returns the file, or None where nothing was saved (quick mode, a read-only folder)."""
    if quick_mode():
        return None
    target = path(name)
    weights = {key: value.detach().cpu() for key, value in model.state_dict().items()}
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        torch.save({"state_dict": weights, "extras": extras}, target)
    except OSError as error:
        print(f"{name} not saved ({error}): later notebooks will train their own")
        return None
    print(f"saved {name} to {target}: later notebooks load it instead of training")
    return target


def load(name: str, model: nn.Module, **extras) -> bool:
    """Load ``name`` into ``model`` (in eval mode) if it was saved with the same ``extras`` and
    its weights fit; True when loaded, else False with the reason printed (train instead)."""
    if quick_mode():
        return False
    source = path(name)
    if not source.is_file():
        print(f"no saved {name} ({source}): training it here")
        return False
    try:
        saved = torch.load(source, map_location="cpu", weights_only=True)
        state, saved_extras = saved["state_dict"], saved["extras"]
    except Exception as error:  # noqa: BLE001 - a damaged or foreign file: train instead
        print(f"could not read {source} ({type(error).__name__}): training {name} here")
        return False
    changed = sorted(key for key in extras.keys() | saved_extras.keys()
                     if extras.get(key) != saved_extras.get(key))
    if changed:
        print(f"the saved {name} was trained with another {', '.join(changed)}: training it here")
        return False
    if not _fits(state, model.state_dict()):  # checked first: a failed load_state_dict copies half
        print(f"the saved {name}'s weights do not fit this notebook's model: training it here")
        return False
    model.load_state_dict(state)
    model.eval()
    print(f"loaded {name} from {source}")
    return True


def _fits(state: dict, own: dict) -> bool:
    """The same names, each with the same shape."""
    return state.keys() == own.keys() and all(
        isinstance(state[key], torch.Tensor) and state[key].shape == own[key].shape for key in own)
