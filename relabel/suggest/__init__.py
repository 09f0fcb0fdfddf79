"""Suggestions: run a model over a dataset's images and store its answers as a model run.

The flow is images -> `adapters` (one model call, no policy) -> `protocols` (prompt, parse, map the answer to
classes, possibly through `textmap`) -> `runner` (selection, batching, concurrency, resume, progress) -> the
workspace's `predictions` table. Model names map to adapter classes in `adapters.REGISTRY`, imported lazily.
"""
