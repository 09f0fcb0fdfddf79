"""Prior label sources: ReaL, Shankar, MTurk and generic tables; all-or-nothing imports."""

from __future__ import annotations

import codecs
import json
import re
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlmodel import Session

from db.models import Label, LabelSource
from relabel.common.errors import ConflictError, InputError, NotFoundError
from relabel.ingest import ingest_dataset, plan_ingest
from relabel.ingest.layouts import LayoutOptions
from relabel.sources.labels import (
    import_source,
    mturk_majority,
    parse_csv,
    parse_jsonl,
    parse_mturk,
    parse_real,
    parse_shankar,
)
from tests import images
from tests.conftest import shared


def val_dataset(engine, vocab, tmp_path: Path, numbers: list[int]) -> None:
    """A dataset of ImageNet val images `numbers` (pixels of the first one only)."""
    root = tmp_path / "val"
    images.photo(root / f"ILSVRC2012_val_{numbers[0]:08d}.JPEG")
    rows = "".join(f"ILSVRC2012_val_{n:08d},{vocab.classes[n % 1000].wnid} 0 0 1 1\n" for n in numbers)
    (tmp_path / "loc.csv").write_text("ImageId,PredictionString\n" + rows)
    plan = plan_ingest(root, vocab, "imagenet-val", LayoutOptions(labels_file=tmp_path / "loc.csv"))
    ingest_dataset(engine, plan, dataset="val", root=root, vocab=vocab, show_progress=False, workers=1)


def labels_of(engine, source: str) -> dict[int, list[int]]:
    with Session(engine) as s:
        src = s.scalars(select(LabelSource).where(LabelSource.name == source)).one()
        return dict(s.execute(select(Label.image_id, Label.classes).where(Label.source_id == src.id)).all())


def test_mturk_majority_counts_match_the_published_numbers(vocab) -> None:
    rows = list(parse_mturk(shared("imagenet-val", "mturk_label_errors.json"), vocab))
    assert len(rows) == 5440
    assert Counter(r.category for r in rows) == {"A": 2524, "B": 1428, "M": 597, "Z": 293, "X": 598}


def test_mturk_labels_and_certainty() -> None:
    assert mturk_majority({"given": 1, "guessed": 3, "both": 1, "neither": 0}) == "guessed"
    assert mturk_majority({"given": 2, "guessed": 2, "both": 1, "neither": 0}) is None


def test_mturk_row_shape(vocab, tmp_path: Path) -> None:
    rec = [
        {
            "id": 7,
            "given_original_label": 3,
            "our_guessed_label": 9,
            "mturk": {"given": 0, "guessed": 1, "both": 3, "neither": 1},
        }
    ]
    (tmp_path / "m.json").write_text(json.dumps(rec))
    (row,) = parse_mturk(tmp_path / "m.json", vocab)
    assert (row.key, row.classes, row.certainty, row.category) == ("ILSVRC2012_val_00000007", [3, 9], [0.6, 0.8], "M")


@pytest.mark.slow  # the published 20,000-row Shankar file
def test_shankar_categories(vocab) -> None:
    rows = list(parse_shankar(shared("imagenet-val", "shankar_multilabel.csv"), vocab))
    assert len(rows) == 20_000
    cats = Counter(r.category for r in rows)
    assert set(cats) == {"A", "B", "M", "Z"}
    assert all(r.classes == [] for r in rows if r.category == "Z")
    assert all(len(r.classes) > 1 for r in rows if r.category == "M")


def test_real_import_keeps_list_order_and_empty_sets(engine, vocab, tmp_path: Path) -> None:
    val_dataset(engine, vocab, tmp_path, [1, 2, 3])
    (tmp_path / "real.json").write_text("[[], [970, 795], [230]]")
    report = import_source(engine, tmp_path / "real.json", fmt="real")
    assert report.written == 3
    assert sorted(labels_of(engine, "real").values()) == [[], [230], [970, 795]]


def test_unknown_images_stop_the_import_and_write_nothing(engine, vocab, tmp_path: Path) -> None:
    val_dataset(engine, vocab, tmp_path, [1, 2])
    (tmp_path / "real.json").write_text("[[1], [2], [3], [4]]")
    with pytest.raises(
        InputError, match=r"2 of 4 image\(s\) are not in the dataset: 'ILSVRC2012_val_00000003'.*nothing written"
    ):
        import_source(engine, tmp_path / "real.json", fmt="real")
    with Session(engine) as s:
        assert (
            s.execute(select(func.count()).select_from(LabelSource).where(LabelSource.name == "real")).scalar_one() == 0
        )
    report = import_source(engine, tmp_path / "real.json", fmt="real", skip_unknown=True)
    assert (report.written, report.skipped_unknown) == (2, 2)


def test_out_of_range_classes_are_refused(engine, vocab, tmp_path: Path) -> None:
    val_dataset(engine, vocab, tmp_path, [1, 2])
    (tmp_path / "real.json").write_text("[[1], [1000]]")
    with pytest.raises(InputError, match=r"1 row\(s\) have classes outside 0..999: 'real.json entry 1: \[1000\]'"):
        import_source(engine, tmp_path / "real.json", fmt="real")


def test_generic_csv_source_resolves_names(engine, vocab, tmp_path: Path) -> None:
    val_dataset(engine, vocab, tmp_path, [1, 2])
    (tmp_path / "mine.csv").write_text(
        "image,labels\nILSVRC2012_val_00000001.JPEG,tabby|Egyptian cat\nILSVRC2012_val_00000002,\n"
    )
    import_source(engine, tmp_path / "mine.csv", fmt="csv", name="team-a")
    assert sorted(labels_of(engine, "team-a").values()) == [[], [281, 285]]
    (tmp_path / "bad.csv").write_text("image,labels\nILSVRC2012_val_00000001.JPEG,unicorn\n")
    with pytest.raises(InputError, match=r"bad.csv:2: unknown class 'unicorn'"):
        import_source(engine, tmp_path / "bad.csv", fmt="csv", name="bad")


def test_names_are_unique_unless_replaced(engine, vocab, tmp_path: Path) -> None:
    val_dataset(engine, vocab, tmp_path, [1])
    (tmp_path / "real.json").write_text("[[5]]")
    import_source(engine, tmp_path / "real.json", fmt="real")
    with pytest.raises(ConflictError, match="--replace"):
        import_source(engine, tmp_path / "real.json", fmt="real")
    (tmp_path / "real.json").write_text("[[6]]")
    import_source(engine, tmp_path / "real.json", fmt="real", replace=True)
    assert list(labels_of(engine, "real").values()) == [[6]]
    with pytest.raises(ConflictError, match="original labels"):
        import_source(engine, tmp_path / "real.json", fmt="real", name="imgt")
    with pytest.raises(NotFoundError, match="unknown label format 'reall'; known: csv, jsonl, mturk, real, shankar"):
        import_source(engine, tmp_path / "real.json", fmt="reall")


@pytest.mark.slow
def test_full_real_shankar_and_mturk_on_50k_val(engine, vocab, tmp_path: Path) -> None:
    plan = plan_ingest(tmp_path / "not-mounted", vocab, "imagenet-val")
    ingest_dataset(engine, plan, dataset="val", root=tmp_path / "not-mounted", vocab=vocab, show_progress=False)
    real = import_source(engine, shared("imagenet-val", "real.json"), fmt="real")
    assert real.written == 50_000
    assert sum(1 for v in labels_of(engine, "real").values() if not v) == 3163
    assert import_source(engine, shared("imagenet-val", "shankar_multilabel.csv"), fmt="shankar").written == 20_000
    mturk = import_source(engine, shared("imagenet-val", "mturk_label_errors.json"), fmt="mturk")
    assert mturk.written == 5440 and mturk.categories == {"A": 2524, "B": 1428, "M": 597, "X": 598, "Z": 293}


def test_malformed_mturk_record_is_one_clear_error(vocab, tmp_path: Path) -> None:
    rec = [{"id": 1, "given_original_label": 3, "our_guessed_label": 9, "mturk": [1, 2]}]
    (tmp_path / "m.json").write_text(json.dumps(rec))
    with pytest.raises(InputError, match=r"m.json record 0: mturk is \[1, 2\]; expected an object of vote counts"):
        list(parse_mturk(tmp_path / "m.json", vocab))


def photo_dataset(engine, vocab, tmp_path: Path) -> None:
    """A dataset whose files are named by wnid, not by ImageNet val number."""
    root = tmp_path / "photos"
    for i, name in enumerate(("n01440764_a.jpg", "n02123045_b.jpg")):
        images.photo(root / name, color=(i * 90, 3, 3))
    ingest_dataset(
        engine, plan_ingest(root, vocab), dataset="p", root=root, vocab=vocab, show_progress=False, workers=1
    )


def prior_count(engine) -> int:
    """Label sources other than the ImGT labels that ingest writes."""
    with Session(engine) as s:
        return s.execute(select(func.count()).where(LabelSource.name != "imgt")).scalar_one()


VAL_KEYED = {  # format -> a file of two rows keyed by val numbers 1 and 2
    "real": ("real.json", "[[1], [2]]"),
    "mturk": (
        "mturk.json",
        json.dumps(
            [{"id": n, "given_original_label": 3, "our_guessed_label": 9, "mturk": {"given": 5}} for n in (1, 2)]
        ),
    ),
    "shankar": (
        "shankar.csv",
        "id,category,proposed_labels\nILSVRC2012_val_00000001.JPEG,A,1\nILSVRC2012_val_00000002.JPEG,A,2\n",
    ),
}


@pytest.mark.parametrize("fmt", sorted(VAL_KEYED))
@pytest.mark.parametrize("skip_unknown", [False, True])
def test_a_val_keyed_file_on_other_file_names_says_why_nothing_matches(
    engine, vocab, tmp_path: Path, fmt: str, skip_unknown: bool
) -> None:
    photo_dataset(engine, vocab, tmp_path)
    name, content = VAL_KEYED[fmt]
    (tmp_path / name).write_text(content)
    with pytest.raises(InputError) as caught:
        import_source(engine, tmp_path / name, fmt=fmt, skip_unknown=skip_unknown)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{tmp_path / name}: none of its 2 row(s) matches")
    assert "nothing written" in message
    assert "keyed by ImageNet validation numbers (ILSVRC2012_val_NNNNNNNN, e.g. 'ILSVRC2012_val_00000001" in message
    assert "the dataset's file names do not match (e.g. 'n01440764_a.jpg')" in message
    assert prior_count(engine) == 0


def test_a_table_matching_no_image_and_an_empty_file_are_refused(engine, vocab, tmp_path: Path) -> None:
    photo_dataset(engine, vocab, tmp_path)
    (tmp_path / "t.csv").write_text("image,labels\nghost.jpg,tench\nn09999999_z.jpg,tabby\n")
    with pytest.raises(
        InputError,
        match=r"t.csv: none of its 2 row\(s\) matches an image of the dataset; nothing written: a key must be an "
        r"image's relative path, file name or file stem \(e.g. key 'ghost.jpg', dataset file "
        r"'n01440764_a.jpg'\)$",
    ):
        import_source(engine, tmp_path / "t.csv", fmt="csv", skip_unknown=True)
    (tmp_path / "real.json").write_text("[]")
    with pytest.raises(InputError, match=r"real.json: holds no rows; nothing written"):
        import_source(engine, tmp_path / "real.json", fmt="real", skip_unknown=True)
    assert prior_count(engine) == 0


def test_skip_unknown_still_imports_a_partial_match(engine, vocab, tmp_path: Path) -> None:
    photo_dataset(engine, vocab, tmp_path)
    (tmp_path / "t.csv").write_text("image,labels\nn01440764_a.jpg,tench\nghost.jpg,tabby\n")
    report = import_source(engine, tmp_path / "t.csv", fmt="csv", skip_unknown=True)
    assert (report.written, report.skipped_unknown) == (1, 1)


def test_no_match_message_for_a_dataset_without_images() -> None:
    from relabel.common.workspace import ImageIndex
    from relabel.sources.rows import LabelRow, no_match_message

    message = no_match_message([LabelRow("a.jpg", [1])], ImageIndex({}), "t.csv")
    assert message == "t.csv: the dataset has no images to match its 1 row(s); ingest them first; nothing written"


# --- hostile and careless files: one line naming file, line and value; nothing written ----------------------------

SHANKAR_HEADER = (
    "id,category,original_label,proposed_labels,manually_validated,unclear_multi_labels,wrong_multi_labels,"
    "is_problematic\n"
)
SHANKAR_ROW_1 = 'ILSVRC2012_val_00000001.JPEG,A,1,1,True,,"2, 3",False\n'


def refused(call, pattern: str) -> str:
    """The one-line InputError `call()` raises, checked against `pattern` (re.search)."""
    with pytest.raises(InputError) as caught:
        call()
    message = str(caught.value)
    assert "\n" not in message, message
    assert re.search(pattern, message), message
    return message


@pytest.mark.parametrize(
    ("last_row", "pattern"),
    [
        ('ILSVRC2012_val_00000002.JPEG,M,582,"415, 813, 8', r"shankar\.csv:3: a quoted field is not closed"),
        ('ILSVRC2012_val_00000002.JPEG,M,582,"415, 813, 868",Tr', r"shankar\.csv:3: 5 field\(s\) where the header"),
        ('ILSVRC2012_val_00000002.JPEG,M,582,"415, 813, 868",True,,,Fal', r"shankar\.csv:3: is_problematic is 'Fal'"),
        ('ILSVRC2012_val_00000002.JPEG,M,582,"415, 813,",True,,,False', r"shankar\.csv:3: proposed_labels '415, 813,'"),
        (
            "ILSVRC2012_val_00000002.JPEG,Q,582,582,True,,,False",
            r"shankar\.csv:3: category 'Q' is not one of A, B, M, Z",
        ),
        ('ILSVRC2012_val_00000002.JPEG,A,582,"582, 1000",True,,,False', r"shankar\.csv:3: proposed_labels .* outside"),
        (f"ILSVRC2012_val_00000002.JPEG,A,582,{'9' * 5000},True,,,False", r"shankar\.csv:3: proposed_labels .*chars"),
    ],
    ids=["cut-in-quoted-list", "cut-row", "cut-last-field", "open-list", "category-Q", "class-1000", "class-huge"],
)
def test_a_cut_or_malformed_shankar_file_writes_nothing(
    engine, vocab, tmp_path: Path, last_row: str, pattern: str
) -> None:
    val_dataset(engine, vocab, tmp_path, [1, 2])
    (tmp_path / "shankar.csv").write_text(SHANKAR_HEADER + SHANKAR_ROW_1 + last_row)
    refused(lambda: import_source(engine, tmp_path / "shankar.csv", fmt="shankar"), pattern)
    assert prior_count(engine) == 0


@pytest.mark.slow  # the published 20,000-row Shankar file
def test_the_published_shankar_row_keeps_its_whole_list(vocab) -> None:
    rows = {r.key: r for r in parse_shankar(shared("imagenet-val", "shankar_multilabel.csv"), vocab)}
    row = rows["ILSVRC2012_val_00023277.JPEG"]
    assert (row.classes, row.category) == ([415, 813, 868], "M")
    assert row.extra == {
        "original_label": 582,
        "unclear": [],
        "wrong": [467, 582, 865, 886, 963],
        "validated": True,
        "problematic": True,
    }


@pytest.mark.parametrize(
    ("fmt", "name", "content", "pattern"),
    [
        (
            "csv",
            "t.csv",
            "image,lables\nILSVRC2012_val_00000001,tench\n",
            r"t\.csv:1: the header has unknown column\(s\) 'lables'; lacks 'labels' or 'label'; found: 'image', "
            r"'lables'; a label table has: image, labels\|label \[optional: category",
        ),
        (
            "csv",
            "t.csv",
            "image,label,labels\nILSVRC2012_val_00000001,tench,tench\n",
            r"t\.csv:1: the header gives both 'labels' and 'label'",
        ),
        (
            "jsonl",
            "t.jsonl",
            '{"image": "ILSVRC2012_val_00000001", "labels": [0]}\n{"image": "ILSVRC2012_val_00000002", "lables": [1]}',
            r"t\.jsonl:2: the record has unknown column\(s\) 'lables'; lacks 'labels' or 'label'",
        ),
        (
            "shankar",
            "s.csv",
            "id,category,proposed_lables\nILSVRC2012_val_00000001.JPEG,A,1\n",
            r"s\.csv:1: the header has unknown column\(s\) 'proposed_lables'; lacks 'proposed_labels'; found: 'id'",
        ),
    ],
    ids=["csv-typo", "csv-two-names", "jsonl-typo", "shankar-typo"],
)
def test_unknown_or_missing_columns_are_refused(
    engine, vocab, tmp_path: Path, fmt: str, name: str, content: str, pattern: str
) -> None:
    """A typo must not read as 'no labels', which would exclude every image."""
    val_dataset(engine, vocab, tmp_path, [1, 2])
    (tmp_path / name).write_text(content)
    refused(lambda: import_source(engine, tmp_path / name, fmt=fmt), pattern)
    assert prior_count(engine) == 0


def mturk_file(**changes: object) -> str:
    record: dict = {"id": 2, "given_original_label": 3, "our_guessed_label": 9, "mturk": {"given": 5}}
    record.update(changes)
    ok = {"id": 1, "given_original_label": 3, "our_guessed_label": 9, "mturk": {"given": 4, "neither": 1}}
    return json.dumps([ok, record])


@pytest.mark.parametrize(
    ("fmt", "name", "content", "pattern"),
    [
        ("real", "real.json", "[[1], [true]]", r"real\.json: entry 1 is \[True\], expected a list of class indices"),
        ("real", "real.json", "[[1], [2.0]]", r"real\.json: entry 1 is \[2\.0\]"),
        ("mturk", "m.json", mturk_file(id=1.9), r"m\.json record 1: id is 1\.9; expected an integer >= 1"),
        ("mturk", "m.json", mturk_file(id="1.9"), r"m\.json record 1: id is '1\.9'; expected an integer"),
        ("mturk", "m.json", mturk_file(id=True), r"m\.json record 1: id is True; expected an integer"),
        ("mturk", "m.json", mturk_file(given_original_label=1000), r"given_original_label is 1000; .* 0\.\.999"),
        ("mturk", "m.json", mturk_file(mturk={"given": -5}), r"m\.json record 1 mturk: given is -5; .* >= 0"),
        ("mturk", "m.json", mturk_file(mturk={"given": 2.5}), r"m\.json record 1 mturk: given is 2\.5"),
        ("mturk", "m.json", mturk_file(mturk={"gven": 5}), r"m\.json record 1: mturk has unknown key\(s\) 'gven'"),
        ("mturk", "m.json", mturk_file(mturk={"given": float("nan")}), r"m\.json: NaN is not a number JSON allows"),
        (
            "jsonl",
            "t.jsonl",
            '{"image": "ILSVRC2012_val_00000001", "labels": [true]}',
            r"t\.jsonl:1: label True is not",
        ),
        ("jsonl", "t.jsonl", '{"image": "ILSVRC2012_val_00000001", "labels": [1.9]}', r"t\.jsonl:1: label 1\.9 is not"),
        ("jsonl", "t.jsonl", '{"image": 1, "labels": [1]}', r"t\.jsonl:1: image is 1; expected an image path"),
    ],
)
def test_values_outside_their_domain_are_refused(
    engine, vocab, tmp_path: Path, fmt: str, name: str, content: str, pattern: str
) -> None:
    val_dataset(engine, vocab, tmp_path, [1, 2])
    (tmp_path / name).write_text(content)
    refused(lambda: import_source(engine, tmp_path / name, fmt=fmt), pattern)
    assert prior_count(engine) == 0


def test_a_missing_mturk_vote_counts_zero_and_votes_are_whole_numbers(vocab, tmp_path: Path) -> None:
    (tmp_path / "m.json").write_text(mturk_file(mturk={"guessed": 3, "neither": 2}))
    rows = list(parse_mturk(tmp_path / "m.json", vocab))
    assert rows[1].extra == {"votes": {"given": 0, "guessed": 3, "both": 0, "neither": 2}, "given": 3, "guessed": 9}


@pytest.mark.parametrize(
    ("encoding", "bom"),
    [
        ("utf-8", b""),
        ("utf-8", codecs.BOM_UTF8),
        ("utf-16-le", codecs.BOM_UTF16_LE),
        ("utf-16-be", codecs.BOM_UTF16_BE),
    ],
)
def test_utf8_with_or_without_bom_and_utf16_with_bom_import_alike(
    engine, vocab, tmp_path: Path, encoding: str, bom: bytes
) -> None:
    val_dataset(engine, vocab, tmp_path, [1, 2])
    text = "image,labels\nILSVRC2012_val_00000001,Egyptian cat|tabby\nILSVRC2012_val_00000002,\n"
    (tmp_path / "t.csv").write_bytes(bom + text.encode(encoding))
    assert import_source(engine, tmp_path / "t.csv", fmt="csv").written == 2
    assert sorted(labels_of(engine, "csv").values()) == [[], [285, 281]]


@pytest.mark.parametrize(
    ("data", "pattern"),
    [
        (
            "image,labels\nILSVRC2012_val_00000001,caf\u00e9\n".encode("latin-1"),
            r"t\.csv: not UTF-8 text: byte offset 40 \(line 2\) holds 0xe9, which does not decode; save it as UTF-8",
        ),
        (
            "image,labels\nILSVRC2012_val_00000001,tench\n".encode("utf-16-le"),
            r"t\.csv: byte offset 1 \(line 1\) is a NUL character, which a text file does not hold",
        ),
        (
            codecs.BOM_UTF16_LE + "image,labels\n".encode("utf-16-le") + b"\x00\xd8a\x00",
            r"t\.csv: not UTF-16-LE text: byte offset 28 \(line 2\) holds 0x00d8, which",
        ),
    ],
    ids=["latin-1", "utf-16-without-bom", "utf-16-lone-surrogate"],
)
def test_undecodable_files_name_the_byte_offset(engine, vocab, tmp_path: Path, data: bytes, pattern: str) -> None:
    val_dataset(engine, vocab, tmp_path, [1])
    (tmp_path / "t.csv").write_bytes(data)
    refused(lambda: import_source(engine, tmp_path / "t.csv", fmt="csv"), pattern)
    assert prior_count(engine) == 0


def test_files_no_reader_could_parse_are_one_line_errors(vocab, tmp_path: Path) -> None:
    """Nesting past the recursion limit, a field over the csv module's limit: errors, not tracebacks."""
    (tmp_path / "deep.json").write_text("[" * 200_000 + "]" * 200_000)
    refused(lambda: list(parse_real(tmp_path / "deep.json", vocab)), r"deep\.json: JSON nested too deeply to read")
    (tmp_path / "wide.csv").write_text(f"image,labels\nILSVRC2012_val_00000001,{'x' * 200_000}\n")
    refused(
        lambda: list(parse_csv(tmp_path / "wide.csv", vocab)),
        r"wide\.csv:2: a field is longer than 131,072 characters",
    )
    (tmp_path / "long.json").write_text(f"[[{'9' * 5000}]]")
    refused(
        lambda: list(parse_real(tmp_path / "long.json", vocab)),
        r"long\.json: number 999999999999…\(5,000 chars\) has 5,000 digits before the point; numbers are ASCII "
        r"decimals .* with at most 20 digits",
    )
    (tmp_path / "sep.jsonl").write_text('{"image": "a\u2028b", "labels": []}\n')  # U+2028 inside a string is JSON
    assert [r.key for r in parse_jsonl(tmp_path / "sep.jsonl", vocab)] == ["a\u2028b"]
    (tmp_path / "empty.csv").write_text("")
    refused(lambda: list(parse_csv(tmp_path / "empty.csv", vocab)), r"empty\.csv: the file is empty; a label table")


# --- label sets that contradict themselves or their dataset: refused, or (repeats) stored once -----------------


def test_repeated_classes_are_stored_once_and_an_oversized_set_is_refused(engine, vocab, tmp_path: Path) -> None:
    val_dataset(engine, vocab, tmp_path, [1, 2])
    (tmp_path / "real.json").write_text("[[970, 970], [795, 970, 795]]")
    import_source(engine, tmp_path / "real.json", fmt="real")
    assert sorted(labels_of(engine, "real").values()) == [[795, 970], [970]]
    (tmp_path / "t.csv").write_text("image,labels\nILSVRC2012_val_00000001," + "|".join(["65"] * 43_000) + "\n")
    refused(
        lambda: import_source(engine, tmp_path / "t.csv", fmt="csv"),
        r"^t\.csv:2: a label set of 43,000 entries, more than the 1,000 classes of the vocabulary",
    )
    (tmp_path / "big.json").write_text(json.dumps([[65] * 1001, [1]]))
    refused(
        lambda: import_source(engine, tmp_path / "big.json", fmt="real"), r"^big\.json entry 0: a label set of 1,001"
    )
    assert prior_count(engine) == 1


SHANKAR_CONTRADICTIONS = {  # category, original_label, proposed_labels: the tester's rows
    "A-other-label": ("A", "65", "66", r"category A \(the original label is the one correct label\) needs "),
    "A-empty": ("A", "65", "", r"category A .* got \[\], original_label 65"),
    "Z-with-label": ("Z", "65", "65", r"category Z \(no correct label\) needs proposed_labels empty, got \[65\]"),
    "B-is-original": ("B", "65", "65", r"category B \(one correct label, not the original\) .* got \[65\]"),
    "B-two-labels": ("B", "65", '"66, 67"', r"category B .* got \[66, 67\]"),
    "M-one-label": ("M", "65", "66", r"category M \(several correct labels\) needs proposed_labels two or more"),
    "M-one-label-twice": ("M", "65", '"66, 66"', r"category M .* got \[66\]"),
}


@pytest.mark.parametrize("case", sorted(SHANKAR_CONTRADICTIONS))
def test_a_shankar_row_contradicting_its_category_is_refused(engine, vocab, tmp_path: Path, case: str) -> None:
    val_dataset(engine, vocab, tmp_path, [1, 2])
    category, original, proposed, pattern = SHANKAR_CONTRADICTIONS[case]
    row = f"ILSVRC2012_val_00000002.JPEG,{category},{original},{proposed},True,,,False\n"
    (tmp_path / "shankar.csv").write_text(SHANKAR_HEADER + SHANKAR_ROW_1 + row)
    message = refused(lambda: import_source(engine, tmp_path / "shankar.csv", fmt="shankar"), pattern)
    assert message.startswith("shankar.csv:3: ") and message.endswith("the row contradicts itself")
    assert prior_count(engine) == 0


@pytest.mark.slow  # the published 20,000-row Shankar file
def test_the_published_shankar_file_has_no_contradicting_row(vocab) -> None:
    """Every row passes `check_shankar_category` (parsing runs it); the one repeated class is stored once."""
    rows = {r.key: r for r in parse_shankar(shared("imagenet-val", "shankar_multilabel.csv"), vocab)}
    assert len(rows) == 20_000
    assert rows["ILSVRC2012_val_00000955.JPEG"].classes == [872, 759, 622]  # the file says "872, 759, 622, 622"
    assert all(r.classes == [r.original] for r in rows.values() if r.category == "A")


@pytest.mark.parametrize(
    ("fmt", "name", "content", "pattern"),
    [
        (
            "shankar",
            "shankar.csv",
            SHANKAR_HEADER + SHANKAR_ROW_1 + "ILSVRC2012_val_00000002.JPEG,A,66,66,True,,,False\n",
            r"shankar\.csv: 1 row\(s\) state an original label other than the dataset's ImGT label: 'shankar\.csv:3: "
            r"ILSVRC2012_val_00000002\.JPEG states 66, ImGT is \[2\]'; the file belongs to another dataset",
        ),
        (
            "mturk",
            "m.json",
            json.dumps([{"id": 2, "given_original_label": 999, "our_guessed_label": 9, "mturk": {"given": 5}}]),
            r"m\.json: 1 row\(s\) state an original label .*'m\.json record 0: ILSVRC2012_val_00000002 states 999, "
            r"ImGT is \[2\]'",
        ),
    ],
    ids=["shankar", "mturk"],
)
def test_an_original_label_other_than_imgt_is_refused(
    engine, vocab, tmp_path: Path, fmt: str, name: str, content: str, pattern: str
) -> None:
    """`val_dataset` gives image n the ImGT class n: a file stating another original label is for other data."""
    val_dataset(engine, vocab, tmp_path, [1, 2])
    (tmp_path / name).write_text(content)
    refused(lambda: import_source(engine, tmp_path / name, fmt=fmt), pattern + ".*nothing written$")
    assert prior_count(engine) == 0


@pytest.mark.parametrize(
    ("votes", "pattern"),
    [
        ({"given": 1}, r"mturk votes add up to 1 \(given 1, guessed 0, both 0, neither 0\); each record holds the "),
        ({"given": 3, "guessed": 3}, r"mturk votes add up to 6"),
        ({"given": 500}, r"mturk votes add up to 500"),
        ({}, r"mturk votes add up to 0"),
    ],
    ids=["one-vote", "three-and-three", "500-votes", "no-votes"],
)
def test_mturk_records_hold_five_votes(vocab, tmp_path: Path, votes: dict[str, int], pattern: str) -> None:
    """The published file has exactly 5 votes in each of its 5,440 records (README: "at least 3 of 5")."""
    (tmp_path / "m.json").write_text(mturk_file(mturk=votes))
    refused(lambda: list(parse_mturk(tmp_path / "m.json", vocab)), r"^m\.json record 1: " + pattern + ".*5 workers$")


def test_an_mturk_guess_equal_to_the_given_label_is_refused(vocab, tmp_path: Path) -> None:
    (tmp_path / "m.json").write_text(mturk_file(our_guessed_label=3))
    refused(
        lambda: list(parse_mturk(tmp_path / "m.json", vocab)),
        r"^m\.json record 1: given_original_label and our_guessed_label are both 3",
    )


def test_every_published_mturk_record_has_five_votes() -> None:
    records = json.loads(shared("imagenet-val", "mturk_label_errors.json").read_text())
    assert len(records) == 5440 and {sum(r["mturk"].values()) for r in records} == {5}


def test_a_key_matching_two_images_is_ambiguous_not_unknown(engine, vocab, tmp_path: Path) -> None:
    root = tmp_path / "photos"
    images.photo(root / "a" / "x.jpg")
    images.photo(root / "b" / "x.jpg", color=(1, 1, 1))
    images.photo(root / "b" / "x.png", color=(2, 2, 2))
    ingest_dataset(
        engine, plan_ingest(root, vocab, "unlabeled"), dataset="p", root=root, vocab=vocab, show_progress=False
    )
    for key, matches in (("x.jpg", "'a/x.jpg', 'b/x.jpg'"), ("b/x", "'b/x.jpg', 'b/x.png'")):
        (tmp_path / "t.csv").write_text(f"image,labels\n{key},tench\n")
        refused(
            lambda: import_source(engine, tmp_path / "t.csv", fmt="csv", skip_unknown=True),
            rf"t\.csv: 1 row key\(s\) are ambiguous, each matching several images: t\.csv:2: '{key}' matches "
            rf"{matches}; write the image's relative path instead; nothing written$",
        )
    assert prior_count(engine) == 0
    (tmp_path / "t.csv").write_text("image,labels\na/x,tench\nb/x.png,tabby\n")  # folders tell them apart
    assert import_source(engine, tmp_path / "t.csv", fmt="csv").written == 2


@pytest.mark.parametrize(
    ("content", "pattern"),
    [
        ('{"image": "\\ud800", "labels": [1]}', r"t\.jsonl:1: column 12: the string escape \\ud800 is an unpaired"),
        ('{"image": "a\\udc00", "labels": [1]}', r"t\.jsonl:1: column 13: the string escape \\udc00 is an unpaired"),
        ('{"image": "a", "labels": ["tench\\u0000"]}', r"t\.jsonl:1: column 33: the string escape \\u0000 is a NUL"),
        (
            '{"image": "a", "labels": [1' + "0" * 20 + "]}",
            r"t\.jsonl:1: number 1(0){20} has 21 digits before the point",
        ),
    ],
    ids=["high-surrogate", "low-surrogate", "nul", "21-digits"],
)
def test_text_and_numbers_that_cannot_be_stored_are_refused(vocab, tmp_path: Path, content: str, pattern: str) -> None:
    (tmp_path / "t.jsonl").write_text(content + "\n")
    refused(lambda: list(parse_jsonl(tmp_path / "t.jsonl", vocab)), pattern)
    (tmp_path / "ok.jsonl").write_text('{"image": "\\ud83d\\ude00 \\\\ud800", "labels": [1]}\n')  # a pair; "\\ud800"
    assert [r.key for r in parse_jsonl(tmp_path / "ok.jsonl", vocab)] == ["\U0001f600 \\ud800"]
