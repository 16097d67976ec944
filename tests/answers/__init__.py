"""Right answers and planted bugs, declared once per exercise, next to the tests that use them.

``tests/answers/s10_X/<exercise>.py`` names its exercise (``EXERCISE``) and defines
``answers(solution)``: the list of :func:`right` answers and planted :func:`bug`\\ s, given the
instructor notebook's namespace (its solutions and given code, for bugs built on them). From
these declarations alone:

- ``tests/test_answers.py`` checks the hidden checks: every right answer passes, every bug
  fails with the message it declares (``hidden``, a regex) and names its ``mistake``;
- ``tests/test_visible.py`` checks the visible checks against the hidden ones (never
  stricter, catching every bug that grading catches, naming the mistake);
- ``python -m tests.catalogue`` prints the table of what each side catches.
"""

from __future__ import annotations

import pkgutil
import re
from dataclasses import dataclass
from pathlib import Path

from course import progress
from course.checking import Mistake
from course.checking.registry import submodules

ROOT = Path(__file__).resolve().parents[2]
_SECTION = re.compile(r"s(\d+)_(\d+)")


@dataclass(frozen=True)
class Answer:
    """One implementation of one exercise: right, or a planted bug.

    A bug may say what the hidden check's message must match (``hidden``, a regex), which
    known ``mistake`` both sides must name, and why only grading can see it (``grading_only``).
    """

    label: str
    impl: object
    correct: bool
    hidden: str | None = None
    mistake: Mistake | None = None
    grading_only: str | None = None


def right(label: str, impl) -> Answer:
    return Answer(label, impl, True)


def bug(label: str, impl, *, hidden: str | None = None, mistake: Mistake | None = None,
        only: str | None = None) -> Answer:
    return Answer(label, impl, False, hidden, mistake, only)


def not_a_number(answer: float) -> list[Answer]:
    """A numeric prediction's answer handed in as something else (its string, a 0-d tensor) or not
    at all: what every prediction's engine (course.checking.Prediction) refuses, planted once."""
    import torch

    return [bug("a string", str(answer), hidden="should be a number"),
            bug("a tensor", torch.tensor(float(answer)), hidden="should be a number"),
            bug("not answered", None, hidden="not written yet")]


def on_a_fixed_device(answer):
    """A right answer (function or nn.Module class) whose outputs meet a tensor made without a
    device: right on the CPU, wrong wherever the inputs are not."""
    import torch

    def offset(out):
        if isinstance(out, tuple):
            return tuple(offset(o) for o in out)
        if not isinstance(out, torch.Tensor) or out.dim() == 0:
            return out
        zero = torch.zeros(out.shape[-1], dtype=out.dtype)  # on the CPU, whatever out's device
        return out | zero if out.dtype == torch.bool else out + zero

    if isinstance(answer, type):
        return type(f"{answer.__name__}OnTheCPU", (answer,),
                    {"forward": lambda self, *a, **k: offset(answer.forward(self, *a, **k))})
    return lambda *a, **k: offset(answer(*a, **k))


def _torch_attention(attention, query, key, value, mask=None):
    """The contract's MultiHeadAttention (its w_q, w_k, w_v, w_o and num_heads) computed by
    nn.MultiheadAttention's functional core: (B, n_q, d) and weights (B, h, n_q, n_k)."""
    import torch
    import torch.nn.functional as F

    B, n_q, d = query.shape
    h, n_k = attention.num_heads, key.shape[1]
    blocked = None if mask is None else ~mask.expand(B, h, n_q, n_k).reshape(B * h, n_q, n_k)  # True: blocked
    w_q, w_k, w_v, w_o = attention.w_q, attention.w_k, attention.w_v, attention.w_o
    in_bias = None if w_q.bias is None else torch.cat([w_q.bias, w_k.bias, w_v.bias])  # (3 d,)
    out, weights = F.multi_head_attention_forward(
        query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1), d, h, None, in_bias, None, None,
        False, 0.0, w_o.weight, w_o.bias, training=False, attn_mask=blocked, use_separate_proj_weight=True,
        q_proj_weight=w_q.weight, k_proj_weight=w_k.weight, v_proj_weight=w_v.weight,
        average_attn_weights=False)  # (n_q, B, d), (B, h, n_q, n_k)
    return out.transpose(0, 1), weights


def with_torch_attention(model):
    """The right answer ``model`` (an nn.Module class) whose every attention (a submodule with w_q, w_k,
    w_v, w_o) is computed by nn.MultiheadAttention's core: PyTorch's attention inside, no credit."""
    import types

    class WithTorchAttention(model):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            for module in self.modules():
                if all(hasattr(module, name) for name in ("w_q", "w_k", "w_v", "w_o", "num_heads")):
                    module.forward = types.MethodType(_torch_attention, module)

    return WithTorchAttention


def unscaled_dropout(module, p: float):
    """Dropout written by hand for ``module`` (as its ``drop``): entries zeroed with probability p in
    train() mode, the kept ones not divided by 1 - p (the planted bug ``unscaled_dropout``)."""
    import torch

    return lambda t: t * (torch.rand_like(t) >= p) if module.training else t


def with_pieces(impl, **pieces):
    """The solution ``impl`` (a function or an nn.Module class) reading ``pieces`` (name: wrong
    implementation of an earlier exercise) from its namespace: in a notebook, a mistake left in a piece."""
    import types

    def rebound(function):
        space = {**function.__globals__, **pieces}
        return types.FunctionType(function.__code__, space, function.__name__, function.__defaults__,
                                  function.__closure__)

    if not isinstance(impl, type):
        return rebound(impl)
    methods = {k: rebound(v) for k, v in vars(impl).items() if isinstance(v, types.FunctionType)}
    return type(impl.__name__, (impl,), methods)


#: What both sides say of such a bug (the engine's device probe, course.checking.devices).
ON_A_FIXED_DEVICE = r"fixed device"


@dataclass(frozen=True)
class Entry:
    """A declared answer of one exercise of one section."""

    section: str
    exercise: str
    answer: Answer

    @property
    def assignment(self) -> str:
        return assignment_of(self.section)

    def __getattr__(self, name):  # label, impl, correct, hidden, mistake, grading_only
        return getattr(self.__dict__["answer"], name)


def assignment_of(section: str) -> str:
    """The assignment folder of a section ("10.1" -> "10.1-self-attention")."""
    (folder,) = [p.name for p in (ROOT / "solutions").iterdir() if p.name.startswith(f"{section}-")]
    return folder


def declared_sections() -> dict[str, str]:
    """Sections that declare their answers here: "10.1" -> package name."""
    found = {}
    for info in pkgutil.iter_modules(__path__):
        match = _SECTION.fullmatch(info.name)
        if match:
            found[f"{match[1]}.{match[2]}"] = f"{__name__}.{info.name}"
    return dict(sorted(found.items(), key=lambda kv: tuple(map(int, kv[0].split(".")))))


def declared_by_exercise(constant: str) -> dict:
    """``{exercise: value}`` of a constant the answers modules may declare next to their
    ``EXERCISE`` (``NO_SIGNATURE``, ``ALLOWED_OPERATORS``: what tests/test_operator_walk.py reads),
    over every section: the exercise declares it, no list in the tests keeps it."""
    return {module.EXERCISE: getattr(module, constant) for package in declared_sections().values()
            for module in submodules(package) if hasattr(module, constant)}


def declared(section: str, solution: dict) -> list[Entry]:
    """Every answer the modules of ``section`` declare, exercises in the notebook's order."""
    modules = submodules(declared_sections()[section])
    order = list(progress.exercises(section))
    modules.sort(key=lambda m: order.index(m.EXERCISE) if m.EXERCISE in order else len(order))
    return [Entry(section, module.EXERCISE, a) for module in modules for a in module.answers(solution)]
