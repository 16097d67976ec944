"""Does a model saved by one notebook load in another, and does every other situation fall back
to training with a reason (course/checkpoints.py)?"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from course import checkpoints


@pytest.fixture
def course_tree(tmp_path, monkeypatch):
    """A learner's folder of notebooks, the working folder inside 10.8's; quick mode off."""
    monkeypatch.delenv("COURSE_QUICK", raising=False)
    monkeypatch.delenv("COURSE_GRADING_DIR", raising=False)
    (tmp_path / "10.6-encoder-decoder").mkdir()
    here = tmp_path / "10.8-decoding"
    here.mkdir()
    monkeypatch.chdir(here)
    return tmp_path


def model(seed: int = 0, width: int = 4) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(3, width), nn.LayerNorm(width))


PROBE = torch.arange(6.0).view(2, 3)  # (2, 3): an input of model()


def test_folder_is_beside_the_assignment_folders(tmp_path):
    """Do the notebooks of one course share one folder, and does a notebook elsewhere (Colab) use its own?"""
    assert checkpoints.folder(tmp_path / "10.6-encoder-decoder") == tmp_path / "checkpoints"
    assert checkpoints.folder(tmp_path / "10.8-decoding") == tmp_path / "checkpoints"
    assert checkpoints.folder(tmp_path / "content") == tmp_path / "content" / "checkpoints"


def test_folder_can_be_set(tmp_path, monkeypatch):
    """Does COURSE_CHECKPOINTS choose the folder, wherever the notebook runs?"""
    monkeypatch.setenv(checkpoints.FOLDER_ENV, str(tmp_path / "elsewhere"))
    assert checkpoints.folder(tmp_path / "10.6-encoder-decoder") == tmp_path / "elsewhere"


def test_saved_model_loads_in_another_notebook(course_tree, monkeypatch, capsys):
    """Does what 10.6 saves load, weights equal and in eval mode, in 10.8?"""
    monkeypatch.chdir(course_tree / "10.6-encoder-decoder")
    trained = model(seed=1)
    path = checkpoints.save("translator", trained, PROBE, size={"d_model": 4}, words=["<pad>", "a"])
    assert path == course_tree / "checkpoints" / "translator.pt"
    monkeypatch.chdir(course_tree / "10.8-decoding")
    fresh = model(seed=2).train()
    assert checkpoints.load("translator", fresh, size={"d_model": 4}, words=["<pad>", "a"])
    assert not fresh.training
    for a, b in zip(trained.state_dict().values(), fresh.state_dict().values()):
        assert torch.equal(a, b)
    assert "loaded translator" in capsys.readouterr().out


def test_missing_file_means_training(course_tree, capsys):
    assert not checkpoints.load("translator", model())
    assert "no saved translator" in capsys.readouterr().out


def test_other_extras_mean_training(course_tree, capsys):
    """Is a model trained on another vocabulary (or size) refused, with what differs named?"""
    checkpoints.save("gpt", model(), PROBE, words=["a", "b"], size=1)
    before = [p.clone() for p in model(seed=3).parameters()]
    target = model(seed=3)
    assert not checkpoints.load("gpt", target, words=["a", "c"], size=1)
    assert "another words" in capsys.readouterr().out
    assert all(torch.equal(a, b) for a, b in zip(before, target.parameters()))


def test_weights_that_do_not_fit_leave_the_model_untouched(course_tree, capsys):
    """Is a state dict of another shape (or with other names) refused before anything is copied?"""
    checkpoints.save("gpt", model(width=4), PROBE)
    target = model(seed=5, width=6)
    before = [p.clone() for p in target.parameters()]
    assert not checkpoints.load("gpt", target)
    assert "do not fit" in capsys.readouterr().out
    assert all(torch.equal(a, b) for a, b in zip(before, target.parameters()))
    assert not checkpoints.load("gpt", nn.Sequential(nn.Linear(3, 4)))  # a key missing


def test_damaged_file_means_training(course_tree, capsys):
    path = checkpoints.path("gpt")
    path.parent.mkdir()
    path.write_bytes(b"not a checkpoint")
    assert not checkpoints.load("gpt", model())
    assert "could not read" in capsys.readouterr().out


def test_quick_mode_neither_saves_nor_loads(course_tree, monkeypatch):
    """While grading and testing, does nothing depend on (or leave behind) a checkpoint?"""
    checkpoints.save("gpt", model(), PROBE)
    monkeypatch.setenv("COURSE_QUICK", "1")
    assert checkpoints.save("other", model(), PROBE) is None
    assert not checkpoints.path("other").exists()
    assert not checkpoints.load("gpt", model())


def test_read_only_folder_is_said_not_raised(course_tree, monkeypatch, capsys):
    """Does a folder that cannot be written (a sandbox) end in a sentence, not an exception?"""
    def refuse(*args, **kwargs):
        raise PermissionError("read-only file system")

    monkeypatch.setattr(torch, "save", refuse)
    assert checkpoints.save("gpt", model(), PROBE) is None
    assert "not saved" in capsys.readouterr().out


class Unnormed(nn.Sequential):
    """The same weights as model()'s, one layer forgotten in forward: a wrong model of the same shape."""

    def forward(self, x):
        return self[0](x)


def test_same_shaped_model_that_computes_otherwise_is_refused(course_tree, capsys):
    """Is a model whose weights fit but which computed something else when it was saved (a learner's
    wrong GPT, loaded into the reference GPT) refused, said, and the loading model left as it was?"""
    probe = torch.randn(2, 3)
    wrong = Unnormed(*model(seed=1))
    with torch.no_grad():
        wrong[1].weight.mul_(3.0)  # a LayerNorm that forward never calls: it still has to matter
    checkpoints.save("gpt", wrong, probe=probe, size=1)
    target = model(seed=4)
    before = [p.clone() for p in target.parameters()]
    assert not checkpoints.load("gpt", target, size=1)
    assert "not loaded" in capsys.readouterr().out
    assert all(torch.equal(a, b) for a, b in zip(before, target.parameters()))


def test_probed_model_loads_when_it_computes_the_same(course_tree, capsys):
    """Does a model saved with a probe load when the loading model gives the saved outputs?"""
    trained = model(seed=1)
    checkpoints.save("gpt", trained, probe=torch.randn(2, 3), size=1)
    fresh = model(seed=2)
    assert checkpoints.load("gpt", fresh, size=1)
    assert "loaded gpt" in capsys.readouterr().out
    assert all(torch.equal(a, b) for a, b in zip(trained.parameters(), fresh.parameters()))


def test_model_that_cannot_run_the_probe_is_not_saved(course_tree, capsys):
    """Is a model that raises on the probe left unsaved, said, rather than raising in the saving cell?"""
    assert checkpoints.save("gpt", model(), probe=torch.randn(2, 5)) is None  # 5 features for a 3-input layer
    assert "not saved" in capsys.readouterr().out
    assert not checkpoints.path("gpt").exists()


def test_file_without_a_probe_means_training(course_tree, capsys):
    """Is a checkpoint saved without a probe (by an older version of the course) refused, not loaded
    unchecked?"""
    path = checkpoints.path("gpt")
    path.parent.mkdir()
    torch.save({"state_dict": model(seed=1).state_dict(), "extras": {}}, path)
    assert not checkpoints.load("gpt", model())
    assert "no probe" in capsys.readouterr().out


def test_probe_of_several_inputs(course_tree, capsys):
    """Does a model of two inputs (the translator's source and target) save and load with its probe?"""
    class TwoInputs(nn.Module):
        def __init__(self, seed):
            super().__init__()
            torch.manual_seed(seed)
            self.a, self.b = nn.Linear(3, 4), nn.Linear(2, 4)

        def forward(self, x, y):
            return self.a(x) + self.b(y)

    checkpoints.save("translator", TwoInputs(1), (torch.randn(5, 3), torch.randn(5, 2)))
    assert checkpoints.load("translator", TwoInputs(2))
    assert "loaded translator" in capsys.readouterr().out
