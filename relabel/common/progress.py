"""Progress bars for long jobs: rate and ETA on stderr, silent when asked or when nobody watches."""

from __future__ import annotations

import sys
from typing import Any, Protocol


class Progress(Protocol):
    def update(self, n: int = 1) -> Any: ...
    def set_postfix_str(self, s: str) -> Any: ...
    def close(self) -> Any: ...


class NullProgress:
    def update(self, n: int = 1) -> None:
        pass

    def set_postfix_str(self, s: str) -> None:
        pass

    def close(self) -> None:
        pass


def finish(bar: Progress, message: str) -> None:
    """End a bar whose job stopped early because it was done (an EM fit that converged before its step limit): the
    bar reads full at the steps taken, with `message` ("converged after 54 steps"), not as an abort at 54/500."""
    if isinstance(bar, NullProgress):
        return
    steps = getattr(bar, "n", None)
    if steps is not None:
        bar.total = steps  # type: ignore[attr-defined]
    bar.set_postfix_str(message)


def progress_bar(total: int, desc: str, *, enabled: bool = True, unit: str = "img") -> Progress:
    """A tqdm bar (count, rate, ETA) on stderr, or a no-op when disabled."""
    if not enabled:
        return NullProgress()
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, dynamic_ncols=True, mininterval=0.5)
