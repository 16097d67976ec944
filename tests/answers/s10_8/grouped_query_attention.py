"""grouped_query_attention: right answers written differently (one without copies of K and V),
and planted bugs."""

import math

import torch
import torch.nn.functional as F

from course.visible.s10_2.scaled_dot_product_attention import NO_SCALE
from course.visible.s10_8.grouped_query_attention import MASK_PER_KV_HEAD, TILED
from tests.answers import bug, on_a_fixed_device, right

EXERCISE = "grouped_query_attention"


def _refuse(h, g):
    if h % g:
        raise ValueError(f"n_kv_heads={g} does not divide n_heads={h}")
    return h // g


def _attend(Q, K, V, mask):
    """10.2's attention on (B, h, ...) inputs whose K and V already have h heads."""
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ V, weights


def gqa_repeat_interleave(Q, K, V, mask=None):
    """Copies: each key/value head repeated in place, then 10.2's attention."""
    r = _refuse(Q.shape[1], K.shape[1])
    return _attend(Q, K.repeat_interleave(r, dim=1), V.repeat_interleave(r, dim=1), mask)


def gqa_repeat_kv(Q, K, V, mask=None):
    """Llama's repeat_kv: a new axis expanded, then folded into the heads."""
    B, g, n_k, d = K.shape
    r = _refuse(Q.shape[1], g)

    def repeat_kv(x):
        return x[:, :, None].expand(B, g, r, n_k, x.shape[-1]).reshape(B, g * r, n_k, x.shape[-1])

    return _attend(Q, repeat_kv(K), repeat_kv(V), mask)


def gqa_einsum_groups(Q, K, V, mask=None):
    """No copies of K and V: the queries viewed as (B, g, r, n_q, d), einsum over the groups."""
    B, h, n_q, d_k = Q.shape
    g, n_k = K.shape[1], K.shape[2]
    r = _refuse(h, g)
    scores = torch.einsum("bgrqd,bgkd->bgrqk", Q.reshape(B, g, r, n_q, d_k), K) / d_k ** 0.5
    if mask is not None:
        scores = torch.where(mask.expand(B, h, n_q, n_k).reshape(B, g, r, n_q, n_k), scores,
                             torch.finfo(scores.dtype).min)
    weights = scores.softmax(-1)
    out = torch.einsum("bgrqk,bgkv->bgrqv", weights, V)
    return out.reshape(B, h, n_q, -1), weights.reshape(B, h, n_q, n_k)


def gqa_per_head_loop(Q, K, V, mask=None):
    """A loop over the query heads, each reading its key/value head j // r."""
    h, g = Q.shape[1], K.shape[1]
    r = _refuse(h, g)
    if mask is not None:
        mask = mask.expand(*Q.shape[:2], Q.shape[2], K.shape[2])
    outs, weights = [], []
    for j in range(h):
        o, w = _attend(Q[:, j], K[:, j // r], V[:, j // r], None if mask is None else mask[:, j])
        outs.append(o)
        weights.append(w)
    return torch.stack(outs, 1), torch.stack(weights, 1)


def gqa_index_select(Q, K, V, mask=None):
    """The key/value head of every query head as an index, on the inputs' device."""
    h, g = Q.shape[1], K.shape[1]
    r = _refuse(h, g)
    index = torch.arange(h, device=Q.device) // r  # (h,)
    return _attend(Q, K.index_select(1, index), V.index_select(1, index), mask)


def gqa_index_on_the_cpu(Q, K, V, mask=None):
    h, g = Q.shape[1], K.shape[1]
    r = _refuse(h, g)
    index = torch.arange(h) // r  # on the CPU, whatever Q's device
    return _attend(Q, K.index_select(1, index), V.index_select(1, index), mask)


def gqa_tiled(Q, K, V, mask=None):
    r = _refuse(Q.shape[1], K.shape[1])
    return _attend(Q, K.repeat(1, r, 1, 1), V.repeat(1, r, 1, 1), mask)


def gqa_groups_the_other_way(Q, K, V, mask=None):
    """No copies, but the queries viewed as (B, r, g, ...): query head j in group j % g."""
    B, h, n_q, d_k = Q.shape
    g, n_k = K.shape[1], K.shape[2]
    r = _refuse(h, g)
    q = Q.reshape(B, r, g, n_q, d_k)
    scores = q @ K[:, None].transpose(-2, -1) / math.sqrt(d_k)  # (B, r, g, n_q, n_k)
    if mask is not None:
        scores = scores.masked_fill(~mask.expand(B, h, n_q, n_k).reshape(B, r, g, n_q, n_k), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return (weights @ V[:, None]).reshape(B, h, n_q, -1), weights.reshape(B, h, n_q, n_k)


def gqa_loop_modulo(Q, K, V, mask=None):
    h, g = Q.shape[1], K.shape[1]
    _refuse(h, g)
    if mask is not None:
        mask = mask.expand(*Q.shape[:2], Q.shape[2], K.shape[2])
    pairs = [_attend(Q[:, j], K[:, j % g], V[:, j % g], None if mask is None else mask[:, j])
             for j in range(h)]
    return torch.stack([o for o, _ in pairs], 1), torch.stack([w for _, w in pairs], 1)


def gqa_mask_per_kv_head(Q, K, V, mask=None):
    """The loop, with the mask indexed like the keys: mask head j // r."""
    h, g = Q.shape[1], K.shape[1]
    r = _refuse(h, g)
    if mask is not None:
        mask = mask.expand(*Q.shape[:2], Q.shape[2], K.shape[2])
    pairs = [_attend(Q[:, j], K[:, j // r], V[:, j // r], None if mask is None else mask[:, j // r])
             for j in range(h)]
    return torch.stack([o for o, _ in pairs], 1), torch.stack([w for _, w in pairs], 1)


def gqa_mask_not_expanded(Q, K, V, mask=None):
    """No copies; the mask given a group axis without being brought to h heads first: a per-head
    mask (B, h, ...) cannot broadcast against (B, g, r, ...)."""
    B, h, n_q, d_k = Q.shape
    g = K.shape[1]
    r = _refuse(h, g)
    scores = Q.reshape(B, g, r, n_q, d_k) @ K[:, :, None].transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask.unsqueeze(-3), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return (weights @ V[:, :, None]).reshape(B, h, n_q, -1), weights.reshape(B, h, n_q, -1)


def gqa_not_refused(Q, K, V, mask=None):
    """Every query head j given key/value head j * g // h: right when g divides h, silent when not."""
    h, g = Q.shape[1], K.shape[1]
    index = torch.arange(h, device=Q.device) * g // h
    return _attend(Q, K.index_select(1, index), V.index_select(1, index), mask)


def gqa_asserts(Q, K, V, mask=None):
    h, g = Q.shape[1], K.shape[1]
    assert h % g == 0, f"{g} does not divide {h}"
    return gqa_repeat_interleave(Q, K, V, mask)


def gqa_vague_error(Q, K, V, mask=None):
    if Q.shape[1] % K.shape[1]:
        raise ValueError("the heads do not match")
    return gqa_repeat_interleave(Q, K, V, mask)


def gqa_calls_pytorch(Q, K, V, mask=None):
    _refuse(Q.shape[1], K.shape[1])
    weights = gqa_repeat_interleave(Q, K, V, mask)[1]
    return F.scaled_dot_product_attention(Q, K, V, attn_mask=mask, enable_gqa=True), weights


def gqa_unscaled(Q, K, V, mask=None):
    r = _refuse(Q.shape[1], K.shape[1])
    return _attend(Q * math.sqrt(Q.shape[-1]), K.repeat_interleave(r, 1), V.repeat_interleave(r, 1), mask)


def gqa_in_float64(Q, K, V, mask=None):
    out, weights = gqa_repeat_interleave(Q.double(), K.double(), V.double(), mask)
    return out, weights


def gqa_fill_minus_1e4(Q, K, V, mask=None):
    r = _refuse(Q.shape[1], K.shape[1])
    K, V = K.repeat_interleave(r, 1), V.repeat_interleave(r, 1)
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, -1e4)
    weights = torch.softmax(scores, dim=-1)
    return weights @ V, weights


def answers(solution):
    return [
        right("solution", solution[EXERCISE]),  # no copies: queries grouped, K and V broadcast
        right("repeat_interleave, then attention", gqa_repeat_interleave),
        right("Llama's repeat_kv (expand, reshape)", gqa_repeat_kv),
        right("einsum over (B, g, r, ...) groups, no copies", gqa_einsum_groups),
        right("a loop over query heads", gqa_per_head_loop),
        right("index_select on the inputs' device", gqa_index_select),
        bug("key/value heads tiled (repeat)", gqa_tiled, hidden="j % g", mistake=TILED),
        bug("queries grouped as (B, r, g, ...)", gqa_groups_the_other_way, hidden="j % g", mistake=TILED),
        bug("a loop reading key/value head j % g", gqa_loop_modulo, hidden="j % g", mistake=TILED),
        bug("per-head mask read per key/value head", gqa_mask_per_kv_head, hidden="per key/value head",
            mistake=MASK_PER_KV_HEAD),
        bug("per-head mask not brought to h heads", gqa_mask_not_expanded, hidden="mask per query head"),
        bug("g not dividing h not refused", gqa_not_refused, hidden="should raise ValueError"),
        bug("assert instead of ValueError", gqa_asserts, hidden="should raise ValueError.*AssertionError"),
        bug("ValueError naming neither number", gqa_vague_error, hidden="should name both numbers"),
        bug("calls F.scaled_dot_product_attention(enable_gqa=True)", gqa_calls_pytorch,
            hidden="No credit.*scaled_dot_product_attention"),
        bug("fixed device: an index made on the CPU", gqa_index_on_the_cpu, hidden="fixed device"),
        bug("fixed device: an offset made on the CPU", on_a_fixed_device(solution[EXERCISE]),
            hidden="fixed device"),
        bug("no scaling", gqa_unscaled, hidden=r"without the 1/sqrt\(d_k\) scaling", mistake=NO_SCALE),
        bug("computes and returns float64", gqa_in_float64, hidden="the dtype of Q"),
        bug("blocked scores filled with -1e4", gqa_fill_minus_1e4, hidden="far below -1e4"),
    ]
