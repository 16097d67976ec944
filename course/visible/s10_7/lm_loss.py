"""``lm_loss(logits, targets, pad_id, label_smoothing=0.0)``: the exercise (inputs, reference, known
mistakes, visible cases) and its visible check. The reference is ``F.cross_entropy(ignore_index,
label_smoothing)``, called inside :meth:`LmLoss.reference`: no callable of this module is an answer."""

from __future__ import annotations

from functools import partial

import torch
import torch.nn.functional as F

from course.checking import (
    Case,
    CheckFailure,
    Exercise,
    Mistake,
    expect_tensor,
    generator,
    passed,
    randn,
    visible_check,
    with_gradients,
)
from course.checking.forbidden import LOSSES, SOFTMAX

SMOOTHING = ("PyTorch spreads e over the whole vocabulary, the target included: (1 - e) * (-log p_target) "
             "+ e * (the mean over all V words of -log p_v).")
SMOOTHING_OTHER_WORDS = Mistake(
    "smoothing_other_words", "label smoothing spread over the other words only (e / (V - 1) each, the "
    "Annotated Transformer's way)", SMOOTHING)
SMOOTHING_NOT_PAD = Mistake(
    "smoothing_not_pad", "label smoothing spread over the words other than the target and the padding "
    "token (e / (V - 2) each, the Annotated Transformer's LabelSmoothing)", SMOOTHING)
SMOOTHING_SUMMED = Mistake(
    "smoothing_summed", "the smoothing term summed over the vocabulary instead of averaged", SMOOTHING)
PADDING_IN_MEAN = Mistake(
    "padding_in_mean", "padded positions counted in the mean (their loss set to 0, the sum divided by every "
    "position)", "Divide by the number of positions whose target is not pad_id.")
PADDING_NOT_IGNORED = Mistake(
    "padding_not_ignored", "padded positions not ignored (their loss is in the mean)",
    "Average over the positions whose target is not pad_id only.")
PAD_ID_ZERO = Mistake(
    "pad_id_zero", "the positions whose target is 0 ignored instead of those whose target is pad_id",
    "Compare the targets with the pad_id argument, not with 0.")
PAD_GATHERED = Mistake(
    "pad_gathered", "the log-probability looked up at every target, padding included: a pad_id outside "
    "[0, V) (PyTorch's default ignore_index is -100) is not an index into the vocabulary",
    "Look up -log p_target only where the target is a word: leave the padded positions out first, or give "
    "them a valid index before the look-up (their loss is dropped anyway).")
NO_LOGSUMEXP = Mistake(
    "no_logsumexp", "log(sum(exp(logits))) without the log-sum-exp shift: in float32 exp overflows to inf "
    "above about 88",
    "Subtract each row's largest logit before exp and add it back after the log (or use torch.logsumexp).")

#: Logits drawn at this scale or more, in float32, overflow an unshifted exp (above about 88).
LARGE = 50.0


def loss_case(name: str, seed: int, B: int, n: int, V: int, pad_id: int, padded: int, e: float,
              dtype: torch.dtype = torch.float64, scale: float = 1.0) -> Case:
    """A case: logits (B, n, V) drawn at ``scale``, targets (B, n) whose row 0 ends with ``padded``
    pad_id's, label smoothing ``e``; its kind: one sentence of two words, large float32 logits, a
    pad_id outside [0, V) (-100, PyTorch's default ignore_index, or another), smoothing or not."""
    parts = (["one sentence, V=2"] if (B, V) == (1, 2) else []) \
        + (["large float32 logits"] if dtype == torch.float32 and scale >= LARGE else []) \
        + (["pad_id=-100" if pad_id == -100 else "a pad_id outside [0, V)"] if not 0 <= pad_id < V else []) \
        + ["label smoothing" if e else "no smoothing"]
    return Case(name, seed, {"shape": (B, n, V, pad_id, padded), "e": e, "scale": scale}, dtype,
                kind=", ".join(parts))


CASES = [
    loss_case("batch of 2, padding at the end of row 0", 0, 2, 5, 7, 0, 2, 0.0, torch.float32),
    loss_case("label_smoothing=0.1, pad_id=3, float64", 1, 3, 4, 6, 3, 3, 0.1),
    loss_case("logits of about 100, float32, label_smoothing=0.2", 2, 2, 3, 5, 1, 1, 0.2, torch.float32,
              100.0),
    loss_case("logits of about 100, float32, no smoothing", 3, 2, 4, 6, 2, 1, 0.0, torch.float32, 100.0),
    loss_case("one sentence, V=2, label_smoothing=0.2, float64", 4, 1, 4, 2, 0, 1, 0.2),
    loss_case("pad_id=-100 (PyTorch's default ignore_index), float64", 5, 2, 5, 6, -100, 2, 0.0),
    loss_case("pad_id=6, not an id of V=6, label_smoothing=0.1, float64", 6, 2, 4, 6, 6, 1, 0.1),
]


def inputs(case: Case, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Seeded logits (B, n, V) and targets (B, n): row 0 ends with its padded pad_id's, no other pad."""
    B, n, V, pad_id, padded = case.params["shape"]
    g = generator(case.seed)
    logits = randn((B, n, V), g, case.dtype, device, case.params["scale"])
    targets = torch.randint(0, V, (B, n), generator=g)
    targets = torch.where(targets == pad_id, (pad_id + 1) % V, targets)  # no pad_id among the real ones
    targets[0, n - padded:] = pad_id
    return logits, targets.to(device)


def options(case: Case) -> tuple[int, float]:
    """A case's pad_id and label_smoothing."""
    return case.params["shape"][3], case.params["e"]


def pad_outside(case: Case) -> bool:
    """Is the case's pad_id outside [0, V), so that it is no index into the vocabulary?"""
    _, _, V, pad_id, _ = case.params["shape"]
    return not 0 <= pad_id < V


def device_for(case: Case, device) -> torch.device:
    """The CPU for a case whose pad_id is outside [0, V) (an index out of range there is an error; on a GPU
    a device-side assert that would stop every later check of the notebook), else ``device``."""
    return torch.device("cpu") if pad_outside(case) else torch.device(device)


def loss_outputs(loss, case: Case, device) -> dict:
    """``loss(logits, targets, pad_id, label_smoothing)`` on a case, with the logits' gradient."""
    logits, targets = inputs(case, device)
    logits.requires_grad_()
    return with_gradients(lambda: (loss(logits, targets, *options(case)),), ("output",), {"logits": logits},
                          case.seed)


def _log_probs(logits):
    return logits - logits.logsumexp(dim=-1, keepdim=True)  # (B, n, V)


def _smoothed(logits, targets, pad_id, e, *, spread, kept):
    """The loss with label smoothing spread over ``spread`` words and the mean over ``kept`` positions
    (a known mistake's, so both are required: the contract's is F.cross_entropy)."""
    V = logits.shape[-1]
    neg = -_log_probs(logits)  # (B, n, V)
    keep = targets != pad_id  # (B, n)
    nll = neg.gather(-1, targets.masked_fill(~keep, 0)[..., None])[..., 0]  # (B, n); padding's unused
    total = neg.sum(-1)  # (B, n)
    smooth = {"all": lambda: total / V, "others": lambda: (total - nll) / (V - 1), "sum": lambda: total,
              "not pad": lambda: (total - nll - neg[..., pad_id]) / (V - 2)}[spread]()  # pad_id: a column
    per = (1 - e) * nll + e * smooth  # (B, n)
    if kept == "every position":
        return per.mean()
    if kept == "zeroed":
        return (per * keep).sum() / per.numel()
    return per[keep].mean()


VARIANTS = {
    SMOOTHING_OTHER_WORDS: lambda *a: _smoothed(*a, spread="others", kept="real"),
    SMOOTHING_NOT_PAD: lambda *a: _smoothed(*a, spread="not pad", kept="real"),
    SMOOTHING_SUMMED: lambda *a: _smoothed(*a, spread="sum", kept="real"),
    PADDING_IN_MEAN: lambda *a: _smoothed(*a, spread="all", kept="zeroed"),
    PADDING_NOT_IGNORED: lambda *a: _smoothed(*a, spread="all", kept="every position"),
    PAD_ID_ZERO: lambda logits, targets, pad_id, e: _smoothed(logits, targets, 0, e, spread="all",
                                                              kept="real"),
}


def expect_finite(got, want, where: str) -> None:
    """A non-finite loss where PyTorch's is finite: exp overflowed."""
    if not bool(torch.isfinite(got["output"])) and bool(torch.isfinite(want["output"])):
        raise CheckFailure(f"lm_loss is {got['output'].item()} in {where}, where F.cross_entropy gives "
                           f"{want['output'].item():.4g}.\n{NO_LOGSUMEXP.sentence()}", NO_LOGSUMEXP)


class LmLoss(Exercise):
    forbidden = LOSSES | SOFTMAX
    name = "lm_loss"
    reference_name = "F.cross_entropy(ignore_index=pad_id, label_smoothing=...)"
    mistakes = {m: partial(loss_outputs, f) for m, f in VARIANTS.items()}
    visible_cases = CASES

    def run(self, impl, case, device):
        def loss(*args):
            return expect_tensor(self.call(case, impl, *args), self.name, str(case))

        try:
            return loss_outputs(loss, case, device_for(case, device))
        except CheckFailure as failure:
            if pad_outside(case) and isinstance(failure.__cause__, (IndexError, RuntimeError)):
                cause = failure.__cause__
                raise CheckFailure(f"{failure}\n{PAD_GATHERED.sentence()}", PAD_GATHERED) from cause
            raise

    def reference(self, case, device):
        def cross_entropy(logits, targets, pad_id, e):  # (B, n, V), (B, n)
            return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=pad_id,
                                   label_smoothing=e)

        return loss_outputs(cross_entropy, case, device_for(case, device))

    def evaluate(self, case, got, device):
        device = device_for(case, device)
        expect_finite(got, self.expected(case, device), str(case))
        super().evaluate(case, got, device)

    def expect_nan_when_all_padded(self, impl, dtype: torch.dtype, device) -> None:
        """Every target pad_id: nothing to average, so nan (as F.cross_entropy)."""
        where = "a batch whose targets are all pad_id"
        logits, targets = inputs(loss_case(where, 7, 2, 3, 5, 0, 3, 0.0, dtype), device)
        loss = expect_tensor(self.call(where, impl, logits, torch.zeros_like(targets), 0), self.name)
        if loss.numel() != 1 or not bool(loss.isnan()):
            raise CheckFailure(f"lm_loss should be nan when every target is pad_id (the mean over no "
                               f"position, as F.cross_entropy gives), but is "
                               f"{loss.detach().flatten()[:1].tolist()}. Take the mean of the kept "
                               "positions' losses; do not clamp their count to 1.")

    def extra_checks(self, impl, device):
        for dtype in (torch.float32, torch.float64):
            self.expect_nan_when_all_padded(impl, dtype, device)


@visible_check
def check_lm_loss(lm_loss) -> None:
    """Loss and gradient against F.cross_entropy(ignore_index, label_smoothing), then all-padded."""
    LmLoss().run_cases(lm_loss)
    passed("lm_loss matches F.cross_entropy with ignore_index and label_smoothing, gradients too, with a "
           "pad_id inside or outside the vocabulary (-100 too), and stays finite for large logits.")
