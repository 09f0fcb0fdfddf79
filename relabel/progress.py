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


def progress_bar(total: int, desc: str, *, enabled: bool = True, unit: str = "img") -> Progress:
    """A tqdm bar (count, rate, ETA) on stderr, or a no-op when disabled."""
    if not enabled:
        return NullProgress()
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, dynamic_ncols=True, mininterval=0.5)
