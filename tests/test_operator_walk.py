"""Is every door to an exercise's reference closed by construction (issue 33)?

For every registered exercise whose answer is a computation, the walk records the ATen operators
its reference runs on each visible case (PyTorch's modules on their fused path too), keeps the case
where it runs the most, and records there those its right answers run (the instructor's solution and
the others declared in tests/answers/). The reference's *signature* is the
difference: what the reference computes with and no right answer needs. Every signature operator must
earn no credit in that exercise (``Forbidden.operator_hit``), or be said here why it may run.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import pytest
import torch

from course.checking import Prediction, single_thread
from course.checking.forbidden import Forbidden, OperatorTripwire
from grader.checks import EXERCISES
from samples import load_solution_namespace
from tests.answers import assignment_of, declared, declared_sections

CPU = torch.device("cpu")


# ---------------------------------------------------------------- the recorder


class _EveryOperator:
    """What :class:`OperatorTripwire` reads of a ``Forbidden``, forbidding every operator: the
    tripwire's hits are then the names of all the operators that ran."""

    def __init__(self):
        self.seen = ({}, {})  # the tripwire's cache: operator -> hit

    @staticmethod
    def operator_hit(name: str) -> str:
        return name


def operators_run(call) -> frozenset[str]:
    """The ATen operators (overloads dropped: ``aten._softmax``) that run in ``call()``, its
    backward included, whichever Python door led to it."""
    hits: set[str] = set()
    with OperatorTripwire(_EveryOperator(), hits):
        call()
    return frozenset(hits)


def with_fast_paths(call) -> frozenset[str]:
    """The operators of ``call()``, and those PyTorch's own modules it runs (``nn.MultiheadAttention``,
    ``nn.TransformerEncoderLayer`` ...) run on their fused path: each module called again at once on the
    same inputs, in eval mode without gradients, as a model in inference calls it."""
    replaying = []

    def replay(module, args, kwargs, output):
        if replaying or not type(module).__module__.startswith("torch.nn."):
            return
        replaying.append(module)
        modes = {m: m.training for m in module.modules()}
        try:
            with torch.no_grad():
                module.eval()(*args, **kwargs)
        finally:
            for m, training in modes.items():
                m.training = training
            replaying.pop()

    handle = torch.nn.modules.module.register_module_forward_hook(replay, with_kwargs=True)
    try:
        return operators_run(call)
    finally:
        handle.remove()


# ---------------------------------------------------------------- what may run, and why

#: Operators no reference is, which the tags of their schemas do not show: each with why.
HARMLESS: dict[str, str] = {
    **dict.fromkeys(("aten.cat", "aten.stack", "aten.select_backward", "aten.slice_backward"),
                    "copies values into place (a join, a view's gradient): computes none"),
    **dict.fromkeys(("aten.full", "aten.full_like", "aten.zeros_like", "aten.new_empty_strided",
                     "aten.arange", "aten.eye", "aten.scalar_tensor"),
                    "a tensor of given values: reads no input's values"),
    "aten.masked_fill_": "sets the masked entries to a value: entry by entry",
    "aten.complex": "pairs two tensors as one complex tensor: computes nothing",
    "aten.triu": "a triangle of a matrix, the causal mask's primitive: causal_mask's right answers use it",
}


def _overloads(name: str) -> list:
    namespace, op = name.split(".", 1)
    packet = getattr(getattr(torch.ops, namespace), op)
    return [getattr(packet, overload) for overload in packet.overloads()]


def harmless(name: str) -> str | None:
    """Why operator ``name`` (``aten.add``) computes no exercise's reference, or None: entry by entry
    arithmetic and views, by the tags of its schema, or one of :data:`HARMLESS`."""
    if name in HARMLESS:
        return HARMLESS[name]
    overloads = _overloads(name)
    if any(torch.Tag.pointwise in o.tags for o in overloads):
        return "entry by entry arithmetic (tagged pointwise): what right answers are written from"
    if any(not o._schema.is_mutable and any(r.alias_info for r in o._schema.returns) for o in overloads):
        return "a view of its input (returns an alias): moves no value"
    return None


#: Signature operators an exercise allows, each with why (a right answer may run them although
#: none declared does).
_OWN_ATTENTION = "the attention inside a block is the learner's own choice (the block is the exercise)"
ALLOWED: dict[str, dict[str, str]] = {
    "TransformerBlock": dict.fromkeys(("aten._scaled_dot_product_flash_attention_for_cpu",
                                       "aten._scaled_dot_product_flash_attention_for_cpu_backward"),
                                      _OWN_ATTENTION),
    "MultiHeadAttention": {"aten.baddbmm": "the scores plus the mask in one batched product: a primitive "
                                           "of right answers (test_tripwire's attention_baddbmm)"},
    "beam_search": dict.fromkeys(("aten.gather", "aten.sum"),
                                 "the score summed from the log-probabilities of the tokens: primitives"),
}

#: Exercises whose reference runs nothing its right answers do not: why the walk finds no door.
NO_SIGNATURE: dict[str, str] = {
    **dict.fromkeys(("bpe_train", "bpe_encode"), "plain Python: words and merges, no tensor"),
    **dict.fromkeys(("byte_bpe_train", "byte_bpe_encode", "byte_bpe_decode"),
                    "plain Python: texts, bytes and merges, no tensor"),
    "warmup_cosine_lr": "numbers in, a number out: the reference's formula is arithmetic",
    "dot_product_variance": "an experiment: the variance of random dot products, arithmetic",
    **dict.fromkeys(("greedy_decode", "greedy_decode_cached", "sample"),
                    "a decoding loop on a stand-in model: the reference is the contract's ids, checked step "
                    "by step"),
    "train_step": "the reference step is F.cross_entropy and clip_grad_norm_, which train_step may call",
    **dict.fromkeys(("qkv_projections", "QKVProjection", "split_heads", "merge_heads", "FeedForward",
                     "SwiGLU"), "products, views and activations a right answer runs too (F.linear is "
                                "forbidden by name)"),
    **dict.fromkeys(("sinusoidal_positional_encoding", "PositionalEncoding", "relative_shift_matrix",
                     "apply_rotary"), "the formula in float64: arithmetic, as right answers compute it"),
    **dict.fromkeys(("causal_mask", "padding_mask", "next_token_probs"),
                    "comparisons, triangles and sorts a right answer runs too"),
    "RMSNorm": "F.rms_norm runs as arithmetic on the CPU; the other normalisations are forbidden by family",
}


# ---------------------------------------------------------------- the walk


@dataclass(frozen=True)
class Walk:
    """The operators an exercise's reference and its right answers run on one case."""

    case: str
    reference: frozenset[str]
    right: frozenset[str]

    @property
    def signature(self) -> frozenset[str]:
        return frozenset(op for op in self.reference - self.right if not harmless(op))


COMPUTING = sorted(name for name, exercise in EXERCISES.items() if not isinstance(exercise, Prediction))
PREDICTIONS = sorted(name for name, exercise in EXERCISES.items() if isinstance(exercise, Prediction))


@functools.cache
def right_answers() -> dict[str, tuple]:
    """Each exercise's right answers declared in tests/answers/ (the solution among them)."""
    found: dict[str, list] = {}
    for section in declared_sections():
        for entry in declared(section, load_solution_namespace(assignment_of(section))):
            if entry.correct:
                found.setdefault(entry.exercise, []).append(entry.impl)
    return {name: tuple(impls) for name, impls in found.items()}


@functools.cache
def walk(name: str) -> Walk:
    """Record the reference of ``name`` on each visible case, keep the case where it runs the most
    operators (its fused paths included; the first among equals), and record each right answer there."""
    exercise = EXERCISES[name]
    with single_thread():
        runs = [with_fast_paths(lambda case=case: exercise.reference(case, CPU))
                for case in exercise.visible_cases]
        at = max(range(len(runs)), key=lambda i: (len(runs[i]), -i))
        case = exercise.visible_cases[at]
        right = [operators_run(lambda impl=impl: exercise.run(impl, case, CPU))
                 for impl in right_answers()[name]]
    return Walk(str(case), runs[at], frozenset().union(*right))


def unexplained(name: str, forbidden: Forbidden | None = None) -> list[str]:
    """The signature operators of ``name`` that neither earn no credit there nor are allowed."""
    forbidden = EXERCISES[name].forbidden if forbidden is None else forbidden
    allowed = ALLOWED.get(name, {})
    return sorted(op for op in walk(name).signature if not forbidden.operator_hit(op) and op not in allowed)


# ---------------------------------------------------------------- the tests


def test_every_computing_exercise_has_right_answers_to_walk():
    """Does every exercise the walk covers declare right answers (the solution among them) in
    tests/answers/, so that no exercise is left out of the walk?"""
    missing = [name for name in COMPUTING if not right_answers().get(name)]
    assert not missing, f"declare the right answers of {missing} in tests/answers/"
    assert PREDICTIONS and set(COMPUTING).isdisjoint(PREDICTIONS)


@pytest.mark.parametrize("name", COMPUTING)
def test_every_signature_operator_earns_no_credit_or_is_allowed(name):
    """Does every operator the reference runs, and no right answer does, earn no credit in the
    exercise (however it is reached), or is it said why it may run?"""
    doors = unexplained(name)
    assert not doors, (f"{name} ({walk(name).case}): its reference runs {doors}, which no right answer "
                       "does: forbid them in its visible module, with a planted bug, or say in ALLOWED why "
                       "they may run")


@pytest.mark.parametrize("name", COMPUTING)
def test_an_empty_signature_is_recorded_with_why(name):
    """Is an exercise whose reference runs nothing its right answers do not (plain Python, or the
    same primitives) recorded as such with its reason, and only then?"""
    found = walk(name)
    if name in NO_SIGNATURE:
        assert not found.signature, f"{name}: its reference now runs {sorted(found.signature)}"
    else:
        assert found.signature, f"{name}: the walk finds no signature; say why in NO_SIGNATURE"


def test_every_exception_is_still_needed():
    """Is every operator ALLOWED in an exercise still in its signature and not forbidden there (no
    stale exception), and is every HARMLESS one run by some walked reference?"""
    for name, allowed in ALLOWED.items():
        for op in allowed:
            assert op in walk(name).signature, f"{name}: {op} is no longer in its signature"
            assert not EXERCISES[name].forbidden.operator_hit(op), f"{name}: {op} is forbidden now"
    run = frozenset().union(*(walk(name).reference - walk(name).right for name in COMPUTING))
    assert not HARMLESS.keys() - run, f"no signature has {sorted(HARMLESS.keys() - run)}"


@pytest.mark.parametrize("name, family", [("softmax", "a softmax of PyTorch's"), ("lm_loss", "F.nll_loss")])
def test_the_walk_names_a_door_left_open(name, family):
    """With one family taken out of an exercise's forbidden calls, does the walk name its operators?"""
    forbidden = EXERCISES[name].forbidden
    open_door = replace(forbidden, families=tuple(f for f in forbidden.families if f.label != family),
                        operators=tuple((op, label) for op, label in forbidden.operators if label != family))
    assert unexplained(name, open_door), f"{name}: the walk names nothing without {family}"
    assert not unexplained(name)


def test_harmless_hides_no_kernel_of_a_reference():
    """Is no operator let through as harmless (pointwise, a view, HARMLESS) forbidden in an exercise whose
    reference runs it, and are the kernels of the references never taken for harmless?"""
    for name in COMPUTING:
        found, forbidden = walk(name), EXERCISES[name].forbidden
        hidden = [op for op in found.reference if harmless(op) and forbidden.operator_hit(op)]
        assert not hidden, f"{name}: {hidden} are forbidden, yet let through as harmless"
    for kernel in ("aten._softmax", "aten._safe_softmax", "aten.nll_loss_forward", "aten.native_layer_norm",
                   "aten.native_group_norm", "aten._fused_rms_norm", "aten._native_multi_head_attention",
                   "aten._transformer_encoder_layer_fwd", "aten._scaled_dot_product_flash_attention_for_cpu",
                   "aten.multinomial", "aten.mm", "aten.sum"):
        assert harmless(kernel) is None, kernel
    assert harmless("aten.add") and harmless("aten.transpose")
