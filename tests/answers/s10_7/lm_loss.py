"""lm_loss: right answers written differently, and planted bugs."""

import torch
import torch.nn.functional as F

from course.visible.s10_7.lm_loss import (
    NO_LOGSUMEXP,
    PAD_GATHERED,
    PAD_ID_ZERO,
    PADDING_IN_MEAN,
    PADDING_NOT_IGNORED,
    SMOOTHING_NOT_PAD,
    SMOOTHING_OTHER_WORDS,
    SMOOTHING_SUMMED,
)
from tests.answers import bug, right

EXERCISE = "lm_loss"


def loss_logsumexp(logits, targets, pad_id, label_smoothing=0.0):
    """torch.logsumexp, positions kept by boolean indexing first."""
    keep = targets != pad_id  # (B, n)
    kept, wanted = logits[keep], targets[keep]  # (N, V), (N,)
    log_probs = kept - torch.logsumexp(kept, dim=-1, keepdim=True)
    nll = -log_probs.gather(1, wanted[:, None]).squeeze(1)
    return ((1 - label_smoothing) * nll - label_smoothing * log_probs.mean(-1)).mean()


def loss_smoothed_distribution(logits, targets, pad_id, label_smoothing=0.0):
    """The smoothed target distribution q = (1 - e) one-hot + e / V, then -sum q log p (the padding
    targets made 0 first: a pad_id need not be a valid index)."""
    V = logits.shape[-1]
    shifted = logits - logits.amax(-1, keepdim=True)
    log_probs = shifted - shifted.exp().sum(-1, keepdim=True).log()  # (B, n, V)
    words = torch.where(targets == pad_id, torch.zeros_like(targets), targets)
    q = F.one_hot(words, V).to(logits.dtype) * (1 - label_smoothing) + label_smoothing / V
    per = -(q * log_probs).sum(-1)  # (B, n)
    keep = (targets != pad_id).to(logits.dtype)
    return (per * keep).sum() / keep.sum()


def _per_position(logits, targets, e, spread="all"):
    V = logits.shape[-1]
    neg = -(logits - torch.logsumexp(logits, -1, keepdim=True))  # (B, n, V)
    nll = neg.gather(-1, targets.clamp(0, V - 1)[..., None])[..., 0]  # a pad_id outside [0, V): any word
    return (1 - e) * nll + e * {"all": neg.mean(-1), "others": (neg.sum(-1) - nll) / (V - 1),
                                "sum": neg.sum(-1)}[spread]


def gather_at_padding(logits, targets, pad_id, label_smoothing=0.0):
    """Published code's way: -log p looked up at every target, then the padded positions dropped. Right
    for a pad_id in [0, V); an index error for pad_id=-100 or any id outside the vocabulary."""
    log_probs = logits - torch.logsumexp(logits, dim=-1, keepdim=True)  # (B, n, V)
    nll = -log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (B, n): padding's too
    per = (1 - label_smoothing) * nll - label_smoothing * log_probs.mean(-1)
    return per[targets != pad_id].mean()


def one_hot_targets(logits, targets, pad_id, label_smoothing=0.0):
    """The smoothed target distribution from F.one_hot of every target: one_hot refuses -100."""
    V = logits.shape[-1]
    q = F.one_hot(targets, V).to(logits.dtype) * (1 - label_smoothing) + label_smoothing / V
    per = -(q * (logits - torch.logsumexp(logits, -1, keepdim=True))).sum(-1)
    return per[targets != pad_id].mean()


def smoothing_other_words(logits, targets, pad_id, label_smoothing=0.0):
    return _per_position(logits, targets, label_smoothing, "others")[targets != pad_id].mean()


def smoothing_summed(logits, targets, pad_id, label_smoothing=0.0):
    return _per_position(logits, targets, label_smoothing, "sum")[targets != pad_id].mean()


def smoothing_annotated(logits, targets, pad_id, label_smoothing=0.0):
    """The Annotated Transformer's LabelSmoothing: e / (V - 2) off the target, 0 on the padding column."""
    V = logits.shape[-1]
    log_probs = logits - torch.logsumexp(logits, -1, keepdim=True)
    q = torch.full_like(log_probs, label_smoothing / (V - 2))
    q.scatter_(-1, targets.clamp(0, V - 1)[..., None], 1 - label_smoothing)
    q[..., pad_id] = 0
    per = -(q * log_probs).sum(-1)
    return per[targets != pad_id].mean()


def padding_in_mean(logits, targets, pad_id, label_smoothing=0.0):
    per = _per_position(logits, targets, label_smoothing)
    return (per * (targets != pad_id)).sum() / targets.numel()


def padding_not_ignored(logits, targets, pad_id, label_smoothing=0.0):
    return _per_position(logits, targets, label_smoothing).mean()


def pad_zero_hardcoded(logits, targets, pad_id, label_smoothing=0.0):
    return _per_position(logits, targets, label_smoothing)[targets != 0].mean()


def no_logsumexp(logits, targets, pad_id, label_smoothing=0.0):
    probs = logits.exp() / logits.exp().sum(-1, keepdim=True)  # overflows for large logits
    neg = -probs.log()
    nll = neg.gather(-1, targets.clamp(0, logits.shape[-1] - 1)[..., None])[..., 0]
    per = (1 - label_smoothing) * nll + label_smoothing * neg.mean(-1)
    return per[targets != pad_id].mean()


def logsumexp_unshifted(logits, targets, pad_id, label_smoothing=0.0):
    """log(sum(exp(z))) written out without subtracting the largest logit: inf above about 88 in float32."""
    neg = logits.exp().sum(-1, keepdim=True).log() - logits  # (B, n, V): -log p_v
    nll = neg.gather(-1, targets.clamp(0, logits.shape[-1] - 1)[..., None])[..., 0]
    per = (1 - label_smoothing) * nll + label_smoothing * neg.mean(-1)
    return per[targets != pad_id].mean()


def count_clamped(logits, targets, pad_id, label_smoothing=0.0):
    """0 instead of nan when every target is padding."""
    keep = targets != pad_id
    per = _per_position(logits, targets, label_smoothing)
    return (per * keep).sum() / keep.sum().clamp(min=1)


def calls_cross_entropy(logits, targets, pad_id, label_smoothing=0.0):
    V = logits.shape[-1]
    return F.cross_entropy(logits.view(-1, V), targets.view(-1), ignore_index=pad_id,
                           label_smoothing=label_smoothing)


def calls_log_softmax(logits, targets, pad_id, label_smoothing=0.0):
    neg = -torch.log_softmax(logits, dim=-1)
    nll = neg.gather(-1, targets.clamp(0, logits.shape[-1] - 1)[..., None])[..., 0]
    per = (1 - label_smoothing) * nll + label_smoothing * neg.mean(-1)
    return per[targets != pad_id].mean()


def calls_nll_loss(logits, targets, pad_id, label_smoothing=0.0):
    V = logits.shape[-1]
    log_probs = (logits - torch.logsumexp(logits, -1, keepdim=True)).view(-1, V)
    nll = F.nll_loss(log_probs, targets.view(-1), ignore_index=pad_id)
    keep = targets.view(-1) != pad_id
    return (1 - label_smoothing) * nll - label_smoothing * log_probs[keep].mean(-1).mean()


def nll_loss_kernel(logits, targets, pad_id, label_smoothing=0.0):
    """F.nll_loss's kernel through torch.ops, the function modes off: only the operator tripwire sees it."""
    V = logits.shape[-1]
    log_probs = (logits - torch.logsumexp(logits, -1, keepdim=True)).view(-1, V)  # (B n, V)
    with torch._C.DisableTorchFunction():
        nll, _ = torch.ops.aten.nll_loss_forward(log_probs, targets.view(-1), None, 1, pad_id)  # 1: mean
    keep = targets.view(-1) != pad_id
    return (1 - label_smoothing) * nll - label_smoothing * log_probs[keep].mean(-1).mean()


def as_float(logits, targets, pad_id, label_smoothing=0.0):
    return loss_logsumexp(logits, targets, pad_id, label_smoothing).item()


def detached(logits, targets, pad_id, label_smoothing=0.0):
    return loss_logsumexp(logits.detach(), targets, pad_id, label_smoothing)


def fixed_device_weights(logits, targets, pad_id, label_smoothing=0.0):
    keep = (targets != pad_id).view(-1)
    weights = torch.ones(keep.shape[0], dtype=logits.dtype)  # on the CPU whatever the logits' device
    per = _per_position(logits, targets, label_smoothing).view(-1) * weights
    return per[keep].mean()


def answers(solution):
    return [
        right("solution", solution["lm_loss"]),
        right("loss_logsumexp", loss_logsumexp),
        right("loss_smoothed_distribution", loss_smoothed_distribution),
        bug("smoothing over the other words", smoothing_other_words, hidden="differs",
            mistake=SMOOTHING_OTHER_WORDS),
        bug("smoothing as the Annotated Transformer", smoothing_annotated, mistake=SMOOTHING_NOT_PAD),
        bug("smoothing summed", smoothing_summed, mistake=SMOOTHING_SUMMED),
        bug("padding counted in the mean", padding_in_mean, mistake=PADDING_IN_MEAN),
        bug("padding not ignored", padding_not_ignored, mistake=PADDING_NOT_IGNORED),
        bug("pad_id 0 hard-coded", pad_zero_hardcoded, hidden="differs", mistake=PAD_ID_ZERO),
        bug("-log p gathered at the padding targets too", gather_at_padding, hidden="pad_id=-100",
            mistake=PAD_GATHERED),
        bug("F.one_hot of every target, padding included", one_hot_targets, mistake=PAD_GATHERED),
        bug("no log-sum-exp", no_logsumexp, hidden="log-sum-exp", mistake=NO_LOGSUMEXP),
        bug("log-sum-exp without the shift", logsumexp_unshifted, hidden="log-sum-exp", mistake=NO_LOGSUMEXP),
        bug("0 when all padded", count_clamped, hidden="should be nan"),
        bug("calls F.cross_entropy", calls_cross_entropy, hidden="No credit.*cross_entropy"),
        bug("calls torch.log_softmax", calls_log_softmax, hidden="No credit.*log_softmax"),
        bug("calls F.nll_loss", calls_nll_loss, hidden="No credit.*nll_loss"),
        bug("aten.nll_loss_forward, function modes off", nll_loss_kernel,
            hidden="No credit.*nll_loss_forward"),
        bug("returns a float", as_float, hidden="should be a torch.Tensor"),
        bug("logits detached", detached, hidden="no gradient"),
        bug("weights on a fixed device", fixed_device_weights, hidden="without a device"),
    ]
