"""The leads' handlers called directly, without a server: roles, adjudication then snapshot and export, queue
reloads, the audit trail, the dashboard; and the display cache."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlmodel import Session

from db.models import Snapshot
from relabel.common.errors import ConflictError, InputError, NotFoundError
from relabel.common.vocabulary import load_builtin
from relabel.review.display import StoredImage, source_path
from relabel.review.studio import Studio
from relabel.sources.bulk import store_run
from tests.studio_workspace import build_workspace, stored_annotations
from ui import card_api, handlers
from ui.context import WorkspaceContext

VOCAB = load_builtin()
XSS = '<img src=x onerror="alert(1)"><script>alert(2)</script>'


@pytest.fixture
def studio(db_url: str, tmp_path: Path) -> Studio:
    engine = build_workspace(tmp_path, db_url)
    return Studio(engine, cache_dir=tmp_path / "cache", overlap=2)


def next_card(studio: Studio, user: str) -> dict[str, Any]:
    card = card_api.next_card(studio, user, {})["card"]
    assert card is not None
    return card


def decide(studio: Studio, user: str, card: dict[str, Any], action: str, **form: Any) -> dict[str, Any]:
    return card_api.decide(studio, user, {"key": card["key"], "action": action, **form})


class TestLeads:
    def test_lead_actions_are_refused_for_annotators(self, studio: Studio, tmp_path: Path) -> None:
        from ui.dashboard_tab import dashboard_values

        for call in (
            lambda: handlers.create_snapshot(studio, "alice", "s1", "keep", 1),
            lambda: handlers.export_snapshot(studio, "alice", "s1", "real", tmp_path),
            lambda: dashboard_values(WorkspaceContext.of(studio, tmp_path), "alice"),
        ):
            with pytest.raises(ConflictError, match="'alice' is an annotator"):
                call()
        assert stored_annotations(studio) == []

    def test_disagreement_is_adjudicated_then_frozen_and_exported(self, studio: Studio, tmp_path: Path) -> None:
        alice, bob = next_card(studio, "alice"), next_card(studio, "bob")
        decide(studio, "alice", alice, "original")
        decide(studio, "bob", bob, "suggestion")
        board = card_api.adjudication_boot(studio, "lena", {})
        assert [d["image_id"] for d in board["list"]] == [alice["image_id"]]
        after = card_api.adjudicate(
            studio, "lena", {"key": board["card"]["key"], "action": "labels", "classes": [VOCAB.resolve("n04008634")]}
        )
        assert "saved" in after["message"] and after["list"] == []
        assert stored_annotations(studio, "lena")[0].is_adjudication
        message = handlers.create_snapshot(studio, "lena", "round-1", "keep", 1)
        assert "snapshot 'round-1'" in message and "B 1" in message
        path = Path(handlers.export_snapshot(studio, "lena", "round-1", "jsonl", tmp_path / "exports"))
        labels = [json.loads(line)["labels"] for line in path.read_text().splitlines()]
        assert len(labels) == 6 and [VOCAB.resolve("n04008634")] in labels
        with pytest.raises(InputError, match="not the full val set"):  # real.json is by position in ILSVRC-2012 val
            handlers.export_snapshot(studio, "lena", "round-1", "real", tmp_path / "exports")
        voted = handlers.create_snapshot(studio, "lena", "round-1-ds", "keep", 1, "ds", 0.9)
        assert "snapshot 'round-1-ds'" in voted
        with Session(studio.engine) as s:
            settings = s.scalar(select(Snapshot.consensus).where(Snapshot.name == "round-1-ds"))
        assert settings["rule"] == "ds" and settings["threshold"] == 0.9
        with pytest.raises(NotFoundError, match="unknown consensus rule 'nope'"):
            handlers.create_snapshot(studio, "lena", "round-1-x", "keep", 1, "nope", 0.9)

    def test_reloading_the_queue_picks_up_a_new_suggestion_run(self, studio: Studio) -> None:
        assert studio.runs.suggestion is None
        with Session(studio.engine) as s:
            answers = [{"image_id": i, "classes": [0], "raw_output": "a tench"} for i in range(1, 7)]
            store_run(s, dataset_id=studio.dataset_id, name="vlm@ow", model="vlm", protocol="ow", predictions=answers)
            s.commit()
        with pytest.raises(ConflictError):
            handlers.reload_queue(studio, "alice")
        assert "'vlm@ow'" in handlers.reload_queue(studio, "lena")
        assert next_card(studio, "alice")["suggestion"]["answer"] == "a tench"

    def test_the_audit_trail_lists_every_event_newest_first(self, studio: Studio, tmp_path: Path) -> None:
        decide(studio, "alice", next_card(studio, "alice"), "unclear")
        card_api.undo(studio, "alice", {})
        decide(studio, "bob", next_card(studio, "bob"), "none_fit", note=XSS)
        ws = WorkspaceContext.of(studio, tmp_path)
        log = handlers.audit_log(ws, "lena")
        assert [(r[2], r[4]) for r in log] == [
            ("bob", "no class fits (Z)"),
            ("alice", f"undo of #{log[2][0]}"),
            ("alice", "unclear (X)"),
        ]
        assert log[0][6] == XSS and log[0][3].endswith(".jpg")
        assert [r[2] for r in handlers.audit_log(ws, "lena", "alice", 1)] == ["alice"]
        with pytest.raises(ConflictError):
            handlers.audit_log(ws, "bob")

    def test_dashboard_numbers_and_plots(self, studio: Studio, tmp_path: Path) -> None:
        from ui.dashboard_tab import dashboard_values

        for user in ("alice", "bob"):
            decide(studio, user, next_card(studio, user), "original" if user == "alice" else "none_fit")
        summary, categories, throughput, suggestions, annotators, agreement, pairs, classes = dashboard_values(
            WorkspaceContext.of(studio, tmp_path), "lena"
        )
        assert "6 reviewable images" in summary and "disputed 1" in summary
        assert categories.axes and throughput.axes  # matplotlib figures
        assert suggestions[0][0] == "all runs" and suggestions[0][1] == 2
        assert {a[0] for a in annotators} == {"alice", "bob"}
        assert pairs[0][:3] == ["alice", "bob", 1] and "Fleiss" in agreement
        assert classes[0][4] == 1  # the disputed class first

    def test_suggestion_trust_counts_the_decisions_made_with_a_suggestion(self, studio: Studio, tmp_path: Path) -> None:
        from ui.dashboard_tab import trust_values

        ws = WorkspaceContext.of(studio, tmp_path)
        line, rows = trust_values(ws, "lena")
        assert rows == [] and "no standing decision" in line
        for user in ("alice", "bob"):
            decide(studio, user, next_card(studio, user), "suggestion" if user == "alice" else "none_fit")
        line, rows = trust_values(ws, "lena")
        by_run = [r for r in rows if r[0] == "run"]
        assert line.startswith("2 standing decisions") and len(by_run) == 1
        assert by_run[0][2] == 2 and by_run[0][3].startswith("50 % (") and by_run[0][5].startswith("50 % (")
        with pytest.raises(ConflictError):
            trust_values(ws, "alice")


class TestImages:
    def test_display_images_are_served_from_the_cache(self, studio: Studio) -> None:
        card = next_card(studio, "alice")
        from PIL import Image

        with Image.open(Path(card["url"].removeprefix("gradio_api/file="))) as shown:
            assert shown.format == "JPEG" and max(shown.size) <= 1024

    def test_files_a_browser_shows_correctly_are_linked_as_they_are_others_are_converted(self, tmp_path: Path) -> None:
        from PIL import Image

        from relabel.review.display import DisplayCache

        root = tmp_path / "root"
        root.mkdir()
        Image.new("RGB", (300, 200), (10, 200, 30)).save(root / "plain.jpg")
        Image.new("CMYK", (300, 200)).save(root / "cmyk.jpg")
        cache = DisplayCache(tmp_path / "cache", side=256)
        plain_sha, cmyk_sha = (hashlib.sha256((root / n).read_bytes()).hexdigest() for n in ("plain.jpg", "cmyk.jpg"))
        plain = StoredImage(1, str(root), "plain.jpg", plain_sha, "JPEG", "RGB", 300, 200, None)
        # full resolution: the file itself, copied into the cache under an image suffix (the root is never served)
        original = cache.path_for(plain, side=0)
        assert original.is_relative_to(tmp_path / "cache") and original.suffix == ".jpg"
        assert original.read_bytes() == (root / "plain.jpg").read_bytes()
        assert cache.path_for(plain, side=0) == original  # made once
        shrunk = cache.path_for(plain)  # larger than the display side: a resized copy
        cmyk = cache.path_for(StoredImage(2, str(root), "cmyk.jpg", cmyk_sha, "JPEG", "CMYK", 300, 200, None), side=0)
        rotated = cache.path_for(StoredImage(3, str(root), "plain.jpg", plain_sha, "JPEG", "RGB", 200, 300, 6), side=0)
        for path in (shrunk, cmyk, rotated):
            assert path.is_relative_to(tmp_path / "cache")
            with Image.open(path) as shown:
                assert shown.mode == "RGB" and max(shown.size) <= (256 if path == shrunk else 300)

    def test_a_file_that_resolves_outside_the_dataset_root_is_refused(self, tmp_path: Path) -> None:
        root = tmp_path / "root"
        root.mkdir()
        secret = tmp_path / "secret.jpg"
        secret.write_bytes(b"x")
        os.symlink(secret, root / "link.jpg")
        with pytest.raises(InputError, match="outside the dataset root"):
            source_path(StoredImage(1, str(root), "link.jpg", None))
        with pytest.raises(InputError, match="outside the dataset root"):
            source_path(StoredImage(1, str(root), "../secret.jpg", None))
        with pytest.raises(NotFoundError, match="not on disk"):
            source_path(StoredImage(1, str(root), "gone.jpg", None))
