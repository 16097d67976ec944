"""Visible check of ``sample(model, prompt, max_new_tokens, temperature, top_k, top_p, generator, eos_id)``.

The learner's loop runs on a stand-in language model, with the contract's ``next_token_probs``
put in place of the notebook's for the check (so that sample is graded on its own), and every
``torch.multinomial`` call is watched; the reference is the contract's loop with a generator
seeded the same way.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import nn
from torch.overrides import TorchFunctionMode, resolve_name

from course.checking import (
    CheckFailure,
    Mistake,
    call_learner,
    expect_tensor,
    generator,
    passed,
    randn,
    visible_check,
)
from course.visible.s10_7.next_token_probs import contract_probs

DRAW = ("Draw each step's tokens with one call, torch.multinomial(probs, 1, generator=generator), for the "
        "whole batch.")
NOT_SEEDED = Mistake("not_seeded", "tokens drawn without the generator passed in (torch's global random "
                     "numbers)", DRAW)
SEVERAL_DRAWS = Mistake("several_draws", "more (or fewer) than one torch.multinomial call per step", DRAW)
NOT_TRUNCATED = Mistake("not_truncated", "the whole sequence fed to the model, longer than its max_len",
                        "Feed the model at most its max_len last tokens: model(ids[:, -max_len:]) with "
                        "max_len = model.pos_embed.num_embeddings.")
EOS_NOT_CONTINUED = Mistake("eos_not_continued", "rows that produced eos_id going on drawing tokens",
                            "Once a row has produced eos_id, append eos_id to it at every later step.")
NO_EARLY_STOP = Mistake("no_early_stop", "max_new_tokens steps even after every row has produced eos_id",
                        "Stop as soon as every row has produced eos_id.")
PROMPT_DROPPED = Mistake("prompt_dropped", "only the new tokens returned, without the prompt",
                         "Return the prompt followed by the new tokens: (B, n0 + m).")
GRADIENTS_TRACKED = Mistake("gradients_tracked", "the model run with gradients tracked",
                            "Decorate sample with @torch.no_grad() (or run its loop in a "
                            "with torch.no_grad(): block).")
MULTINOMIAL = frozenset({"torch.multinomial", "torch.Tensor.multinomial"})
CASES = [  # name, B, n0, max_new_tokens, temperature, top_k, top_p, eos_id, seed
    ("temperature 0 (greedy), 2 prompts of 2 tokens, 3 new", 2, 2, 3, 0.0, None, None, None, 0),
    ("temperature 1, top_k=3, eos_id=2, 3 prompts of 1 token, up to 9 new (past max_len=6)",
     3, 1, 9, 1.0, 3, None, 2, 1),
    ("temperature 0.8, top_p=0.7, a prompt of max_len tokens, 3 new", 2, 6, 3, 0.8, None, 0.7, None, 2),
]


class ContextTooLong(ValueError):
    """The stand-in model was given more than max_len tokens."""


class StandIn(nn.Module):
    """A stand-in language model (B, n) -> (B, n, V): the logits of a position depend on its token, on
    the sum of the ids up to it and on its position (eos_id more likely further on)."""

    def __init__(self, vocab_size=6, max_len=6, eos_id=2, seed=0, dtype=torch.float32, device="cpu"):
        super().__init__()
        g = generator(1000 + seed)
        self.max_len = max_len
        self.tok_embed = nn.Embedding(vocab_size, vocab_size).to(device, dtype)
        self.pos_embed = nn.Embedding(max_len, vocab_size).to(device, dtype)
        self.mix = nn.Parameter(randn((vocab_size, vocab_size), g, dtype, device))
        with torch.no_grad():
            self.tok_embed.weight.copy_(randn((vocab_size, vocab_size), g, dtype, device))
            self.pos_embed.weight.copy_(randn((max_len, vocab_size), g, dtype, device, 0.5))
            self.pos_embed.weight[:, eos_id] += torch.linspace(-2, 2, max_len, dtype=dtype, device=device)
        self.gradients_tracked = False

    def forward(self, ids):
        B, n = ids.shape
        if n > self.max_len:
            raise ContextTooLong(f"the model was given {n} tokens, more than its max_len={self.max_len}")
        self.gradients_tracked |= torch.is_grad_enabled()
        context = ids.cumsum(dim=1) % self.mix.shape[0]  # (B, n)
        positions = torch.arange(n, device=ids.device)
        return self.tok_embed(ids) + self.pos_embed(positions) + self.mix[context]  # (B, n, V)


def contract_sample(model, prompt, max_new_tokens, temperature=1.0, top_k=None, top_p=None, generator=None,
                    eos_id=None, *, continue_eos=True, stop_early=True):
    """The contract's loop; the keywords switch on known mistakes."""
    ids, done = prompt, torch.zeros(prompt.shape[0], dtype=torch.bool, device=prompt.device)
    with torch.no_grad():
        for _ in range(max_new_tokens):
            probs = contract_probs(model(ids[:, -model.max_len:])[:, -1], temperature, top_k, top_p)
            token = torch.multinomial(probs, 1, generator=generator)  # (B, 1)
            if eos_id is not None:
                token = token.masked_fill(done[:, None], eos_id) if continue_eos else token
                done = done | (token[:, 0] == eos_id)
            ids = torch.cat([ids, token], dim=1)
            if eos_id is not None and stop_early and bool(done.all()):
                break
    return ids


class Draws(TorchFunctionMode):
    """Notes every torch.multinomial call: its number of samples and whether it got ``generator``."""

    def __init__(self, generator):
        super().__init__()
        self.generator, self.calls = generator, []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if resolve_name(func) in MULTINOMIAL:
            samples = args[1] if len(args) > 1 else kwargs.get("num_samples")
            self.calls.append((samples, kwargs.get("generator") is self.generator))
        return func(*args, **kwargs)


@contextlib.contextmanager
def contract_next_token_probs(function) -> Iterator[None]:
    """While checking ``sample``, the ``next_token_probs`` it calls is the contract's."""
    namespace = getattr(function, "__globals__", {})
    if "next_token_probs" not in namespace:
        yield
        return
    own = namespace["next_token_probs"]
    namespace["next_token_probs"] = contract_probs
    try:
        yield
    finally:
        namespace["next_token_probs"] = own


def fail(message: str, mistake: Mistake | None = None):
    raise CheckFailure(message + (f"\n{mistake.sentence()}" if mistake else ""), mistake)


def run_learner(sample, model, prompt, options, seed, device, where: str) -> torch.Tensor:
    """The learner's ids, after checking how it drew them."""
    g = torch.Generator(device=device).manual_seed(seed)
    draws = Draws(g)
    try:
        with contract_next_token_probs(sample), draws:
            out = call_learner("sample", where, sample, model, prompt.clone(), generator=g, **options)
    except CheckFailure as failure:
        if isinstance(failure.__cause__, ContextTooLong):
            fail(f"sample fed the model too many tokens in {where}: {failure.__cause__}.", NOT_TRUNCATED)
        raise
    out = expect_tensor(out, "sample", where)
    if out.dtype != torch.long or out.dim() != 2:
        fail(f"sample should return a (B, n0 + m) LongTensor of ids, but returned a {out.dtype} tensor of "
             f"shape {tuple(out.shape)} in {where}.")
    if model.gradients_tracked:
        fail(f"sample ran the model with gradients tracked in {where}.", GRADIENTS_TRACKED)
    if not all(seeded for _, seeded in draws.calls):
        fail(f"sample drew tokens without the generator it was given in {where}.", NOT_SEEDED)
    n0 = prompt.shape[1]
    if out.shape[1] < n0 or not torch.equal(out[:, :n0].cpu(), prompt.cpu()):
        return out  # no prompt first: compare_ids says what came back
    steps = out.shape[1] - n0
    if len(draws.calls) != steps or any(samples != 1 for samples, _ in draws.calls):
        fail(f"sample made {len(draws.calls)} torch.multinomial call(s) for {steps} new token(s) per row in "
             f"{where}.", SEVERAL_DRAWS)
    return out


def compare_ids(got, model, prompt, options, seed, device, where: str) -> None:
    """The learner's ids against the contract's loop, naming a known mistake."""
    def reference(**mistake):
        g = torch.Generator(device=device).manual_seed(seed)
        return contract_sample(model, prompt, generator=g, **options, **mistake)

    want = reference()
    if got.shape == want.shape and torch.equal(got.cpu(), want.cpu()):
        return
    variants = {EOS_NOT_CONTINUED: lambda: reference(continue_eos=False),
                NO_EARLY_STOP: lambda: reference(stop_early=False),
                PROMPT_DROPPED: lambda: reference()[:, prompt.shape[1]:]}
    mistake = next((m for m, run in variants.items()
                    if (v := run()).shape == got.shape and torch.equal(v.cpu(), got.cpu())), None)
    fail(f"sample's ids differ from the contract's loop with the same seed in {where}: got shape "
         f"{tuple(got.shape)}, expected {tuple(want.shape)}; first rows {got[0].tolist()} instead of "
         f"{want[0].tolist()}.", mistake)


def check_case(sample, case, dtype=torch.float32, device="cpu") -> torch.Tensor:
    name, B, n0, max_new, temperature, top_k, top_p, eos_id, seed = case
    where = f"case '{name}'"
    model = StandIn(eos_id=2 if eos_id is None else eos_id, seed=seed, dtype=dtype, device=device)
    prompt = torch.randint(0, 5, (B, n0), generator=generator(seed))
    prompt = (prompt + (prompt >= 2).long()).to(device)  # no eos_id (2) in the prompt
    options = {"max_new_tokens": max_new, "temperature": temperature, "top_k": top_k, "top_p": top_p,
               "eos_id": eos_id}
    got = run_learner(sample, model, prompt, options, seed, device, where)
    compare_ids(got, model, prompt, options, seed, device, where)
    return got


@visible_check
def check_sample(sample) -> None:
    """Greedy at temperature 0, one seeded draw per step, eos, max_len, against the contract's loop."""
    for case in CASES:
        check_case(sample, case)
    passed("sample draws one seeded token per step for the whole batch, feeds the model at most max_len "
           "tokens, and continues finished rows with eos_id until every row has finished.")
