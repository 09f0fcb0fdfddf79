"""The leads' event handlers as plain functions: (studio, logged-in user, form values) -> view values.

The tabs wire them to Gradio and pass the user from the server-side session (`gr.Request.username`), never from a
form field. Tests call them directly, without a server. Errors are RelabelError subclasses, shown as one-line
messages. The review and adjudication cards have their own handlers in `ui.card_api`.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from relabel.common.errors import InputError
from relabel.common.storable import storable_text
from relabel.review.studio import Studio
from ui import views
from ui.context import WorkspaceContext

NOT_CALIBRATED = "off"  # the calibration picker's first choice: the posteriors as fitted


def reload_queue(studio: Studio, user: str) -> str:
    """Rebuild the queue and the suggestions it weighs from the database (after imports or new suggestion runs)."""
    studio.require_lead(user)
    studio.refresh()
    counts = studio.queue.counts()
    return (
        f"queue rebuilt: {counts['images']} images, {counts['disputed']} disputed; suggestions from run "
        f"{studio.runs.name(studio.runs.suggestion)!r}, classifier run {studio.runs.name(studio.runs.classifier)!r}"
    )


def audit_log(ws: WorkspaceContext, user: str, who: str | None = None, limit: Any = 200) -> list[list[Any]]:
    """The newest decisions of the dataset (of one user, if `who`), newest first; leads only."""
    from relabel.review.cards import audit_events

    ws.require_lead(user)
    who = storable_text(who or "", "the user filter", max_length=64)
    n = int(limit or 200)
    if not 1 <= n <= 10_000:
        raise InputError(f"show between 1 and 10000 events, not {n}")
    with ws.engine.connect() as conn:
        events = audit_events(conn, ws.dataset_id, user=(who or "").strip() or None, limit=n)
    return views.audit_rows(ws.vocab, events)


def create_snapshot(
    studio: Studio,
    user: str,
    name: str,
    undecided: str,
    min_votes: Any,
    consensus: str | None = None,
    threshold: Any = None,
    calibrate: str | None = None,
) -> str:
    """A lead freezes a snapshot: `consensus` a name of `relabel.votes.posteriors.consensus_choices` (None: the studio's
    `relabel.decisions.rules.DEFAULT_RULE`); a vote-based one aggregates every vote source with the studio's decisions,
    at `threshold` (None: 0.9, calibrated 0.75), its posteriors first calibrated against `calibrate` (a label source or
    "adjudications"; None or `NOT_CALIBRATED`: not) with the original rule off, as `relabel snapshot create --calibrate`
    does. Returns the one-line result, with the calibration as the command prints it."""
    from relabel.decisions.rules import DEFAULT_RULE
    from relabel.snapshots.freeze import DEFAULT_UNDECIDED, consensus_defaults
    from relabel.snapshots.freeze import create_snapshot as create
    from relabel.votes.aggregation import METHODS
    from relabel.votes.fit import calibration_line

    studio.require_lead(user)
    if not (name or "").strip():
        raise InputError("give the snapshot a name")
    rule = consensus or DEFAULT_RULE
    against = None if calibrate in (None, "", NOT_CALIBRATED) else calibrate
    if against is not None and (rule not in METHODS or not METHODS[rule].probabilistic):
        raise InputError(f"calibration needs a probabilistic consensus (ds, one-coin), not {rule!r}")
    default_threshold, keep_original = consensus_defaults(against)
    summary = create(
        studio.engine,
        name.strip(),
        dataset=studio.dataset_name,
        undecided=undecided or DEFAULT_UNDECIDED,
        min_votes=int(min_votes or 1),
        created_by=user,
        consensus=rule,
        threshold=default_threshold if threshold is None else float(threshold),
        keep_original=keep_original,
        calibrate=against,
    )
    counts = ", ".join(f"{k} {v}" for k, v in summary.counts.items())
    message = f"snapshot {summary.name!r}: {summary.n_images} images ({counts}), hash {summary.content_hash[:12]}"
    if summary.consensus.get("calibration"):
        message += f"; {calibration_line(summary.consensus['calibration'])}"
    return message


def export_snapshot(studio: Studio, user: str, name: str, fmt: str, folder: Path) -> str:
    from relabel.exports.formats import export_format
    from relabel.exports.formats import export_snapshot as export

    studio.require_lead(user)
    if not (name or "").strip():
        raise InputError("pick a snapshot to export")
    out = folder / export_file_name(name, fmt, export_format(fmt).suffix, datetime.now())
    export(studio.engine, name.strip(), fmt=fmt, out=out, dataset=studio.dataset_name)
    return str(out)


def export_file_name(snapshot: str, fmt: str, suffix: str, when: datetime) -> str:
    """`SNAPSHOT-TIME.FORMAT.SUFFIX`, the format left out where the suffix already says it (`round-1-….csv`, not
    `.csv.csv`; `round-1-….real.json`). The snapshot name keeps letters, digits, `-` and `_`; anything else,
    a dot or a path separator included, becomes `_`, so the name cannot end in a suffix of its own."""
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in snapshot.strip())
    kind = "" if fmt == suffix else f".{fmt}"
    return f"{safe}-{when:%Y%m%d-%H%M%S}{kind}.{suffix}"
