"""How a vote source's answers on one (image, class) pair are packed into a `db.models.VotePair` row.

A pair's row holds two byte strings of equal count: `workers`, the answering workers' numbers in the source
(`db.models.VoteWorker.number`, ascending) as little-endian int32, and `answers`, one byte per answer (0 no,
1 maybe, 2 yes, `ANSWER_BYTES`). One row per pair instead of one per answer: ReaL's 924,810 answers are 184,962
rows. Pure Python here (the migration that packs older workspaces' rows); `relabel.votes.importing` packs and
`relabel.votes.scan` unpacks whole sources with numpy, in this same layout.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

WORKER_DTYPE = "<i4"  # numpy's name of the workers' layout
ANSWER_BYTES = {"no": 0, "maybe": 1, "yes": 2}  # the answer word (`db.enums.Answer`) -> its byte


def pack_pair(workers: Sequence[int], answers: Sequence[int]) -> tuple[bytes, bytes]:
    """The `workers` and `answers` bytes of one pair from its workers' numbers (ascending) and answer codes."""
    if len(workers) != len(answers):
        raise ValueError(f"a pair has {len(workers)} workers but {len(answers)} answers")
    return struct.pack(f"<{len(workers)}i", *workers), bytes(answers)


def unpack_pair(workers: bytes, answers: bytes) -> tuple[list[int], list[int]]:
    """The worker numbers and answer codes of one pair's row (the inverse of `pack_pair`)."""
    if len(workers) != 4 * len(answers):
        raise ValueError(f"a pair's row holds {len(workers)} worker bytes for {len(answers)} answers")
    return list(struct.unpack(f"<{len(answers)}i", workers)), list(answers)
