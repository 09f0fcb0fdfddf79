"""The garbage collector paused while many small objects are built."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector (reference counting still frees memory), then restore its state.

    Building some 10^5 small objects, none in a reference cycle, set off repeated full collections over the
    growing heap that found nothing: a third of the dashboard's time on 150,000 events.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
