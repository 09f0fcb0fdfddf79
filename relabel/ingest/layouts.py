"""Dataset layouts: each turns a root directory into an `IngestPlan`, or raises one clear `InputError`.

A plan is complete and valid before the first row is written: unknown classes, broken manifests and paths that
escape the dataset root stop the ingest up front.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path, PurePosixPath

from relabel.common.errors import InputError, brief, examples
from relabel.common.tables import TableSchema, check_label_count, label_tokens, read_records
from relabel.common.textfiles import csv_rows
from relabel.common.vocabulary import UnknownClassError, Vocabulary
from relabel.ingest.devkit import WNID, read_devkit_ground_truth

IMAGE_EXTENSIONS = {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm", ".pgm", ".jfif"}
VAL_NAME = re.compile(r"^ILSVRC2012_val_(\d{8})$")
WNID_PREFIX = re.compile(r"^(n\d{8})[_\-.]")
# A name longer than the file system takes fails inside os.stat with a traceback; say so up front instead.
NAME_MAX_BYTES, PATH_MAX_BYTES = 255, 4096


@dataclass
class PlanEntry:
    path: str  # POSIX, relative to the root
    labels: list[int] | None  # None: the layout gives no original label for this image
    missing_reason: str = ""  # set when a label file names the image but it is not on disk


@dataclass
class IngestPlan:
    layout: str
    label_origin: str  # what the ImGT labels were read from
    entries: list[PlanEntry]
    warnings: list[str] = field(default_factory=list)


@dataclass
class LayoutOptions:
    labels_file: Path | None = None
    devkit_meta: Path | None = None
    manifest: Path | None = None


Layout = Callable[[Path, Vocabulary, LayoutOptions], IngestPlan]


def _is_image(name: str) -> bool:
    return os.path.splitext(name)[1].lower() in IMAGE_EXTENSIONS


def walk_images(root: Path, warnings: list[str] | None = None) -> list[str]:
    """Image files under `root` as sorted relative POSIX paths; links that lead outside the root are refused.

    A file or folder name that is not UTF-8 (Python holds its bytes as lone surrogates, which no database
    stores) is an InputError naming the paths: the user renames them, rather than losing the images silently.
    """
    real_root = root.resolve()
    found, refused, unnamed = [], [], []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in filenames:
            if name.startswith(".") or not _is_image(name):
                continue
            full = Path(dirpath) / name
            rel = full.relative_to(root).as_posix()
            if not _storable(rel):
                unnamed.append(rel)
            elif full.is_symlink() and not full.resolve().is_relative_to(real_root):
                refused.append(rel)
            else:
                found.append(rel)
    if unnamed:
        raise InputError(
            f"{root}: {len(unnamed)} image path(s) are not UTF-8 text, which the workspace cannot store: "
            f"{examples(unnamed)} (each \\udcXX is a byte that does not decode); rename them"
        )
    if refused and warnings is not None:
        warnings.append(f"refused {len(refused)} link(s) that lead outside the dataset root: {examples(refused)}")
    return sorted(found)


def _storable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def usable_path(raw: str, where: str) -> None:
    """Refuse a path no file system takes: one holding a NUL, or a name or whole path longer than Linux allows."""
    if "\0" in raw:
        raise InputError(f"{where}: path {brief(raw)} holds a NUL character; a file name cannot")
    parts = raw.encode("utf-8", "surrogateescape")
    longest = max((len(p) for p in parts.split(b"/")), default=0)
    if longest > NAME_MAX_BYTES or len(parts) > PATH_MAX_BYTES:
        raise InputError(
            f"{where}: path {brief(raw)} is too long ({len(parts):,} bytes, longest name {longest:,}); a file "
            f"system takes names of at most {NAME_MAX_BYTES} bytes and paths of at most {PATH_MAX_BYTES}"
        )


def safe_relative_path(root: Path, raw: str, where: str) -> str:
    """`raw` as a normalised path relative to `root`; refuses absolute paths and paths that escape the root."""
    if not raw or not raw.strip():
        raise InputError(f"{where}: empty image path")
    usable_path(raw.strip(), where)
    try:
        return _relative_path(root, raw.strip(), where)
    except OSError as exc:  # e.g. a link loop: the path cannot be followed
        raise InputError(f"{where}: path {brief(raw)} cannot be used ({exc.strerror or exc})") from None


def _relative_path(root: Path, raw: str, where: str) -> str:
    candidate = Path(raw)
    if candidate.is_absolute():
        try:
            candidate = candidate.resolve().relative_to(root.resolve())
        except ValueError:
            raise InputError(f"{where}: path {brief(raw)} is outside the dataset root {str(root)!r}") from None
    parts = PurePosixPath(candidate.as_posix()).parts
    depth = 0
    for part in parts:
        depth += -1 if part == ".." else (0 if part == "." else 1)
        if depth < 0:
            raise InputError(f"{where}: path {brief(raw)} escapes the dataset root {str(root)!r}")
    normal = os.path.normpath(candidate.as_posix()).replace(os.sep, "/")
    full = (root / normal).resolve()
    if full.exists() and not full.is_relative_to(root.resolve()):
        raise InputError(f"{where}: path {brief(raw)} links outside the dataset root {str(root)!r}")
    return normal


def _class_of(vocab: Vocabulary, token: str, where: str) -> int | None:
    """The class `token` names, or None when it names none (the caller collects those for one error per file);
    a token that names two classes, or is one class's index and another's name, is an InputError at `where`."""
    try:
        return vocab.resolve(token)
    except UnknownClassError:
        return None
    except InputError as exc:
        raise InputError(f"{where}: {exc}") from None


def _raise_unknown(what: str, bad: dict[str, list[str]], vocab: Vocabulary) -> None:
    if bad:
        listed = "; ".join(f"{label!r} ({examples(items, 2)})" for label, items in list(bad.items())[:3])
        raise InputError(
            f"{what}: {len(bad)} unknown class label(s) not in vocabulary {vocab.name!r}: {listed}"
            + (f"; … ({len(bad) - 3} more)" if len(bad) > 3 else "")
        )


# --- ImageNet validation --------------------------------------------------------------------------------------


def _read_loc_solution(path: Path, vocab: Vocabulary) -> dict[str, int]:
    labels: dict[str, int] = {}
    bad: dict[str, list[str]] = {}
    rows = csv_rows(path)
    header = next(rows, (1, []))[1]
    if [h.strip() for h in header[:2]] != ["ImageId", "PredictionString"]:
        raise InputError(f"{path}: expected the header 'ImageId,PredictionString', got {brief(header, 60)}")
    for lineno, row in rows:
        if len(row) < 2 or not row[0].strip() or not row[1].split():
            raise InputError(f"{path}:{lineno}: expected 'ImageId,<wnid> x y x y ...', got {brief(row, 60)}")
        wnid = row[1].split()[0]
        index = vocab.try_resolve(wnid) if WNID.fullmatch(wnid) else None  # "5" is no wnid, nor class index 5
        if index is None:
            bad.setdefault(wnid, []).append(row[0])
        else:
            labels[row[0].strip()] = index
    _raise_unknown(str(path), bad, vocab)
    return labels


def builtin_val_labels() -> list[int]:
    """Original labels of the 50,000 ImageNet validation images, in val-number order (sorted-wnid indices)."""
    text = resources.files("relabel.resources").joinpath("imagenet_val_labels.json").read_text(encoding="utf-8")
    return json.loads(text)


def layout_imagenet_val(root: Path, vocab: Vocabulary, opts: LayoutOptions) -> IngestPlan:
    """Flat ILSVRC2012_val_XXXXXXXX.JPEG files; labels from LOC_val_solution.csv, the devkit, or built in."""
    warnings: list[str] = []
    flat = [p for p in walk_images(root, warnings) if "/" not in p]
    on_disk = {Path(p).stem: p for p in flat}
    if len(on_disk) != len(flat):
        twins = sorted(p for p in flat if on_disk[Path(p).stem] != p)
        raise InputError(f"{root}: {len(twins)} file(s) share a name with another extension: {examples(twins)}")
    src = opts.labels_file
    if src is None:
        if vocab.name != "imagenet-1k":
            raise InputError("imagenet-val layout without --labels needs the built-in imagenet-1k vocabulary")
        # Like a label file, the built-in labels name all 50,000 images; those not on disk are recorded missing.
        by_stem = {f"ILSVRC2012_val_{i + 1:08d}": c for i, c in enumerate(builtin_val_labels())}
        origin = "built-in ImageNet val labels"
    elif src.name.endswith(".txt"):
        by_stem, origin = read_devkit_ground_truth(src, opts.devkit_meta, vocab), str(src)
    else:
        by_stem, origin = _read_loc_solution(src, vocab), str(src)
    entries = [PlanEntry(p, [by_stem[s]] if s in by_stem else None) for s, p in sorted(on_disk.items())]
    missing = sorted(set(by_stem) - set(on_disk))
    reason = f"named by {Path(origin).name}, not on disk"
    entries += [PlanEntry(f"{s}.JPEG", [by_stem[s]], reason) for s in missing]
    if missing:
        warnings.append(f"{len(missing)} image(s) named by the labels are not on disk; recorded as missing")
    unlabeled = sum(1 for e in entries if e.labels is None)
    if unlabeled:
        warnings.append(f"{unlabeled} image(s) on disk have no label in {origin}")
    return IngestPlan("imagenet-val", origin, sorted(entries, key=lambda e: e.path), warnings)


# --- class folders, wnid-prefixed names, unlabeled folders ------------------------------------------------------


def layout_folders(root: Path, vocab: Vocabulary, opts: LayoutOptions) -> IngestPlan:
    """root/<class>/.../image: the top folder names the class (wnid, name or index); e.g. val/<wnid>/."""
    warnings: list[str] = []
    paths = [p for p in walk_images(root, warnings) if "/" in p]
    bad: dict[str, list[str]] = {}
    resolved: dict[str, int] = {}
    for p in paths:
        folder = p.split("/", 1)[0]
        if folder not in resolved:
            where = f"{root}: class folder {folder!r}"
            index = _class_of(vocab, folder, where)
            if index is None:  # "tiger_cat" for "tiger cat"
                index = _class_of(vocab, folder.replace("_", " "), where)
            if index is None:
                bad.setdefault(folder, []).append(p)
                continue
            resolved[folder] = index
        elif folder in bad:
            bad[folder].append(p)
    _raise_unknown(f"class folders in {root}", bad, vocab)
    return IngestPlan(
        "folders", "class folder names", [PlanEntry(p, [resolved[p.split("/", 1)[0]]]) for p in paths], warnings
    )


def layout_wnid_prefix(root: Path, vocab: Vocabulary, opts: LayoutOptions) -> IngestPlan:
    """Flat files named <wnid>_anything.ext, e.g. n01440764_tench.JPEG."""
    warnings: list[str] = []
    entries: list[PlanEntry] = []
    bad: dict[str, list[str]] = {}
    unprefixed: list[str] = []
    for p in walk_images(root, warnings):
        m = WNID_PREFIX.match(Path(p).name)
        if not m:
            unprefixed.append(p)
            continue
        index = vocab.try_resolve(m.group(1))
        if index is None:
            bad.setdefault(m.group(1), []).append(p)
        else:
            entries.append(PlanEntry(p, [index]))
    _raise_unknown(f"file-name prefixes in {root}", bad, vocab)
    if unprefixed:
        raise InputError(f"{root}: {len(unprefixed)} file(s) do not start with a wnid: {examples(unprefixed)}")
    return IngestPlan("wnid-prefix", "wnid file-name prefixes", entries, warnings)


def layout_unlabeled(root: Path, vocab: Vocabulary, opts: LayoutOptions) -> IngestPlan:
    """Every image under the root, with no original label."""
    warnings: list[str] = []
    return IngestPlan("unlabeled", "none", [PlanEntry(p, None) for p in walk_images(root, warnings)], warnings)


# --- manifests ----------------------------------------------------------------------------------------------------


def _on_disk(path: Path, where: str) -> bool:
    try:
        return path.exists()
    except OSError as exc:  # the root and the path together too long, a link loop
        raise InputError(f"{where}: path {brief(str(path))} cannot be checked ({exc.strerror or exc})") from None


MANIFEST_TABLE = TableSchema(
    "a manifest",
    required=(("path",),),
    optional=(("labels", "label"),),
    open=True,  # other columns: notes
)


def layout_manifest(root: Path, vocab: Vocabulary, opts: LayoutOptions) -> IngestPlan:
    """A CSV or JSONL manifest: path (relative to the root) and label or labels ('|' or ';' between several)."""
    if opts.manifest is None:
        raise InputError("the manifest layout needs --manifest FILE.csv|FILE.jsonl")
    entries: dict[str, PlanEntry] = {}
    bad: dict[str, list[str]] = {}
    for where, row in read_records(opts.manifest, MANIFEST_TABLE):
        raw = row.get("path")
        if not isinstance(raw, str):
            raise InputError(f"{where}: path is {brief(raw, 40)}; expected a path relative to the dataset root")
        rel = safe_relative_path(root, raw, where)
        value = row.get("labels", row.get("label"))
        tokens = None if value is None or value == "" else label_tokens(value, where)
        labels = None
        if tokens is not None:
            check_label_count(len(tokens), len(vocab), where)
            labels = []
            for t in tokens:
                index = _class_of(vocab, t, where)
                if index is None:
                    bad.setdefault(t, []).append(where)
                elif index not in labels:
                    labels.append(index)
        if rel in entries:
            raise InputError(f"{where}: path {rel!r} is listed twice")
        on_disk = _on_disk(root / rel, where)
        entries[rel] = PlanEntry(rel, labels, "" if on_disk else f"listed in {opts.manifest.name}, not on disk")
    _raise_unknown(str(opts.manifest), bad, vocab)
    plan = IngestPlan("manifest", str(opts.manifest), sorted(entries.values(), key=lambda e: e.path))
    missing = sum(1 for e in plan.entries if e.missing_reason)
    if missing:
        plan.warnings.append(f"{missing} image(s) listed in the manifest are not on disk; recorded as missing")
    return plan


LAYOUTS: dict[str, Layout] = {
    "imagenet-val": layout_imagenet_val,
    "folders": layout_folders,
    "wnid-prefix": layout_wnid_prefix,
    "manifest": layout_manifest,
    "unlabeled": layout_unlabeled,
}


def detect_layout(root: Path, opts: LayoutOptions) -> str:
    """Pick a layout from the options and the directory's contents."""
    if opts.manifest is not None:
        return "manifest"
    if opts.labels_file is not None:
        return "imagenet-val"
    if not root.is_dir():
        return "imagenet-val"
    children = sorted(os.scandir(root), key=lambda e: e.name)
    files = [e.name for e in children if e.is_file() and _is_image(e.name)]
    dirs = [e.name for e in children if e.is_dir() and not e.name.startswith(".")]
    if files and all(VAL_NAME.match(Path(f).stem) for f in files[:50]):
        return "imagenet-val"
    if files and all(WNID_PREFIX.match(f) for f in files[:50]):
        return "wnid-prefix"
    if dirs and not files:
        return "folders"
    raise InputError(f"cannot tell the layout of {str(root)!r}; pass --layout with one of: {', '.join(LAYOUTS)}")


def plan_ingest(root: Path, vocab: Vocabulary, layout: str = "auto", opts: LayoutOptions | None = None) -> IngestPlan:
    """Validate the inputs and list what an ingest will write. Raises InputError; writes nothing."""
    opts = opts or LayoutOptions()
    for name, p in (("labels file", opts.labels_file), ("manifest", opts.manifest), ("devkit meta", opts.devkit_meta)):
        if p is not None and not p.is_file():
            raise InputError(f"{name} {str(p)!r} does not exist")
    if layout != "imagenet-val" and not root.is_dir():
        raise InputError(f"dataset root {str(root)!r} is not a directory")
    name = detect_layout(root, opts) if layout == "auto" else layout
    if name not in LAYOUTS:
        raise InputError(f"unknown layout {layout!r}; known: auto, {', '.join(LAYOUTS)}")
    return LAYOUTS[name](root, vocab, opts)
