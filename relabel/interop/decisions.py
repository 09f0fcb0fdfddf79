"""Import annotators' decisions made in another tool, as if they had been made in the studio.

Every row goes through the studio's own decision check and write (`relabel.decisions.annotations.insert_decision`: the
user exists and may decide, the image is in the dataset, the classes are in its vocabulary, a label set is not empty,
the note is storable), all rows in one transaction: a bad row is one error naming its line, and nothing is stored.
Before that, each row's image, classes and user are looked up, and a second decision on one image by one user in the
same file is refused. Each row's decision carries a token made from the file and the row, so importing the same file
again stores nothing twice.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

from db.engine import session_scope
from db.enums import Verdict
from db.models import stored_id
from relabel.common.errors import InputError, RelabelError, brief, unknown_name
from relabel.common.import_formats import ImportFormat
from relabel.common.progress import progress_bar
from relabel.common.vocabulary import Vocabulary
from relabel.common.workspace import ImageIndex, dataset_vocabulary, get_dataset, image_index
from relabel.decisions.annotations import insert_decision
from relabel.interop.label_studio import image_key, read_label_studio, without_upload_prefix
from relabel.interop.rows import DecisionRow, read_csv, read_jsonl
from relabel.sources.rows import KeyCandidates, resolve_labels

EMPTY_AS = {"none-fit": Verdict.none_fit, "unclear": Verdict.unclear}  # what an empty label set may stand for


DecisionReader = Callable[[Path], Iterable[DecisionRow]]
DECISION_FORMATS: dict[str, ImportFormat[DecisionReader]] = {
    "csv": ImportFormat(read_csv, "image,user,classes[,note] with a header, classes ';'-separated"),
    "jsonl": ImportFormat(read_jsonl, "one object a line: image, user, classes (a list), note"),
    "label-studio": ImportFormat(read_label_studio, "a Label Studio project's JSON export"),
}


@dataclass(frozen=True)
class UserMap:
    """Who made a file's decisions: `everyone` (`--user NAME`) for every row, else each row's own user with
    `by_id` (`--user ID=NAME`, e.g. Label Studio's numeric user ids) renaming those it lists."""

    everyone: str | None = None
    by_id: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, values: Sequence[str]) -> UserMap:
        pairs = [v.partition("=") for v in values]
        plain = [v.strip() for v, eq, _ in pairs if not eq]
        mapped = tuple((k.strip(), n.strip()) for k, eq, n in pairs if eq)
        if plain and (len(plain) > 1 or mapped):
            raise InputError(
                f"--user {brief(values, 60)}: give one --user NAME (every decision is NAME's) or --user ID=NAME "
                "pairs (each of the file's users by its id), not both"
            )
        if any(not k or not n for k, n in mapped) or any(not p for p in plain):
            raise InputError(f"--user {brief(values, 60)}: a NAME or an ID=NAME pair may not be empty")
        return cls(plain[0] if plain else None, mapped)

    def name(self, row: DecisionRow) -> str:
        if self.everyone is not None:
            return self.everyone
        if row.user is None:
            raise InputError(
                f"{row.where}: names no user; add a user column (Label Studio: completed_by) or pass --user NAME"
            )
        return dict(self.by_id).get(row.user, row.user)


@dataclass(frozen=True)
class Decision:
    """A row matched to the workspace, ready for `insert_decision`."""

    row: DecisionRow
    image_id: int
    user: str
    verdict: Verdict
    classes: list[int]
    token: str


@dataclass(frozen=True)
class DecisionImport:
    """What an import did: `stored` new decisions on `images` images by `users` users; `already` rows had been
    stored by an earlier import of the same file (nothing new)."""

    rows: int
    stored: int
    images: int
    users: int
    already: int
    seconds: float


def import_decisions(
    engine: Engine,
    path: Path,
    *,
    fmt: str,
    users: Sequence[str] = (),
    dataset: str | None = None,
    empty_as: str | None = None,
    image_root: str = "",
    show_progress: bool = True,
) -> DecisionImport:
    """Store every decision of the file at `path` (format `fmt` of DECISION_FORMATS), or none.

    `users` are `--user` values (see UserMap); `empty_as` ("none-fit", "unclear"; None refuses) is the verdict an
    empty label set stands for; `image_root` is stripped from image paths that start with it (a Label Studio
    URL prefix). Raises a RelabelError naming the first bad row; then nothing is stored.
    """
    if fmt not in DECISION_FORMATS:
        raise unknown_name("decision format", fmt, list(DECISION_FORMATS))
    if empty_as is not None and empty_as not in EMPTY_AS:
        raise unknown_name("empty-set verdict", empty_as, list(EMPTY_AS))
    started, who = time.perf_counter(), UserMap.parse(users)
    rows = list(DECISION_FORMATS[fmt].read(path))
    if not rows:
        raise InputError(f"{path}: holds no decisions; nothing stored")
    with session_scope(engine) as s:
        ds = get_dataset(s, dataset)
        finder, vocab = ImageFinder(image_index(s, ds), ds.name, image_root), dataset_vocabulary(s, ds)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    decisions = [_decision(r, finder, vocab, who, EMPTY_AS.get(empty_as or ""), digest) for r in rows]
    _refuse_repeats(decisions, finder)
    created = _store(engine, decisions, stored_id(ds), len(vocab), show_progress)
    new = [d for d, c in zip(decisions, created) if c]
    return DecisionImport(
        rows=len(decisions),
        stored=len(new),
        images=len({d.image_id for d in new}),
        users=len({d.user for d in new}),
        already=len(decisions) - len(new),
        seconds=time.perf_counter() - started,
    )


def _decision(
    row: DecisionRow, finder: ImageFinder, vocab: Vocabulary, who: UserMap, empty: Verdict | None, digest: str
) -> Decision:
    image_id, user = finder.find(row), who.name(row)
    classes = resolve_labels(row.classes, vocab, row.where)
    verdict = Verdict.labels if classes or empty is None else empty
    content = "\0".join((digest, row.where, user, str(image_id), verdict.value, str(classes), row.note))
    token = "import:" + hashlib.sha256(content.encode()).hexdigest()[:40]
    return Decision(row, image_id, user, verdict, classes, token)


def _refuse_repeats(decisions: list[Decision], finder: ImageFinder) -> None:
    first: dict[tuple[int, str], Decision] = {}
    for d in decisions:
        seen = first.setdefault((d.image_id, d.user), d)
        if seen is not d:
            raise InputError(
                f"{d.row.where}: a second decision on image {finder.path(d.image_id)!r} by {d.user!r} (the first "
                f"is {seen.row.where}); a file holds one decision per image and user; nothing stored"
            )


def _store(engine: Engine, decisions: list[Decision], dataset_id: int, n_classes: int, progress: bool) -> list[bool]:
    """Each decision through the studio's check and write, in one transaction; True where it stored a new row."""
    created = []
    bar = progress_bar(len(decisions), "storing decisions", enabled=progress, unit="row")
    try:
        with engine.begin() as conn:
            for d in decisions:
                try:
                    _, new = insert_decision(
                        conn,
                        image_id=d.image_id,
                        user=d.user,
                        verdict=d.verdict,
                        classes=d.classes,
                        note=d.row.note,
                        seconds_on_item=d.row.seconds,
                        client_token=d.token,
                        n_classes=n_classes,
                        dataset_id=dataset_id,
                    )
                except RelabelError as exc:
                    raise type(exc)(f"{d.row.where}: {exc}{_hint(d)}; nothing stored") from None
                except IntegrityError as exc:
                    reason = str(exc.orig).splitlines()[0] if exc.orig else "integrity error"
                    raise InputError(f"{d.row.where}: refused by the database: {reason}; nothing stored") from None
                created.append(new)
                bar.update()
    finally:
        bar.close()
    return created


def _hint(d: Decision) -> str:
    if d.verdict is Verdict.labels and not d.classes:
        return " (an empty set is refused unless --empty-as none-fit or unclear says what it means)"
    return ""


class ImageFinder:
    """The image a row names: an image id, or a path, file name or stem (a Label Studio URL read as its path)."""

    def __init__(self, index: ImageIndex, dataset: str, image_root: str = "") -> None:
        self.index, self.dataset, self.image_root = index, dataset, image_root
        self.paths = {image_id: path for path, image_id in index.ids_by_path.items()}
        self._candidates: KeyCandidates | None = None

    def path(self, image_id: int) -> str:
        return self.paths[image_id]

    def find(self, row: DecisionRow) -> int:
        if isinstance(row.image, int):
            if row.image in self.paths:
                return row.image
            raise InputError(f"{row.where}: image id {row.image} is not in dataset {self.dataset!r}")
        key = image_key(row.image, self.image_root)
        by_key = self._by_key(key, row.where)
        by_id = int(key) if key.isdigit() and len(key) <= 18 and int(key) in self.paths else None
        if by_key is not None and by_id is not None and by_key != by_id:
            raise InputError(
                f"{row.where}: image {key!r} is ambiguous: image id {by_id} ({self.paths[by_id]!r}) or the file "
                f"{self.paths[by_key]!r}; write the file's relative path"
            )
        found = by_key if by_key is not None else by_id
        if found is None:
            example = min(self.paths.values(), default="(none)")
            raise InputError(
                f"{row.where}: image {brief(row.image, 60)} is not in dataset {self.dataset!r} (an image is its "
                f"relative path, file name or id, e.g. {example!r}); ingest it first"
            )
        return found

    def _by_key(self, key: str, where: str) -> int | None:
        for candidate in (key, without_upload_prefix(key)):
            if candidate is None:
                continue
            hit = self.index.lookup(candidate)
            if hit is not None:
                return hit
            if self._candidates is None:
                self._candidates = KeyCandidates(self.index)
            paths = self._candidates.paths(candidate)
            if len(paths) == 1:
                return self.index.ids_by_path[paths[0]]
            if paths:
                raise InputError(
                    f"{where}: image {candidate!r} matches {len(paths)} images ({brief(paths[:3], 80)}); write the "
                    "image's relative path"
                )
        return None
