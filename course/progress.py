"""Where you stand: what each exercise's visible check said, and the points it predicts.

Every test cell of the course opens with ``\"\"\"Check <exercise> ...``. In Jupyter (and
Colab, and IPython in a terminal) :func:`install` registers a hook that notes, after each
such cell runs, whether it passed, failed (with the message, which names the likely
mistake) or met an unfinished exercise. :func:`where_you_stand` prints the summary that
closes every notebook. Outside IPython, :func:`observe` records a cell by hand.
"""

from __future__ import annotations

import re
import sys
import textwrap
from dataclasses import dataclass

#: Exercises of each section, in notebook order, with their points (as graded).
EXERCISES: dict[str, dict[str, int]] = {
    "10.1": {"qkv_projections": 2, "QKVProjection": 2},
    "10.2": {"softmax": 2, "scaled_dot_product_attention": 4, "dot_product_variance": 2},
    "10.3": {"split_heads": 1, "merge_heads": 1, "MultiHeadAttention": 4},
    "10.4": {"sinusoidal_positional_encoding": 3, "PositionalEncoding": 2, "relative_shift_matrix": 3,
             "apply_rotary": 3},
    "10.5": {"FeedForward": 2, "TransformerBlock": 4},
    "10.6": {"causal_mask": 1, "padding_mask": 1, "DecoderBlock": 3, "Transformer": 4,
             "greedy_decode": 3, "greedy_decode_cached": 3, "beam_search": 3},
}
TITLES = {
    "10.1": "Self-attention: queries, keys and values",
    "10.2": "Scaled dot-product attention",
    "10.3": "Multi-head attention",
    "10.4": "Positional encoding",
    "10.5": "The Transformer block",
    "10.6": "The encoder-decoder architecture",
    "10.7": "Beyond the lesson: a GPT from your own blocks",
}
GRADING_ONLY = (
    "Grading checks more than the test cells do: more cases (shapes, masks, options, float64 "
    "and float32), the gradients of every parameter, your code on another device (the GPU, "
    "when there is one), and that the work is your own (no call to the PyTorch function an "
    "exercise is graded against, nothing changed in the checks). The test cells catch the "
    "usual mistakes; a pass is a strong sign, not a guarantee."
)
CHECK_CELL = re.compile(r'\s*(?:[rRuU]?"""|[rRuU]?\'\'\')\s*Check\s+(\w+)')


@dataclass
class Outcome:
    """The last run of one exercise's test cell."""

    status: str  # "passed", "failed" or "not attempted"
    message: str = ""


_outcomes: dict[str, Outcome] = {}


def exercise_of(cell_source: str) -> str | None:
    """The exercise a test cell checks (from its opening docstring), or None."""
    match = CHECK_CELL.match(cell_source)
    if match and any(match.group(1) in names for names in EXERCISES.values()):
        return match.group(1)
    return None


def observe(cell_source: str, error: BaseException | None) -> None:
    """Record the outcome of a cell that ran (nothing happens for cells that are not checks)."""
    name = exercise_of(cell_source)
    if name is None:
        return
    if error is None:
        _outcomes[name] = Outcome("passed")
    elif isinstance(error, NotImplementedError):
        _outcomes[name] = Outcome("not attempted", "it (or an exercise it uses) raises NotImplementedError")
    else:
        text = str(error).strip() or type(error).__name__
        if type(error).__name__ not in ("VisibleCheckFailure", "AssertionError", "CheckFailure"):
            text = f"{type(error).__name__}: {text}"
        _outcomes[name] = Outcome("failed", text)


def outcomes() -> dict[str, Outcome]:
    """What has been recorded so far, by exercise."""
    return dict(_outcomes)


def forget() -> None:
    """Forget every recorded outcome."""
    _outcomes.clear()


def _after_cell(result) -> None:
    """IPython's post_run_cell hook: note the outcome of a test cell."""
    info = getattr(result, "info", None)
    source = getattr(info, "raw_cell", None)
    if source:
        observe(source, result.error_before_exec or result.error_in_exec)


def install() -> bool:
    """Watch test cells in the running IPython (Jupyter, Colab); False outside IPython."""
    ipython = sys.modules.get("IPython")  # imported already in any IPython kernel or shell
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None:
        return False
    if not any(getattr(f, "__name__", "") == "_after_cell" for f in shell.events.callbacks["post_run_cell"]):
        shell.events.register("post_run_cell", _after_cell)
    return True


def report(section: str, width: int = 88) -> str:
    """The "where you stand" table of ``section`` as plain text."""
    exercises = EXERCISES[section]
    name_width = max(len(n) for n in exercises) + 2
    indent = " " * (name_width + 9)
    lines = [f"Where you stand in {section} {TITLES[section]}", "",
             f"{'exercise':<{name_width}} points  visible check", "-" * width]
    earned = 0
    for name, points in exercises.items():
        outcome = _outcomes.get(name, Outcome("not attempted", "its test cell has not run yet"))
        got = points if outcome.status == "passed" else 0
        earned += got
        head = f"{name:<{name_width}}{got:>3} / {points:<2} {outcome.status}"
        lines.append(head + (":" if outcome.message else ""))
        for paragraph in outcome.message.splitlines()[:6]:
            lines += textwrap.wrap(paragraph, width, initial_indent=indent, subsequent_indent=indent)
    total = sum(exercises.values())
    lines += ["-" * width,
              f"{'expected total':<{name_width}}{earned:>3} / {total:<2}  if grading agrees with "
              "the visible checks", ""]
    lines += textwrap.wrap(GRADING_ONLY, width)
    return "\n".join(lines)


def where_you_stand(section: str) -> None:
    """Print, for every exercise of ``section``: points, passed / failed / not attempted."""
    print(report(section))
