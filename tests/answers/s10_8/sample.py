"""sample: right answers written differently, and planted bugs."""

import torch

from course.visible.s10_8.sample import (
    EOS_NOT_CONTINUED,
    GRADIENTS_TRACKED,
    NO_EARLY_STOP,
    NOT_SEEDED,
    NOT_TRUNCATED,
    PROMPT_DROPPED,
    SEVERAL_DRAWS,
    SEVERAL_SAMPLES,
)
from tests.answers import bug, right

EXERCISE = "sample"
#: Why the operator walk finds no door (tests/test_operator_walk.py): the reference runs nothing
#: its right answers do not.
NO_SIGNATURE = ("a decoding loop on a stand-in model: the reference is the contract's ids, checked step by "
                "step")


#: The notebook's next_token_probs, called by that name as a notebook's sample would (set by answers()).
next_token_probs = None


def make(*, seeded=True, per_row=False, truncate=0, continue_eos=True, stop_early=True, keep_prompt=True,
         no_grad=True, categorical=False, gumbel=False, kernel=False, placed=True, samples=1):
    def sample(model, prompt, max_new_tokens, temperature=1.0, top_k=None, top_p=None, generator=None,
               eos_id=None):
        max_len = model.pos_embed.num_embeddings - truncate
        ids = prompt
        done = torch.zeros(prompt.shape[0], dtype=torch.bool, device=prompt.device if placed else None)
        for _ in range(max_new_tokens):
            window = ids if truncate < 0 else ids[:, -max_len:]
            probs = next_token_probs(model(window)[:, -1], temperature, top_k, top_p)
            if categorical:
                token = torch.distributions.Categorical(probs=probs).sample()[:, None]
            elif gumbel:  # the Gumbel-max trick: the same distribution, drawn without torch.multinomial
                noise = torch.empty_like(probs).exponential_(generator=generator)
                token = (probs / noise).argmax(dim=-1, keepdim=True)
            elif kernel:  # torch.multinomial's kernel through torch.ops, the function modes off
                with torch._C.DisableTorchFunction():
                    token = torch.ops.aten.multinomial(probs, 1, generator=generator)
            elif per_row:
                token = torch.cat([torch.multinomial(row[None], 1, generator=generator) for row in probs])
            else:
                token = torch.multinomial(probs, samples, generator=generator if seeded else None)[:, :1]
            if eos_id is not None:
                if continue_eos:
                    token = torch.where(done[:, None], torch.full_like(token, eos_id), token)
                done = done | (token[:, 0] == eos_id)
            ids = torch.cat([ids, token], dim=1)
            if eos_id is not None and stop_early and bool(done.all()):
                break
        return ids if keep_prompt else ids[:, prompt.shape[1]:]
    return torch.no_grad()(sample) if no_grad else sample


@torch.no_grad()
def preallocated(model, prompt, max_new_tokens, temperature=1.0, top_k=None, top_p=None, generator=None,
                 eos_id=None):
    """The output allocated once and filled column by column, cut where every row has finished."""
    B, n0 = prompt.shape
    out = torch.empty(B, n0 + max_new_tokens, dtype=torch.long, device=prompt.device)
    out[:, :n0] = prompt
    finished = prompt.new_zeros(B).bool()
    length = model.pos_embed.weight.shape[0]
    for t in range(n0, n0 + max_new_tokens):
        logits = model(out[:, max(0, t - length):t])[:, -1]
        drawn = torch.multinomial(next_token_probs(logits, temperature, top_k, top_p), 1, generator=generator)
        if eos_id is not None:
            drawn[finished] = eos_id
            finished |= drawn[:, 0] == eos_id
        out[:, t] = drawn[:, 0]
        if eos_id is not None and finished.all():
            return out[:, :t + 1]
    return out


def answers(solution):
    global next_token_probs
    next_token_probs = solution["next_token_probs"]
    return [
        right("solution", solution["sample"]),
        right("sample_loop", make()),
        right("preallocated", preallocated),
        bug("not seeded", make(seeded=False), hidden="without the generator", mistake=NOT_SEEDED),
        bug("torch.distributions.Categorical", make(categorical=True), mistake=NOT_SEEDED),
        bug("one draw per row", make(per_row=True), hidden="multinomial call", mistake=SEVERAL_DRAWS),
        bug("num_samples=2, the first kept", make(samples=2), hidden="num_samples=2",
            mistake=SEVERAL_SAMPLES),
        bug("Gumbel-max, no torch.multinomial", make(gumbel=True), hidden="multinomial call",
            mistake=SEVERAL_DRAWS),
        bug("aten.multinomial, function modes off", make(kernel=True), hidden="multinomial call",
            mistake=SEVERAL_DRAWS),
        bug("not truncated", make(truncate=-1), hidden="too many tokens", mistake=NOT_TRUNCATED),
        bug("truncated one short", make(truncate=1), hidden="fed the model the last"),
        bug("eos rows not continued", make(continue_eos=False), mistake=EOS_NOT_CONTINUED),
        bug("no early stop", make(stop_early=False), mistake=NO_EARLY_STOP),
        bug("prompt dropped", make(keep_prompt=False), mistake=PROMPT_DROPPED),
        bug("gradients tracked", make(no_grad=False), hidden="gradients tracked", mistake=GRADIENTS_TRACKED),
        bug("finished mask on a fixed device", make(placed=False), hidden="without a device"),
    ]
