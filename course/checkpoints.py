"""A trained model saved by one notebook and loaded by a later one (10.6 and 10.7 save, 10.8 loads).

Checkpoints live in one folder beside the notebooks' folders (``checkpoints/`` next to
``10.6-encoder-decoder/`` when a notebook runs in such a folder, else in the working folder, as on
Colab), one file ``<name>.pt`` each: the model's weights, the ``extras`` that say what it was
trained on, and the model's outputs on a ``probe`` input. Every notebook still runs alone:
:func:`load` says why it could not load (no file, other extras, weights that do not fit the model,
other outputs on the probe) and returns False, and the notebook trains.

The probe is there because weights of the right shapes can belong to a model that computes
something else (a learner's GPT without its causal mask, say): loaded into the loading notebook's
reference model, they must give the outputs the saving notebook's model gave.

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
Probe = torch.Tensor | tuple[torch.Tensor, ...]  # a model's input, or its inputs
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


def save(name: str, model: nn.Module, probe: Probe, **extras) -> Path | None:
    """Save ``model``'s weights, its outputs on ``probe`` (its input, or a tuple of its inputs) and
    ``extras`` (plain values: numbers, strings, lists, dicts) as ``name``; returns the file, or None
    where nothing was saved (quick mode, a model that raises on the probe, a read-only folder)."""
    if quick_mode():
        return None
    target = path(name)
    weights = {key: value.detach().cpu() for key, value in model.state_dict().items()}
    inputs = [t.detach().cpu() for t in (probe if isinstance(probe, tuple) else (probe,))]
    try:
        saved = {"state_dict": weights, "extras": extras,
                 "probe": {"inputs": inputs, "output": _outputs(model, inputs).cpu()}}
    except Exception as error:  # noqa: BLE001 - a model that cannot run the probe is not worth loading
        print(f"{name} not saved: it raised {type(error).__name__} on the probe ({error}); later "
              f"notebooks will train their own")
        return None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        torch.save(saved, target)
    except OSError as error:
        print(f"{name} not saved ({error}): later notebooks will train their own")
        return None
    print(f"saved {name} to {target}: later notebooks load it instead of training")
    return target


def load(name: str, model: nn.Module, **extras) -> bool:
    """Load ``name`` into ``model`` (in eval mode) if it was saved with the same ``extras``, its
    weights fit and, with them, ``model`` gives the saved outputs on the saved probe; True when
    loaded, else False with the reason printed and ``model`` as it was (train instead)."""
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
    if "probe" not in saved:
        print(f"the saved {name} has no probe to check it with (an older version of the course saved it): "
              f"training it here")
        return False
    own = {key: value.clone() for key, value in model.state_dict().items()}
    model.load_state_dict(state)
    difference = _probe_difference(model, saved["probe"])
    if difference is not None:
        model.load_state_dict(own)  # as it was: the notebook trains it from its own start
        print(f"the saved {name} is not loaded: with its weights, this notebook's model gives other outputs "
              f"on the probe saved with it (up to {difference:.3g} apart), so the model that was trained "
              f"computes something else. Make the test cells of the notebook that saved it pass and run that "
              f"notebook again to use its {name} here; until then, this notebook trains its own")
        return False
    model.eval()
    print(f"loaded {name} from {source}")
    return True


@torch.no_grad()
def _outputs(model: nn.Module, inputs: list[torch.Tensor]) -> torch.Tensor:
    """``model(*inputs)`` in eval mode, on the model's device (its mode is left as it was)."""
    training, device = model.training, next(model.parameters()).device
    try:
        return model.eval()(*(t.to(device) for t in inputs)).float()
    finally:
        model.train(training)


def _probe_difference(model: nn.Module, probe: dict) -> float | None:
    """The largest difference between ``model``'s outputs on the saved probe and the saved ones,
    None where they agree."""
    try:
        got, want = _outputs(model, probe["inputs"]).cpu(), probe["output"]
    except Exception:  # noqa: BLE001 - a model that cannot even run the probe computes something else
        return float("inf")
    if got.shape == want.shape and torch.allclose(got, want, rtol=1e-3, atol=1e-3):
        return None
    return (got - want).abs().max().item() if got.shape == want.shape else float("inf")


def _fits(state: dict, own: dict) -> bool:
    """The same names, each with the same shape."""
    return state.keys() == own.keys() and all(
        isinstance(state[key], torch.Tensor) and state[key].shape == own[key].shape for key in own)
