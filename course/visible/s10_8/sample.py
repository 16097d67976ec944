"""Visible check of ``sample(model, prompt, max_new_tokens, temperature, top_k, top_p, generator, eos_id)``.

The learner's loop runs on a stand-in language model, with this module's own ``next_token_probs``
for the stand-in's logits (:func:`untied_probs`) put in place of the notebook's for the check (so
that sample is graded on its own), and every
``torch.multinomial`` call is watched: each step is then checked against the contract from the
learner's own ids (what the model saw, what was drawn, what was appended, when it stopped).
"""

from __future__ import annotations

import contextlib

import torch
from torch import nn
from torch.overrides import TorchFunctionMode, resolve_name

from course.checking import (
    Case,
    CheckFailure,
    Exercise,
    Mistake,
    call_learner,
    expect_tensor,
    generator,
    passed,
    randn,
    visible_check,
)
from course.checking.pieces import reference_pieces

DRAW = ("Draw each step's tokens for the whole batch with exactly one call of torch.multinomial, one sample "
        "per row, passing the generator you were given.")
NOT_SEEDED = Mistake("not_seeded", "tokens drawn without the generator passed in (torch's global random "
                     "numbers)", DRAW)
SEVERAL_DRAWS = Mistake("several_draws", "more (or fewer) than one torch.multinomial call per step", DRAW)
SEVERAL_SAMPLES = Mistake("several_samples", "torch.multinomial asked for more than one sample per row",
                          DRAW + " num_samples=1: the first of several draws is not the draw of one.")
NOT_TRUNCATED = Mistake("not_truncated", "the whole sequence fed to the model, longer than its max_len",
                        "Feed the model at most its max_len last tokens; a GPT's max_len is the number "
                        "of its position embeddings.")
EOS_NOT_CONTINUED = Mistake("eos_not_continued", "rows that produced eos_id going on drawing tokens",
                            "Once a row has produced eos_id, append eos_id to it at every later step.")
NO_EARLY_STOP = Mistake("no_early_stop", "max_new_tokens steps even after every row has produced eos_id",
                        "Stop as soon as every row has produced eos_id.")
PROMPT_DROPPED = Mistake("prompt_dropped", "only the new tokens returned, without the prompt",
                         "Return the prompt followed by the new tokens: (B, n0 + m).")
GRADIENTS_TRACKED = Mistake("gradients_tracked", "the model run with gradients tracked",
                            "Nothing here trains: run the whole loop without gradient tracking "
                            "(torch.no_grad, as a decorator or a with block).")
MULTINOMIAL = frozenset({"torch.multinomial", "torch.Tensor.multinomial"})
SETTINGS = [  # name, B, n0, max_new_tokens, temperature, top_k, top_p, eos_id, seed
    ("temperature 0 (greedy), 2 prompts of 2 tokens, 3 new", 2, 2, 3, 0.0, None, None, None, 0),
    ("temperature 1, top_k=3, eos_id=2, 3 prompts of 1 token, up to 9 new (past max_len=6)",
     3, 1, 9, 1.0, 3, None, 2, 1),
    ("temperature 0.8, top_p=0.7, a prompt of max_len tokens, 3 new", 2, 6, 3, 0.8, None, 0.7, None, 2),
    ("temperature 1.3, eos_id=2, 3 prompts, up to 8 new", 3, 2, 8, 1.3, None, None, 2, 3),
    ("no new token", 2, 3, 0, 1.0, None, None, 2, 4),
]


def sample_case(setting: tuple, dtype: torch.dtype = torch.float64) -> Case:
    """A case of a setting (name, B, n0, max_new_tokens, temperature, top_k, top_p, eos_id, seed); its kind:
    no new token, greedy, top-k, top-p or the temperature alone."""
    name, _, _, max_new, temperature, top_k, top_p, _, seed = setting
    kind = "no new token" if max_new == 0 else "temperature 0" if temperature == 0 else \
        "top_k" if top_k else "top_p" if top_p else "temperature alone"
    return Case(name, seed, {"setting": setting}, dtype, kind=kind)


def untied_probs(logits, temperature=1.0, top_k=None, top_p=None):
    """The contract's probabilities for logits without ties and ``top_k`` at most V, as the stand-in
    models give: tokens ranked by sorting, so tied tokens would be cut at top-p's boundary (which
    next_token_probs's own check accepts too), and ``probs.topk`` raises for a ``top_k`` above V."""
    if temperature == 0:
        return torch.zeros_like(logits).scatter(-1, logits.argmax(dim=-1, keepdim=True), 1.0)
    probs = (logits / temperature).softmax(dim=-1)  # (B, V)
    if top_k is not None:
        probs = probs * (probs >= probs.topk(top_k, dim=-1).values[:, -1:])
        probs = probs / probs.sum(-1, keepdim=True)
    if top_p is not None:
        ordered, index = probs.sort(dim=-1, descending=True)
        before = torch.zeros_like(probs).scatter(-1, index, ordered.cumsum(-1) - ordered)  # (B, V)
        probs = probs * (before < top_p)
        probs = probs / probs.sum(-1, keepdim=True)
    return probs


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


class Draws(TorchFunctionMode):
    """Notes every torch.multinomial call: its number of samples, whether it got ``generator``, the
    probabilities it drew from and the tokens it drew."""

    def __init__(self, generator):
        super().__init__()
        self.generator, self.calls, self.draws = generator, [], []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        if resolve_name(func) in MULTINOMIAL:
            samples = args[1] if len(args) > 1 else kwargs.get("num_samples")
            self.calls.append((samples, kwargs.get("generator") is self.generator))
            probs = args[0] if args else kwargs.get("input")
            self.draws.append((probs.detach().clone(), result.detach().clone()))
        return result


def contract_next_token_probs(function):
    """While checking ``sample``, the ``next_token_probs`` it calls is :func:`untied_probs`."""
    return reference_pieces(function, {"next_token_probs": untied_probs})


def fail(message: str, mistake: Mistake | None = None):
    raise CheckFailure(message + (f"\n{mistake.sentence()}" if mistake else ""), mistake)


def run_learner(sample, model, prompt, options, seed, device, where: str,
                learner_code=contextlib.nullcontext) -> tuple[torch.Tensor, Draws]:
    """The learner's ids and what it drew, after checking how it drew them (learner code runs in
    ``learner_code()``: the engine's, for its device probe)."""
    g = torch.Generator(device=device).manual_seed(seed)
    draws = Draws(g)
    try:
        with contract_next_token_probs(sample), draws, learner_code():
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
        mistake = PROMPT_DROPPED if out.shape[1] == len(draws.calls) else None
        fail(f"sample's ids should start with the prompt in {where}: the first {n0} tokens of each row "
             "are not the prompt's.", mistake)
    steps = out.shape[1] - n0
    if len(draws.calls) != steps:
        fail(f"sample made {len(draws.calls)} torch.multinomial call(s) for {steps} new token(s) per row in "
             f"{where}.", SEVERAL_DRAWS)
    several = sorted({samples for samples, _ in draws.calls if samples != 1})
    if several:
        fail(f"sample called torch.multinomial with num_samples={several[0]} in {where}: one call per step, "
             "as it should, but more than one sample per row.", SEVERAL_SAMPLES)
    return out, draws


def _probs(model, ids, window: int, options) -> torch.Tensor:
    """The contract's next-token probabilities when the model sees the last ``window`` ids."""
    with torch.no_grad():
        logits = model(ids[:, -window:])[:, -1]  # (B, V)
    return untied_probs(logits, options["temperature"], options["top_k"], options["top_p"])


def verify_steps(got, draws: Draws, model, prompt, options, where: str) -> None:
    """Step by step, the learner's ids against the contract: each draw was made from
    ``next_token_probs`` of the model's output for the ids so far (at most max_len of them), each
    new column is what was drawn (eos_id for rows that had finished), and the loop stopped when
    the contract says. The check recomputes each step from the learner's own ids: it replays no loop."""
    n0, eos = prompt.shape[1], options["eos_id"]
    done = torch.zeros(got.shape[0], dtype=torch.bool, device=got.device)
    for t, (probs, drawn) in enumerate(draws.draws):
        ids = got[:, :n0 + t]  # (B, n0 + t): the ids before step t
        want = _probs(model, ids, model.max_len, options)
        if probs.shape != want.shape or not torch.allclose(probs.to(want), want, rtol=1e-4, atol=1e-6):
            seen = next((w for w in range(1, ids.shape[1] + 1) if w != min(ids.shape[1], model.max_len)
                         and torch.allclose(probs.to(want), _probs(model, ids, w, options), rtol=1e-4,
                                            atol=1e-6)), None)
            if seen is not None:
                fail(f"sample fed the model the last {seen} tokens at step {t + 1} in {where}, where it "
                     f"sees min(n, max_len) = {min(ids.shape[1], model.max_len)} of them: only the last "
                     "max_len tokens.")
            fail(f"sample's draw at step {t + 1} did not use next_token_probs(model(ids)[:, -1], "
                 f"temperature, top_k, top_p) of the ids so far in {where}.")
        column = drawn[:, 0].to(got.device)
        if eos is not None:
            if not torch.equal(got[:, n0 + t][~done], column[~done]):
                fail(f"sample's new tokens at step {t + 1} are not the ones torch.multinomial drew in "
                     f"{where}.")
            if not bool((got[:, n0 + t][done] == eos).all()):
                fail(f"sample drew new tokens for rows that had produced eos_id in {where}.",
                     EOS_NOT_CONTINUED)
            done = done | (got[:, n0 + t] == eos)
            if bool(done.all()) and t + 1 < len(draws.draws):
                fail(f"sample went on drawing after every row had produced eos_id in {where}.", NO_EARLY_STOP)
        elif not torch.equal(got[:, n0 + t], column):
            fail(f"sample's new tokens at step {t + 1} are not the ones torch.multinomial drew in "
                 f"{where}.")
    steps = got.shape[1] - n0
    finished = eos is not None and bool(done.all())
    if steps > options["max_new_tokens"] or (steps < options["max_new_tokens"] and not finished):
        fail(f"sample returned {steps} new token(s) per row in {where}, with max_new_tokens="
             f"{options['max_new_tokens']}: it stops early only when every row has produced eos_id.")


def check_case(sample, setting, dtype=torch.float32, device="cpu",
               learner_code=contextlib.nullcontext) -> torch.Tensor:
    """The learner's ids on a setting (its stand-in model and prompt), every step checked."""
    name, B, n0, max_new, temperature, top_k, top_p, eos_id, seed = setting
    where = f"case '{name}'"
    model = StandIn(eos_id=2 if eos_id is None else eos_id, seed=seed, dtype=dtype, device=device)
    prompt = torch.randint(0, 5, (B, n0), generator=generator(seed))
    prompt = (prompt + (prompt >= 2).long()).to(device)  # no eos_id (2) in the prompt
    options = {"max_new_tokens": max_new, "temperature": temperature, "top_k": top_k, "top_p": top_p,
               "eos_id": eos_id}
    got, draws = run_learner(sample, model, prompt, options, seed, device, where, learner_code)
    verify_steps(got, draws, model, prompt, options, where)
    return got


class Sample(Exercise):
    name = "sample"
    builds_on = {"next_token_probs": untied_probs}
    reference_name = "the contract, step by step,"
    visible_cases = [sample_case(s, torch.float32) for s in SETTINGS]

    def run(self, impl, case, device):
        """Called without the tripwires: the check itself puts its own next_token_probs in place."""
        setting = (case.name, *case.params["setting"][1:])
        return {"ids": check_case(impl, setting, case.dtype, device, self.learner_code)}

    def reference(self, case, device):
        return {}  # run checks every step against the contract itself (known mistakes named)

    def evaluate(self, case, got, device):
        """Done in run: sampled ids are compared exactly, their length included."""


@visible_check
def check_sample(sample) -> None:
    """Greedy at temperature 0, one seeded draw per step, eos, max_len, against the contract's loop."""
    Sample().run_cases(sample)
    passed("sample draws one seeded token per step for the whole batch, feeds the model at most max_len "
           "tokens, and continues finished rows with eos_id until every row has finished.")
