"""What the leads' Images tab and assignments cost: one grid page (load, filter, sort, 48 cached thumbnails) and the
queue's per-serve check of the assignments (one (count, newest id) query while nothing changed).

Example:
  python bench/bench_grid.py --images 600 --repeat 15
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from relabel.review.assignments import add_assignments
from relabel.review.studio import Studio
from tests.studio_workspace import build_workspace
from ui import grid_tab
from ui.grid_tab import ANY


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=600, help="photos beyond the six of the test workspace")
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        engine = build_workspace(Path(tmp) / "ws", extra=args.images)
        studio = Studio(engine, cache_dir=Path(tmp) / "cache", overlap=2)
        order = studio.queue.order
        add_assignments(engine, studio.dataset_id, "alice", image_ids=order[: len(order) // 2])

        def page() -> None:
            grid_tab.grid_values(studio, "lena", ANY, "", ANY, False, ANY, "disagreement", 1)

        page()  # thumbnails made once; what is measured is a page of cached ones
        grid_ms = median_ms(page, args.repeat)
        shared = studio.queue.shared
        assert shared is not None
        check_ms = median_ms(lambda: shared.assigned(order, studio.queue.evidence), args.repeat * 10)
        print(f"images {len(order)}, assigned {len(order) // 2}")
        print(f"grid page (48 thumbnails, sort by disagreement): median {grid_ms:.1f} ms")
        print(f"assignment check per serve (unchanged): median {check_ms:.2f} ms")


if __name__ == "__main__":
    main()
