"""Measurements taken while a model runs, for the efficiency part E: peak memory, FLOPs, parameters, cost.

Peak RSS is the kernel's high-water mark (`VmHWM`). On Linux it is reset first (writing 5 to
/proc/self/clear_refs), so the peak belongs to the measured block: the loaded model, the batches and Python
itself. Elsewhere, or where the reset is refused, it is the process's peak since it started
(`resource.getrusage`), and the report says so. torch is imported only when the model already did.

What E reads as the model's memory (`model_memory`): the CUDA peak for a model on a GPU, the process's peak RSS
for a model on the CPU, and nothing for a model behind an API (its adapter names a `base_url`): the model runs on
a server, and this process's RSS is the client's, not the model's.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

CLEAR_REFS = Path("/proc/self/clear_refs")
STATUS = Path("/proc/self/status")


class PeakMemory:
    """Peak resident memory (bytes) and, when torch uses CUDA, peak CUDA memory over a `with` block."""

    def __init__(self) -> None:
        self.rss_bytes: int | None = None
        self.cuda_bytes: int | None = None
        self.scope = "process"

    def __enter__(self) -> PeakMemory:
        self.scope = "this run" if _reset_rss_peak() else "process"
        cuda = _cuda()
        if cuda is not None:
            cuda.reset_peak_memory_stats()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.rss_bytes = peak_rss_bytes()
        cuda = _cuda()
        self.cuda_bytes = int(cuda.max_memory_allocated()) if cuda is not None else None


def _reset_rss_peak() -> bool:
    try:
        CLEAR_REFS.write_text("5")
        return True
    except OSError:
        return False


def peak_rss_bytes() -> int | None:
    """The process's resident-memory high-water mark in bytes, or None where it cannot be read."""
    try:
        for line in STATUS.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        import resource
    except ImportError:  # Windows
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)  # bytes on macOS, KiB on Linux


def _cuda() -> Any:
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return None
    return torch.cuda


def count_flops(run_one: Callable[[], object]) -> tuple[float | None, str]:
    """FLOPs of `run_one()` (one image through the model) with torch's FlopCounterMode, and how they were counted.

    None, with the reason, for a model that does not run on torch or whose operators the counter cannot follow.
    """
    if "torch" not in sys.modules:
        return None, "not counted: the model does not run on torch"
    try:
        from torch.utils.flop_counter import FlopCounterMode

        with FlopCounterMode(display=False) as counter:
            run_one()
        total = float(counter.get_total_flops())
    except Exception as exc:  # the counter is best effort: a missing FLOP count is reported, never fatal
        return None, f"not counted: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    if total <= 0:
        return None, "not counted: torch's FlopCounterMode saw no convolution or matrix product"
    return total, "torch FlopCounterMode on one image (2 per multiply-add; convolutions and matrix products)"


def describe_adapter(adapter: Any) -> dict[str, Any]:
    """The adapter's own description (device, parameters, ...), or {} when it has none."""
    try:
        return dict(adapter.describe())
    except Exception:  # a description is for the record only; a model that cannot describe itself still runs
        return {}


def runs_remotely(description: dict[str, Any]) -> bool:
    """Whether the model runs in another process than this one: its adapter talks to a server (`base_url`)."""
    return bool(description.get("base_url"))


def model_memory(
    device: str, cuda_peak_bytes: int | None, peak_rss_bytes: int | None, description: dict[str, Any]
) -> tuple[int | None, str]:
    """The model's peak memory in bytes, and where it was read; None (with the reason) where it was not measured."""
    if runs_remotely(description):
        return None, "unknown: the model runs on a server; this process's memory is the client's"
    if device.startswith("cuda"):
        return (cuda_peak_bytes or None), "CUDA peak" if cuda_peak_bytes else "unknown: no CUDA peak recorded"
    return (peak_rss_bytes or None), "process peak RSS" if peak_rss_bytes else "unknown: no peak RSS recorded"


def cost_per_1k_images(adapter: Any, images_per_request: int = 1) -> float | None:
    """Money per 1,000 images over the requests the adapter paid for, at its token prices (`estimated_cost()`);
    None when it has no prices or paid for no request (every answer came from the cache)."""
    estimate = getattr(adapter, "estimated_cost", None)
    cost = estimate() if callable(estimate) else None
    calls = int(getattr(adapter, "usage_totals", {}).get("calls", 0))
    if cost is None or calls <= 0:
        return None
    return 1000 * float(cost) / (calls * max(1, images_per_request))
