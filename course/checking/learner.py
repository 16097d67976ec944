"""Calling learner code and checking what it returns: the same messages on both sides."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from course.checking.failure import CheckFailure, NotAttempted, explain_exception, raising_definition


def call_learner(what: str, where: str, function: Callable, *args, **kwargs):
    """Call learner code: NotImplementedError becomes :class:`NotAttempted`, any other error
    a :class:`CheckFailure` that names ``where`` (a case) and keeps the error as its cause."""
    try:
        return function(*args, **kwargs)
    except CheckFailure:
        raise
    except NotImplementedError as error:
        raise NotAttempted(what.split(".")[0].split("(")[0], raising_definition(error)) from None
    except Exception as error:  # noqa: BLE001 - any learner error becomes a message
        raise CheckFailure(explain_exception(what, error, where)) from error


def _in(where: str) -> str:
    return f" in {where}" if where else ""


def expect_tensor(value, what: str, where: str = "") -> torch.Tensor:
    """Fail unless ``value`` is a tensor."""
    if not isinstance(value, torch.Tensor):
        raise CheckFailure(f"{what} should be a torch.Tensor, but is a {type(value).__name__}{_in(where)}.")
    return value


def expect_tuple(value, names: Sequence[str], what: str, where: str = "") -> tuple:
    """Fail unless ``value`` is a tuple of tensors, one per name (such as output, weights)."""
    if not isinstance(value, tuple) or len(value) != len(names):
        kind = type(value).__name__ + (f" of length {len(value)}" if isinstance(value, tuple) else "")
        raise CheckFailure(f"{what} should return a tuple ({', '.join(names)}), but returned a {kind}.")
    return tuple(expect_tensor(v, f"{what}'s {n}", where) for v, n in zip(value, names))


def expect_pair(value, what: str, where: str = "") -> tuple:
    """``(output, weights)``, as attention returns them."""
    return expect_tuple(value, ("output", "weights"), what, where)


def expect_shape(value, expected: Sequence[int], what: str, where: str = "") -> None:
    """Fail unless ``value`` is a tensor of the expected shape."""
    expect_tensor(value, what, where)
    if tuple(value.shape) != tuple(expected):
        raise CheckFailure(f"{what}{_in(where)} should have shape {tuple(expected)}, but has shape "
                           f"{tuple(value.shape)}.")


def expect_value_error(what: str, call: Callable[[], object], situation: str) -> None:
    """Fail unless ``call`` raises ValueError (the contract's error for bad arguments)."""
    try:
        call()
    except ValueError:
        return
    except NotImplementedError as error:
        raise NotAttempted(what.split(".")[0].split("(")[0], raising_definition(error)) from None
    except Exception as error:  # noqa: BLE001 - learner code
        raise CheckFailure(f"{what} should raise ValueError {situation}, but raised "
                           f"{type(error).__name__}: {error}") from None
    raise CheckFailure(f"{what} should raise ValueError {situation}, but raised nothing.")
