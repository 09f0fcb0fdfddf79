"""The offline demo: a small workspace built from real photos that ship inside installed packages.

The original labels are the ones an ImageNet-style pipeline would give these photos, ambiguities included:
espresso vs cup vs coffee mug, Egyptian cat vs tabby, missile vs projectile, a uniform with a tie, a space
shuttle model behind an astronaut, a motorcycle in a vocabulary that only knows mopeds and scooters.
"""

from __future__ import annotations

import csv
import importlib.util
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import Engine
from sqlmodel import col

from relabel.common.errors import RelabelError
from relabel.common.vocabulary import load_builtin
from relabel.ingest import IngestReport, ingest_dataset, plan_ingest
from relabel.ingest.layouts import LayoutOptions

DEMO_DATASET = "demo"


@dataclass(frozen=True)
class DemoPhoto:
    package: str
    resource: str  # path inside the installed package
    file: str  # name in the demo dataset
    label: str  # the original (ImGT) label, as an ImageNet class name
    why: str


DEMO_PHOTOS = (
    DemoPhoto("gradio", "media_assets/images/cheetah.jpg", "cheetah.jpg", "cheetah", "clear single object"),
    DemoPhoto("gradio", "media_assets/images/lion.jpg", "lion.jpg", "lion", "clear single object"),
    DemoPhoto(
        "matplotlib",
        "mpl-data/sample_data/grace_hopper.jpg",
        "grace_hopper.jpg",
        "military uniform",
        "uniform, Windsor tie and a portrait: several classes",
    ),
    DemoPhoto("skimage", "data/chelsea.png", "chelsea.png", "Egyptian cat", "tabby vs Egyptian cat vs tiger cat"),
    DemoPhoto("skimage", "data/coffee.png", "coffee.png", "espresso", "espresso vs cup vs coffee mug"),
    DemoPhoto("skimage", "data/rocket.jpg", "rocket.jpg", "missile", "missile vs projectile (a launch vehicle)"),
    DemoPhoto(
        "skimage",
        "data/astronaut.png",
        "astronaut.png",
        "space shuttle",
        "a shuttle model behind an astronaut: several classes or none",
    ),
    DemoPhoto(
        "skimage",
        "data/motorcycle_left.png",
        "motorcycle.png",
        "moped",
        "a motorcycle; ImageNet has only moped and motor scooter",
    ),
)


def _package_file(package: str, resource: str) -> Path | None:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / resource
    return path if path.is_file() else None


def build_demo(engine: Engine, workspace: Path, *, show_progress: bool = True) -> tuple[IngestReport, list[str]]:
    """Copy the demo photos into `workspace`/demo-images, write their manifest, and ingest them."""
    root = workspace / "demo-images"
    root.mkdir(parents=True, exist_ok=True)
    rows, absent = [], []
    for photo in DEMO_PHOTOS:
        src = _package_file(photo.package, photo.resource)
        if src is None:
            absent.append(f"{photo.package}/{photo.resource}")
            continue
        dest = root / photo.file
        if not dest.exists() or dest.stat().st_size != src.stat().st_size:
            shutil.copyfile(src, dest)
        rows.append({"path": photo.file, "label": photo.label, "why": photo.why})
    if not rows:
        raise RelabelError("none of the demo photos were found; install gradio, matplotlib and scikit-image")
    manifest = root / "manifest.csv"
    with manifest.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=["path", "label", "why"])
        writer.writeheader()
        writer.writerows(rows)
    vocab = load_builtin()
    plan = plan_ingest(root, vocab, "manifest", LayoutOptions(manifest=manifest))
    report = ingest_dataset(engine, plan, dataset=DEMO_DATASET, root=root, vocab=vocab, show_progress=show_progress)
    return report, absent


@dataclass
class DemoSuggestion:
    run: str
    ok: int
    errors: int
    problem: str = ""  # why a suggestion run was skipped


def suggest_demo(engine: Engine, cache_dir: Path, *, show_progress: bool = True) -> list[DemoSuggestion]:
    """EfficientNet-Lite0 top-5 on every demo image; an MLLM's open-world answer too when an OpenAI-compatible
    endpoint is configured (OPENAI_BASE_URL or OPENAI_API_KEY; model from RELABEL_DEMO_MLLM, default gpt-4o-mini)."""
    from relabel.suggest.runner import run_suggestions
    from relabel.suggest.setup import SuggestSettings, build_job

    specs = [("efficientnet-lite0", "topk")]
    if os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_KEY"):
        specs.append((f"openai:{os.environ.get('RELABEL_DEMO_MLLM', 'gpt-4o-mini')}", "ow"))
    done = []
    for model, protocol in specs:
        name = f"{model}@{protocol}"
        try:
            job = build_job(SuggestSettings(model=model, protocol=protocol, dataset=DEMO_DATASET), engine, cache_dir)
            r = run_suggestions(job, dataset=DEMO_DATASET, run_name=name, show_progress=show_progress)
            done.append(DemoSuggestion(name, r.ok, r.errors, r.stop_message()))  # an outage: partial, and said
        except RelabelError as exc:  # an unreachable endpoint must not spoil the offline demo
            done.append(DemoSuggestion(name, 0, 0, str(exc)))
    return done


DEMO_USERS = (("alice", "annotator"), ("bob", "annotator"), ("lena", "lead"))
DEMO_PASSWORD = "relabel-demo"  # the offline demo only: real workspaces get their passwords from `relabel users add`


def ensure_demo_users(engine: Engine) -> list[tuple[str, str]]:
    """The demo's annotators and lead, all with DEMO_PASSWORD; users that exist already are left alone."""
    from sqlalchemy import select

    from db.enums import Role
    from db.models import User
    from relabel.decisions.annotations import add_user

    with engine.connect() as conn:
        existing = set(conn.execute(select(col(User.name))).scalars())
    for name, role in DEMO_USERS:
        if name not in existing:
            add_user(engine, name, Role(role), DEMO_PASSWORD)
    return list(DEMO_USERS)
