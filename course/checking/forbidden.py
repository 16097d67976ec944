"""No credit for calling the reference: tripwires at the Python and at the operator level.

Inside an exercise, learner code must not call the PyTorch function it is graded against.
Both sides call learner code through :func:`call_guarded` (:meth:`course.checking.Exercise.call`),
so the visible check refuses such a call with the words grading uses. Two tripwires watch it:

* a ``TorchFunctionMode`` sees every torch function called from Python, by its public name
  (``torch.softmax``, ``F.scaled_dot_product_attention``), the private ones
  (``torch._softmax``) and those reached through ``torch.ops`` (``aten.softmax``);
* a ``TorchDispatchMode`` sees every ATen operator that really runs, whatever Python door
  led to it (``torch._C``, ``torch.ops``, a function mode switched off): the kernels behind
  the references, such as ``aten._softmax`` or the fused attention kernels.

Besides the names listed one by one, an exercise forbids whole families of operators,
picked by name: every kernel whose name says ``softmax`` (``aten._masked_softmax``,
``quantized.softmax`` ...) or ``attention``, however it is reached and whatever PyTorch
adds next (tests/test_tripwire.py walks the operators this torch registers). Which operators an
exercise must forbid is derived, not guessed: tests/test_operator_walk.py records what each reference
runs and its right answers do not, and fails on any such operator left open here. An attention
kernel computes a softmax too (one query, the logits as keys, an identity as the values),
so the softmax exercise forbids both families.

A correct answer written from primitives (``exp``, ``logsumexp``, ``einsum``, ``baddbmm``,
``masked_fill`` ...) runs none of these operators, so it is never caught.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from torch.overrides import TorchFunctionMode, resolve_name
from torch.utils._python_dispatch import TorchDispatchMode

from course.checking import pieces
from course.checking.failure import CheckFailure, is_learner_file
from course.checking.learner import call_learner


@dataclass(frozen=True)
class Family:
    """The operators and functions whose name contains one of ``words`` (or is one of
    ``names``): the kernels of one kind of reference, overloads and variants included."""

    label: str  # what the learner called, for the feedback
    words: tuple[str, ...]
    names: tuple[str, ...] = ()  # members whose name does not say it: "_transformer_encoder_layer_fwd"

    def __contains__(self, name: str) -> bool:
        """Is ``name`` (``aten._masked_softmax``, ``torch._masked_softmax``) a member?"""
        short = name.rsplit(".", 1)[-1]
        return short in self.names or any(word in short for word in self.words)


@dataclass(frozen=True)
class Forbidden:
    """What an exercise may not call: Python-level functions, the ATen operators that
    only those functions run (each operator maps to the function it is the kernel of), and
    families of both picked by name."""

    functions: frozenset[str] = frozenset()  # also what the source scan looks for (autograde.cells)
    operators: tuple[tuple[str, str], ...] = ()  # (operator, what the learner called)
    families: tuple[Family, ...] = ()
    python: tuple[tuple[object, str], ...] = ()  # (code object, its name): Python functions of PyTorch's

    def __or__(self, other: Forbidden) -> Forbidden:
        return Forbidden(self.functions | other.functions,
                         tuple(dict([*self.operators, *other.operators]).items()),
                         tuple(dict.fromkeys([*self.families, *other.families])),
                         tuple(dict([*self.python, *other.python]).items()))

    def __bool__(self) -> bool:
        return bool(self.functions or self.operators or self.families or self.python)

    def operator_hit(self, name: str) -> str | None:
        """The hit to report if operator ``name`` (``aten._softmax``) runs, else None."""
        label = dict(self.operators).get(name) or next(
            (family.label for family in self.families if name in family), None)
        return label and f"{label} (its operator {name} ran)"

    def function_hit(self, name: str) -> str | None:
        """The hit to report if torch function ``name`` (``torch._softmax``) is called."""
        forbidden = name in self.functions or any(name in family for family in self.families)
        return name if forbidden else None

    @cached_property
    def seen(self) -> tuple[dict, dict]:
        """What each operator and function seen so far gives (a hit or None): the tripwires
        decide once per callable, then pay one dictionary look-up per call."""
        return {}, {}


def forbid(functions: Iterable[str] = (), operators: dict[str, str] | None = None,
           families: Iterable[Family] = ()) -> Forbidden:
    return Forbidden(frozenset(functions), tuple((operators or {}).items()), tuple(families))


NOTHING = Forbidden()

#: Every kernel whose name says softmax: _softmax, _masked_softmax, _sparse_softmax,
#: quantized.softmax, their log_ and backward variants, what PyTorch adds next.
SOFTMAX_KERNELS = Family("a softmax of PyTorch's", ("softmax",))
#: Every kernel that computes an attention: the fused ones of F.scaled_dot_product_attention,
#: nn.MultiheadAttention's, and the fused encoder layer's, whose name does not say it.
ATTENTION_KERNELS = Family("an attention of PyTorch's", ("attention",), ("_transformer_encoder_layer_fwd",))
#: The kernels that compute a whole multi-head attention, projections included.
MULTIHEAD_KERNELS = Family("nn.MultiheadAttention", ("multi_head_attention",),
                           ("_transformer_encoder_layer_fwd",))

SOFTMAX = forbid(
    {"torch.softmax", "torch.nn.functional.softmax", "torch.Tensor.softmax", "torch.special.softmax",
     "torch.log_softmax", "torch.nn.functional.log_softmax", "torch.Tensor.log_softmax",
     "torch.special.log_softmax", "torch._softmax", "torch._log_softmax", "torch._safe_softmax",
     "torch._masked_softmax", "aten.softmax", "aten._softmax", "aten.log_softmax", "aten._log_softmax",
     "aten._safe_softmax", "aten._masked_softmax", "aten.special_softmax", "aten.special_log_softmax"},
    {"aten._softmax": "torch.softmax", "aten._log_softmax": "torch.log_softmax",
     "aten._safe_softmax": "a softmax of PyTorch's"},
    (SOFTMAX_KERNELS, ATTENTION_KERNELS))

#: The fused kernels of F.scaled_dot_product_attention (its math path on the CPU runs
#: aten._safe_softmax, which nothing else does).
SDPA_OPERATORS = {
    op: "F.scaled_dot_product_attention" for op in (
        "aten._safe_softmax", "aten._scaled_dot_product_flash_attention",
        "aten._scaled_dot_product_flash_attention_for_cpu",
        "aten._scaled_dot_product_efficient_attention", "aten._scaled_dot_product_cudnn_attention",
        "aten._scaled_dot_product_fused_attention_overrideable",
        "aten._scaled_dot_product_attention_math_for_mps", "aten._flash_attention_forward",
        "aten._efficient_attention_forward")}

ATTENTION = forbid(
    {"torch.nn.functional.scaled_dot_product_attention", "aten.scaled_dot_product_attention",
     "aten._scaled_dot_product_attention_math", *(op for op in SDPA_OPERATORS if op != "aten._safe_softmax"),
     "torch.nn.functional.multi_head_attention_forward", "torch._native_multi_head_attention",
     "aten._native_multi_head_attention"},
    {**SDPA_OPERATORS, "aten._native_multi_head_attention": "nn.MultiheadAttention",
     "aten._transformer_encoder_layer_fwd": "nn.TransformerEncoderLayer"},
    (ATTENTION_KERNELS,))

MULTIHEAD = forbid(
    {"torch.nn.functional.multi_head_attention_forward", "torch._native_multi_head_attention",
     "aten._native_multi_head_attention", "torch._transformer_encoder_layer_fwd",
     "aten._transformer_encoder_layer_fwd"},
    {"aten._native_multi_head_attention": "nn.MultiheadAttention",
     "aten._transformer_encoder_layer_fwd": "nn.TransformerEncoderLayer"},
    (MULTIHEAD_KERNELS,))

LINEAR = forbid({"torch.nn.functional.linear", "aten.linear"})


def _causal_mask_functions() -> tuple[tuple[object, str], ...]:
    from torch import nn
    from torch.nn.modules import transformer

    label = "nn.Transformer.generate_square_subsequent_mask"
    found = [nn.Transformer.generate_square_subsequent_mask,
             getattr(transformer, "_generate_square_subsequent_mask", None)]
    return tuple((f.__code__, label) for f in found if f is not None)


#: 10.6's causal_mask: PyTorch's mask it is checked against (a Python function, no operator of its own).
CAUSAL_MASK = Forbidden(frozenset({"torch.nn.Transformer.generate_square_subsequent_mask"}),
                        python=_causal_mask_functions())


def function_name(func) -> str:
    """A torch function's dotted name, overloads dropped: ``aten._softmax``, ``torch._softmax``."""
    name = resolve_name(func)
    if name is None:
        name = f"{getattr(func, '__module__', None) or 'torch'}.{getattr(func, '__name__', func)}"
    if name.startswith("aten."):
        name = ".".join(name.split(".")[:2])
    return name


class FunctionTripwire(TorchFunctionMode):
    """Notes every call of a forbidden torch function made from Python."""

    def __init__(self, forbidden: Forbidden, hits: set[str]):
        super().__init__()
        self.forbidden, self.seen, self.hits = forbidden, forbidden.seen[0], hits

    def __torch_function__(self, func, types, args=(), kwargs=None):
        try:
            hit = self.seen[func]
        except KeyError:
            hit = self.seen[func] = self.forbidden.function_hit(function_name(func))
        except TypeError:  # an unhashable callable: decided on every call
            hit = self.forbidden.function_hit(function_name(func))
        if hit:
            self.hits.add(hit)
        return func(*args, **(kwargs or {}))


class UncompiledDispatchMode(TorchDispatchMode):
    """A dispatch mode for the checks: one that watches learner code, never compiled."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # PyTorch wraps a mode's __torch_dispatch__ in torch._disable_dynamo unless told
        # not to, and that wrapper imports all of torch._dynamo (about 1 s and 40 MB in
        # every graded kernel) on first use. Nothing here is ever compiled.
        return False


class OperatorTripwire(UncompiledDispatchMode):
    """Notes every forbidden ATen operator that runs, whichever Python door led to it."""

    def __init__(self, forbidden: Forbidden, hits: set[str]):
        super().__init__()
        self.forbidden, self.seen, self.hits = forbidden, forbidden.seen[1], hits

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        try:
            hit = self.seen[func]
        except KeyError:  # aten._softmax.default -> aten._softmax
            hit = self.seen[func] = self.forbidden.operator_hit(str(func).rsplit(".", 1)[0])
        if hit:
            self.hits.add(hit)
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def watching(forbidden: Forbidden) -> Iterator[set[str]]:
    """Run the block under both tripwires; the yielded set collects what it called."""
    hits: set[str] = set()
    if not forbidden:
        yield hits
        return
    with OperatorTripwire(forbidden, hits), FunctionTripwire(forbidden, hits):
        yield hits

#: The shipped checking code (the toolkit and the visible checks): it holds references, so an
#: answer that calls one of its functions calls the reference it is graded against.
SHIPPED_CHECKS = tuple(str(Path(__file__).resolve().parents[1] / part)
                       for part in ("checking", "visible"))


@contextlib.contextmanager
def watching_shipped_checks(python: Forbidden = NOTHING, python_hits: set[str] | None = None
                            ) -> Iterator[set[str]]:
    """Run the block noting every module-level function of the shipped checking code that learner
    code calls itself (``contract_lr``, ``formula``); methods of the stand-in models the checks hand
    to learner code, and what the checks call themselves, are not noted. Calls of the Python
    functions ``python`` forbids go to ``python_hits``."""
    hits: set[str] = set()
    forbidden_code = dict(python.python)

    def profile(frame, event, arg):
        if event == "call":
            code = frame.f_code
            if code in forbidden_code and python_hits is not None:
                python_hits.add(forbidden_code[code])
            elif code.co_filename == pieces.__file__:  # the references pieces stand for: never learner code's
                if not pieces.standing_in(frame):
                    hits.add(f"{pieces.__name__}.{code.co_qualname}")
            elif code.co_filename.startswith(SHIPPED_CHECKS) and "." not in code.co_qualname \
                    and frame.f_back is not None and is_learner_file(frame.f_back.f_code.co_filename):
                hits.add(f"{frame.f_globals.get('__name__', '?')}.{code.co_qualname}")

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield hits
    finally:
        sys.setprofile(previous)


#: Every kernel of PyTorch's likelihood losses, forward and backward (tests/test_operator_walk.py finds
#: F.cross_entropy's backward, aten.nll_loss_backward, among lm_loss's reference operators).
LOSS_KERNELS = Family("F.nll_loss", ("nll_loss", "cross_entropy"))

#: 10.7's lm_loss: PyTorch's losses (F.cross_entropy runs log_softmax then nll_loss); with SOFTMAX.
LOSSES = forbid(
    {"torch.nn.functional.cross_entropy", "torch.nn.functional.nll_loss", "torch._C._nn.cross_entropy_loss",
     "torch._C._nn.nll_loss", "torch._C._nn.nll_loss_nd", "torch._C._nn.nll_loss2d",
     "aten.cross_entropy_loss", "aten.nll_loss", "aten.nll_loss_nd", "aten.nll_loss2d",
     "aten.nll_loss_forward", "aten.nll_loss2d_forward"},
    {"aten.nll_loss_forward": "F.nll_loss", "aten.nll_loss2d_forward": "F.nll_loss"}, (LOSS_KERNELS,))

#: Every normalisation kernel: an RMSNorm is one of any of them (a LayerNorm, or a GroupNorm of one
#: group, of [x, -x] has mean 0 and the mean square of x as its variance).
NORM_KERNELS = Family("a normalisation of PyTorch's",
                      ("layer_norm", "group_norm", "rms_norm", "batch_norm", "instance_norm",
                       "local_response_norm"))

#: 10.7's RMSNorm: nn.RMSNorm, the function behind it, and every other normalisation.
RMS_NORM = forbid({"torch.nn.functional.rms_norm", "torch.rms_norm", "aten.rms_norm", "aten._fused_rms_norm"},
                  {"aten._fused_rms_norm": "nn.RMSNorm"}, (NORM_KERNELS,))


# ---------------------------------------------------------------- calling learner code, guarded


class ForbiddenCall(CheckFailure):
    """Learner code called the reference it is graded against."""

    def __init__(self, message: str, hits: set[str]):
        super().__init__(message)
        self.hits = hits


def forbidden_call_message(exercise: str, hits: set[str]) -> str:
    plain = {hit for hit in hits if "operator" not in hit}  # named by the function, if seen
    names = ", ".join(sorted(plain or hits))
    return (
        f"No credit for {exercise}: it calls {names}, the PyTorch function it is graded "
        "against. Write it from tensor primitives (matmul, exp, sum, masked_fill, ...)."
    )


def shipped_call_message(exercise: str, hits: set[str]) -> str:
    return (f"No credit for {exercise}: it calls {', '.join(sorted(hits))}, the course's own checking code, "
            "which holds the reference it is graded against. Write it yourself.")


def call_guarded(exercise: str, forbidden: Forbidden, where: str, fn, *args, **kwargs):
    """Call learner code under the tripwires: its exceptions become CheckFailures
    (:func:`~course.checking.learner.call_learner`), a call to the reference (PyTorch's, or the
    shipped checking code's) a :class:`ForbiddenCall`, worded here for both sides."""
    with watching(forbidden) as hits, watching_shipped_checks(forbidden, hits) as shipped:
        result = call_learner(exercise, where, fn, *args, **kwargs)
    if shipped:
        raise ForbiddenCall(shipped_call_message(exercise, shipped), shipped)
    if hits:
        raise ForbiddenCall(forbidden_call_message(exercise, hits), hits)
    return result
