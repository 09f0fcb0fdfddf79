"""The studio's handlers called directly, without a server: decisions, blind review, roles, undo, adjudication,
snapshots, and untrusted text."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from sqlalchemy import insert, select
from sqlmodel import Session

from db.enums import PredictionStatus, SuggestionAction, Verdict
from db.models import Annotation, ModelRun, Prediction, User
from relabel.errors import ConflictError, InputError, NotFoundError, RelabelError
from relabel.review.display import StoredImage, source_path
from relabel.review.studio import Studio
from relabel.vocabulary import load_builtin
from tests.studio.workspace import build_workspace
from ui import handlers, views

VOCAB = load_builtin()
XSS = '<img src=x onerror="alert(1)"><script>alert(2)</script>'


@pytest.fixture
def studio(db_url: str, tmp_path: Path) -> Studio:
    engine = build_workspace(tmp_path, db_url)
    return Studio(engine, cache_dir=tmp_path / "cache", overlap=2)


def rows(studio: Studio, user: str | None = None) -> list[Annotation]:
    with Session(studio.engine) as s:
        query = select(Annotation).order_by(Annotation.id)
        if user:
            query = query.join(User, User.id == Annotation.user_id).where(User.name == user)
        return list(s.scalars(query))


def image_of(view) -> int:  # type: ignore[no-untyped-def]
    return handlers.parse_card_key(view.card_key)[0]


class TestDecisions:
    def test_a_quick_action_is_stored_for_the_session_user_with_time_and_suggestion_outcome(
        self, studio: Studio
    ) -> None:
        first = handlers.next_card(studio, "alice")
        assert "missile" in first.original  # the most disputed image comes first
        assert first.classifier and next(iter(first.classifier)).startswith("projectile")
        following = handlers.decide(studio, "alice", first.card_key, "original")
        [row] = rows(studio, "alice")
        assert row.image_id == image_of(first) and row.verdict is Verdict.labels
        assert row.classes == [VOCAB.resolve("n03773504")]
        assert row.seconds_on_item is not None and 0 <= row.seconds_on_item < 60
        assert row.suggestion_action is SuggestionAction.rejected and row.suggestion_id is not None
        assert image_of(following) != image_of(first) and "saved" in following.status

    def test_a_resent_decision_is_stored_once(self, studio: Studio) -> None:
        card = handlers.next_card(studio, "alice")
        handlers.decide(studio, "alice", card.card_key, "suggestion")
        again = handlers.decide(studio, "alice", card.card_key, "suggestion")
        assert len(rows(studio)) == 1 and "already saved" in again.status
        assert rows(studio)[0].suggestion_action is SuggestionAction.accepted

    def test_multi_label_no_class_fits_unclear_flags_and_note(self, studio: Studio) -> None:
        cards = []
        for action, classes in (("labels", [281, 285]), ("none_fit", []), ("unclear", [])):
            card = handlers.next_card(studio, "alice")
            cards.append(card)
            handlers.decide(studio, "alice", card.card_key, action, classes, ["drawing"], "  a note  ")
        got = rows(studio, "alice")
        assert [(r.verdict, r.classes) for r in got] == [
            (Verdict.labels, [281, 285]),
            (Verdict.none_fit, []),
            (Verdict.unclear, []),
        ]
        assert all(r.flags == ["drawing"] and r.note == "a note" for r in got)
        assert got[0].suggestion_action is SuggestionAction.rejected  # projectile was suggested, not picked

    def test_both_takes_the_original_and_the_suggestion(self, studio: Studio) -> None:
        card = handlers.next_card(studio, "alice")  # missile, suggested projectile
        handlers.decide(studio, "alice", card.card_key, "both")
        assert rows(studio)[0].classes == [VOCAB.resolve("n03773504"), VOCAB.resolve("n04008634")]
        assert rows(studio)[0].suggestion_action is SuggestionAction.edited

    @pytest.mark.parametrize(
        ("action", "classes", "key", "message"),
        [
            ("maybe", [], None, "unknown action 'maybe'"),
            ("labels", [], None, "pick at least one class"),
            ("labels", [1000], None, "outside 0..999"),
            ("original", [], "nonsense", "no card is open"),
        ],
    )
    def test_bad_decisions_are_refused_and_store_nothing(
        self, studio: Studio, action: str, classes: list[int], key: str | None, message: str
    ) -> None:
        card = handlers.next_card(studio, "alice")
        with pytest.raises(RelabelError, match=message):
            handlers.decide(studio, "alice", key or card.card_key, action, classes)
        assert rows(studio) == []

    def test_a_token_belongs_to_its_user_and_image(self, studio: Studio) -> None:
        card = handlers.next_card(studio, "alice")
        with pytest.raises(ConflictError, match="another card"):
            handlers.decide(studio, "bob", card.card_key, "original")
        image_id, token = handlers.parse_card_key(card.card_key)
        with pytest.raises(ConflictError, match="another card"):
            handlers.decide(studio, "alice", f"{image_id + 1}:{token}", "original")
        with pytest.raises(InputError, match="at most 2000"):
            handlers.decide(studio, "alice", card.card_key, "original", note="x" * 2001)
        assert rows(studio) == []

    def test_a_card_served_before_a_restart_still_saves(self, studio: Studio, tmp_path: Path) -> None:
        card = handlers.next_card(studio, "alice")
        restarted = Studio(studio.engine, cache_dir=tmp_path / "cache", overlap=2)
        handlers.decide(restarted, "alice", card.card_key, "original")
        [row] = rows(restarted)
        assert row.seconds_on_item is None and row.classes == [VOCAB.resolve("n03773504")]


class TestBlindReviewAndUndo:
    def test_others_decisions_stay_hidden_until_you_decide(self, studio: Studio) -> None:
        alice = handlers.next_card(studio, "alice")
        bob = handlers.next_card(studio, "bob")
        assert image_of(alice) == image_of(bob)  # overlap 2: both review the top image
        handlers.decide(studio, "alice", alice.card_key, "none_fit", note="only a launcher")
        reopened, token = studio.open_card("bob", image_of(bob))
        assert handlers.render(studio, reopened, token, "").others == []
        assert all(e[2] != "alice" for e in handlers.history(studio, "bob", bob.card_key))
        handlers.decide(studio, "bob", bob.card_key, "original")
        card, token = studio.open_card("bob", image_of(bob))
        others = handlers.render(studio, card, token, "").others
        assert [o[0] for o in others] == ["alice"] and "no class fits" in others[0][1]

    def test_undo_reopens_the_image_and_is_an_event_in_the_history(self, studio: Studio) -> None:
        card = handlers.next_card(studio, "alice")
        handlers.decide(studio, "alice", card.card_key, "unclear")
        back = handlers.undo(studio, "alice")
        assert image_of(back) == image_of(card) and "undid" in back.status
        assert [r.verdict for r in rows(studio)] == [Verdict.unclear, Verdict.retract]
        history = handlers.history(studio, "alice", back.card_key)
        assert [h[3] for h in history] == ["unclear (X)", f"undo of #{rows(studio)[0].id}"]
        assert [h[4] for h in history] == ["", "unclear (X)"]  # what each event replaced
        assert handlers.undo(studio, "alice").status == "nothing to undo"

    def test_skip_moves_on_without_writing(self, studio: Studio) -> None:
        card = handlers.next_card(studio, "alice")
        after = handlers.skip(studio, "alice", card.card_key)
        assert image_of(after) != image_of(card) and rows(studio) == []


class TestLeads:
    def test_lead_actions_are_refused_for_annotators(self, studio: Studio, tmp_path: Path) -> None:
        from ui.dashboard_tab import dashboard_values

        card = handlers.next_card(studio, "alice")
        for call in (
            lambda: handlers.adjudication_list(studio, "alice"),
            lambda: handlers.open_for_adjudication(studio, "alice", None),
            lambda: handlers.adjudicate(studio, "alice", card.card_key, "original"),
            lambda: handlers.create_snapshot(studio, "alice", "s1", "keep", 1),
            lambda: handlers.export_snapshot(studio, "alice", "s1", "real", tmp_path),
            lambda: dashboard_values(studio, "alice"),
        ):
            with pytest.raises(ConflictError, match="'alice' is an annotator"):
                call()
        assert rows(studio) == []

    def test_disagreement_is_adjudicated_then_frozen_and_exported(self, studio: Studio, tmp_path: Path) -> None:
        alice = handlers.next_card(studio, "alice")
        bob = handlers.next_card(studio, "bob")
        handlers.decide(studio, "alice", alice.card_key, "original")
        handlers.decide(studio, "bob", bob.card_key, "suggestion")
        disputed = handlers.adjudication_list(studio, "lena")
        assert [d[0] for d in disputed] == [image_of(alice)]
        card = handlers.open_for_adjudication(studio, "lena", None)
        assert sorted(o[0] for o in card.others) == ["alice", "bob"]  # a lead sees every decision
        after = handlers.adjudicate(studio, "lena", card.card_key, "labels", [VOCAB.resolve("n04008634")])
        assert "adjudicated" in after.status and handlers.adjudication_list(studio, "lena") == []
        assert rows(studio, "lena")[0].is_adjudication
        message = handlers.create_snapshot(studio, "lena", "round-1", "keep", 1)
        assert "snapshot 'round-1'" in message and "B 1" in message
        path = Path(handlers.export_snapshot(studio, "lena", "round-1", "real", tmp_path / "exports"))
        labels = json.loads(path.read_text())
        assert len(labels) == 6 and [VOCAB.resolve("n04008634")] in labels

    def test_reloading_the_queue_picks_up_a_new_suggestion_run(self, studio: Studio) -> None:
        assert studio.runs.suggestion is None
        with Session(studio.engine) as s:
            run = ModelRun(dataset_id=studio.dataset_id, name="vlm@ow", model="vlm", protocol="ow", params={})
            s.add(run)
            s.flush()
            s.execute(
                insert(Prediction),
                [
                    {
                        "run_id": run.id,
                        "image_id": i,
                        "classes": [0],
                        "raw_output": "a tench",
                        "reason": "",
                        "status": PredictionStatus.ok,
                    }
                    for i in range(1, 7)
                ],
            )
            s.commit()
        with pytest.raises(ConflictError):
            handlers.reload_queue(studio, "alice")
        assert "'vlm@ow'" in handlers.reload_queue(studio, "lena")
        assert "answer: a tench" in handlers.next_card(studio, "alice").suggestion

    def test_the_audit_trail_lists_every_event_newest_first(self, studio: Studio) -> None:
        card = handlers.next_card(studio, "alice")
        handlers.decide(studio, "alice", card.card_key, "unclear")
        handlers.undo(studio, "alice")
        bob = handlers.next_card(studio, "bob")
        handlers.decide(studio, "bob", bob.card_key, "none_fit", note=XSS)
        log = handlers.audit_log(studio, "lena")
        assert [(r[2], r[4]) for r in log] == [
            ("bob", "no class fits (Z)"),
            ("alice", f"undo of #{log[2][0]}"),
            ("alice", "unclear (X)"),
        ]
        assert log[0][6] == XSS and log[0][3].endswith(".jpg")
        assert [r[2] for r in handlers.audit_log(studio, "lena", "alice", 1)] == ["alice"]
        with pytest.raises(ConflictError):
            handlers.audit_log(studio, "bob")

    def test_dashboard_numbers_and_plots(self, studio: Studio) -> None:
        from ui.dashboard_tab import dashboard_values

        for user in ("alice", "bob"):
            card = handlers.next_card(studio, user)
            handlers.decide(studio, user, card.card_key, "original" if user == "alice" else "none_fit")
        summary, categories, throughput, suggestions, annotators, agreement, pairs, classes = dashboard_values(
            studio, "lena"
        )
        assert "6 reviewable images" in summary and "disputed 1" in summary
        assert categories.axes and throughput.axes  # matplotlib figures
        assert suggestions[0][0] == "all runs" and suggestions[0][1] == 2
        assert {a[0] for a in annotators} == {"alice", "bob"}
        assert pairs[0][:3] == ["alice", "bob", 1] and "Fleiss" in agreement
        assert classes[0][4] == 1  # the disputed class first


class TestUntrustedText:
    def test_html_in_model_output_and_notes_is_passed_on_as_plain_text(self, studio: Studio) -> None:
        with Session(studio.engine) as s:
            run = ModelRun(
                dataset_id=studio.dataset_id, name=XSS, model=XSS, protocol="ow", params={}, tool_version="t"
            )
            s.add(run)
            s.flush()
            s.execute(
                insert(Prediction),
                [
                    {
                        "run_id": run.id,
                        "image_id": i,
                        "classes": [281],
                        "raw_output": XSS,
                        "reason": "",
                        "status": PredictionStatus.ok,
                        "details": {"note": XSS},
                    }
                    for i in range(1, 7)
                ],
            )
            s.commit()
        fresh = Studio(studio.engine, cache_dir=studio.display.folder.parent)
        card = handlers.next_card(fresh, "alice")
        assert f"answer: {XSS}" in card.suggestion and XSS in card.suggestion  # verbatim, not escaped or dropped
        handlers.decide(fresh, "alice", card.card_key, "none_fit", note=XSS)
        card2, token = fresh.open_card("bob", image_of(card))
        history = handlers.history(fresh, "alice", f"{image_of(card)}:{token}")
        assert history[0][6] == XSS

    def test_the_card_is_rendered_only_by_text_components(self) -> None:
        import gradio as gr

        from ui.app import ReviewOutputs

        with gr.Blocks():
            out = ReviewOutputs(views.picker_choices(VOCAB))
        text_like = (gr.Textbox, gr.Label, gr.Dataframe, gr.Image, gr.Gallery)
        assert all(isinstance(c, text_like) for c in out.components())
        assert not any(isinstance(c, (gr.HTML, gr.Markdown)) for c in out.components())


class TestImages:
    def test_display_images_are_resized_upright_copies(self, studio: Studio) -> None:
        card = handlers.next_card(studio, "alice")
        from PIL import Image

        with Image.open(card.image) as shown:
            assert shown.format == "JPEG" and max(shown.size) <= 1024
        full = handlers.full_resolution(studio, "alice", card.card_key)
        assert full and Path(full).exists()

    def test_files_a_browser_shows_correctly_are_linked_as_they_are_others_are_converted(self, tmp_path: Path) -> None:
        from PIL import Image

        from relabel.review.display import DisplayCache

        root = tmp_path / "root"
        root.mkdir()
        Image.new("RGB", (300, 200), (10, 200, 30)).save(root / "plain.jpg")
        Image.new("CMYK", (300, 200)).save(root / "cmyk.jpg")
        cache = DisplayCache(tmp_path / "cache", side=256)
        plain = StoredImage(1, str(root), "plain.jpg", "a" * 64, "JPEG", "RGB", 300, 200, None)
        # full resolution: the file itself, linked into the cache under an image suffix (the root is never served)
        original = cache.path_for(plain, side=0)
        assert original.is_relative_to(tmp_path / "cache") and original.suffix == ".jpg"
        assert original.read_bytes() == (root / "plain.jpg").read_bytes()
        assert cache.path_for(plain, side=0) == original  # made once
        shrunk = cache.path_for(plain)  # larger than the display side: a resized copy
        cmyk = cache.path_for(StoredImage(2, str(root), "cmyk.jpg", "b" * 64, "JPEG", "CMYK", 300, 200, None), side=0)
        rotated = cache.path_for(StoredImage(3, str(root), "plain.jpg", "c" * 64, "JPEG", "RGB", 200, 300, 6), side=0)
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
