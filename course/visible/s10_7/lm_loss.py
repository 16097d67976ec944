"""Visible check of ``lm_loss(logits, targets, pad_id, label_smoothing=0.0)``, and its known mistakes."""

from __future__ import annotations

from functools import partial

import torch
import torch.nn.functional as F

from course.checking import (
    CheckFailure,
    Mistake,
    call_learner,
    compare_outputs,
    expect_tensor,
    generator,
    passed,
    randn,
    visible_check,
    with_gradients,
)

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
    "Keep only the positions whose target is not pad_id (keep = targets != pad_id), then take the mean.")
PAD_ID_ZERO = Mistake(
    "pad_id_zero", "the positions whose target is 0 ignored instead of those whose target is pad_id",
    "Compare the targets with the pad_id argument: keep = targets != pad_id.")
NO_LOGSUMEXP = Mistake(
    "no_logsumexp", "log(sum(exp(logits))) without the log-sum-exp shift: in float32 exp overflows to inf "
    "above about 88",
    "Subtract each row's largest logit before exp and add it back after the log (or use torch.logsumexp).")

CASES = [  # name, B, n, V, pad_id, padded positions of row 0, label_smoothing, dtype, logit scale
    ("batch of 2, padding at the end of row 0", 2, 5, 7, 0, 2, 0.0, torch.float32, 1.0),
    ("label_smoothing=0.1, pad_id=3, float64", 3, 4, 6, 3, 3, 0.1, torch.float64, 1.0),
    ("logits of about 100, float32, label_smoothing=0.2", 2, 3, 5, 1, 1, 0.2, torch.float32, 100.0),
]


def make_inputs(B, n, V, pad_id, padded, dtype, seed, scale=1.0, device="cpu"):
    """Seeded logits (B, n, V) and targets (B, n): row 0 ends with ``padded`` pad_id's, no other pad."""
    g = generator(seed)
    logits = randn((B, n, V), g, dtype, device, scale)
    targets = torch.randint(0, V, (B, n), generator=g)
    targets = torch.where(targets == pad_id, (pad_id + 1) % V, targets)  # no pad_id among the real ones
    targets[0, n - padded:] = pad_id
    return logits, targets.to(device)


def reference(logits, targets, pad_id, label_smoothing):
    V = logits.shape[-1]
    return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), ignore_index=pad_id,
                           label_smoothing=label_smoothing)


def _log_probs(logits):
    return logits - logits.logsumexp(dim=-1, keepdim=True)  # (B, n, V)


def _smoothed(logits, targets, pad_id, e, *, spread, kept):
    """The loss with label smoothing spread over ``spread`` words and the mean over ``kept`` positions
    (a known mistake's, so both are required: the contract's is F.cross_entropy)."""
    V = logits.shape[-1]
    neg = -_log_probs(logits)  # (B, n, V)
    nll = neg.gather(-1, targets[..., None])[..., 0]  # (B, n)
    total = neg.sum(-1)  # (B, n)
    smooth = {"all": total / V, "others": (total - nll) / (V - 1), "sum": total,
              "not pad": (total - nll - neg[..., pad_id]) / (V - 2)}[spread]
    per = (1 - e) * nll + e * smooth  # (B, n)
    keep = targets != pad_id
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


def outputs(loss, logits, targets, pad_id, label_smoothing, seed):
    """``loss(...)`` on a fresh copy of the logits, with the logits' gradient."""
    logits = logits.detach().clone().requires_grad_()
    return with_gradients(lambda: (loss(logits, targets, pad_id, label_smoothing),), ("output",),
                          {"logits": logits}, seed)


def expect_finite(got, want, where: str) -> None:
    """A non-finite loss where PyTorch's is finite: exp overflowed."""
    if not bool(torch.isfinite(got["output"])) and bool(torch.isfinite(want["output"])):
        raise CheckFailure(f"lm_loss is {got['output'].item()} in {where}, where F.cross_entropy gives "
                           f"{want['output'].item():.4g}.\n{NO_LOGSUMEXP.sentence()}", NO_LOGSUMEXP)


def expect_nan_when_all_padded(lm_loss, dtype=torch.float32, device="cpu") -> None:
    """Every target pad_id: nothing to average, so nan (as F.cross_entropy)."""
    logits, targets = make_inputs(2, 3, 5, 0, 3, dtype, 7, device=device)
    targets = torch.zeros_like(targets)
    loss = expect_tensor(call_learner("lm_loss", "a batch whose targets are all pad_id", lm_loss, logits,
                                      targets, 0), "lm_loss")
    if loss.numel() != 1 or not bool(loss.isnan()):
        raise CheckFailure(f"lm_loss should be nan when every target is pad_id (the mean over no position, "
                           f"as F.cross_entropy gives), but is {loss.detach().flatten()[:1].tolist()}. "
                           "Take the mean of the kept positions' losses; do not clamp their count to 1.")


def learner_call(lm_loss, where: str):
    def call(*args):
        return expect_tensor(call_learner("lm_loss", where, lm_loss, *args), "lm_loss", where)
    return call


@visible_check
def check_lm_loss(lm_loss) -> None:
    """Loss and gradient against F.cross_entropy(ignore_index, label_smoothing), then all-padded."""
    for seed, (case, B, n, V, pad_id, padded, e, dtype, scale) in enumerate(CASES):
        where = f"case '{case}'"
        logits, targets = make_inputs(B, n, V, pad_id, padded, dtype, seed, scale)
        want = outputs(reference, logits, targets, pad_id, e, seed)
        got = outputs(learner_call(lm_loss, where), logits, targets, pad_id, e, seed)
        expect_finite(got, want, where)
        variants = {m: partial(outputs, f, logits, targets, pad_id, e, seed) for m, f in VARIANTS.items()}
        compare_outputs(got, want, "lm_loss", where, against="F.cross_entropy(ignore_index=pad_id, "
                        "label_smoothing=...)", variants=variants)
    expect_nan_when_all_padded(lm_loss)
    passed("lm_loss matches F.cross_entropy with ignore_index and label_smoothing, gradients too, and "
           "stays finite for large logits.")
