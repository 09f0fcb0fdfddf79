"""The garbage collector paused while many small objects are built, and during a command's start-up."""

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


_paused_for_start_up = False


def pause_for_start_up() -> None:
    """Pause the cyclic collector until `start_up_done`: a command's start-up (SQLAlchemy, SQLModel, pydantic, the
    schema classes) builds ~120,000 long-lived objects and almost no cycles (~600 objects of garbage): the
    collections it set off found nothing and cost 0.07-0.1 CPU s of the 0.5-0.6 s it takes."""
    global _paused_for_start_up
    if gc.isenabled():
        gc.disable()
        _paused_for_start_up = True


def start_up_done(*, freeze: bool = True) -> None:
    """End the pause of `pause_for_start_up` (nothing when none is on), then the collector runs as before.

    With `freeze` (the workspace's database is open: the command's work begins), the objects built so far are
    first moved out of the collector's sight (`gc.freeze`): no full collection during the work walks them again,
    and none walks them at interpreter exit either, where a collection over them was most of a command's exit
    (0.3 CPU s of `python -c "import db.models"`). They live until the process ends in any case; the engine among
    them is closed explicitly (`Settings.close`), since the exit no longer closes it."""
    global _paused_for_start_up
    if _paused_for_start_up:
        _paused_for_start_up = False
        if freeze:
            gc.freeze()
        gc.enable()
