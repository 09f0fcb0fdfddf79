"""The example evaluation report in docs/: cleanlab's cross-validated predictions on the 50,000 ImageNet val images
against ImGT, ReaL, Shankar et al. and the MTurk priors, with Shankar et al.'s own metric.

Builds a label-only workspace (no pixels) in a temporary folder from ../shared/data/imagenet-val through the
tool's own commands: the original labels as ImGT, real.json, shankar_multilabel.csv and mturk_label_errors.json as
priors, the predictions as run `cleanlab-cv`, ReaL's rater answers (real_raters.npz) as votes and a Dawid-Skene
snapshot of them (`raters-ds`, a probabilistic reference: label uncertainty and aggregation sensitivity). Then

  relabel evaluate --reference imgt --reference real --reference shankar --reference mturk \
    --reference snapshot:raters-ds --metric shankar

and the report's Markdown goes to OUT/example-report.md, its figures to OUT/example-report/. Before writing, it
checks that every paired difference's three parts (leniency, ImGT wrong, dropped) sum to it exactly, image counts
and all, that the report holds the aggregation-sensitivity table, and that its uncertain and unrated images add up
to the snapshot's category U; and prints them.

Example:
  HF_HUB_OFFLINE=1 python scripts/example_report.py --out docs
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import tempfile
from pathlib import Path

import numpy as np

from relabel.cli import main as relabel
from relabel.common.vocabulary import load_builtin

VAL = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "imagenet-val"
SNAPSHOT = "raters-ds"  # ReaL's raters aggregated by Dawid-Skene


def write_loc_solution(folder: Path) -> Path:
    """Kaggle's LOC_val_solution.csv for the 50,000 val images, from the original labels (no pixels needed)."""
    vocab = load_builtin()
    paths = json.loads((VAL / "index_to_filepath.json").read_text())
    labels = np.load(VAL / "original_labels_by_index.npy")
    lines = ["ImageId,PredictionString"]
    lines += [f"{Path(p).stem},{vocab.classes[int(c)].wnid} 10 20 30 40" for p, c in zip(paths, labels)]
    path = folder / "LOC_val_solution.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def build_report(tmp: Path) -> Path:
    """The workspace and the evaluation report in `tmp`; returns the report folder."""
    (tmp / "no-pixels").mkdir()
    base = ["--workspace", str(tmp / "ws")]
    report = tmp / "report"
    steps = [
        ["ingest", str(tmp / "no-pixels"), "--labels", str(write_loc_solution(tmp)), "--dataset", "val", "--quiet"],
        ["labels", "import", str(VAL / "real.json"), "--format", "real"],
        ["labels", "import", str(VAL / "shankar_multilabel.csv"), "--format", "shankar"],
        ["labels", "import", str(VAL / "mturk_label_errors.json"), "--format", "mturk"],
        ["predictions", "import", str(VAL / "cleanlab_cv_predicted_labels_by_index.npy"), "--run", "cleanlab-cv",
         "--order", str(VAL / "index_to_filepath.json")],
        ["votes", "import", str(VAL / "real_raters.npz"), "--format", "real-raters", "--name", "real-raters",
         "--quiet"],
        ["snapshot", "create", SNAPSHOT, "--consensus", "ds", "--votes", "real-raters", "--no-studio-votes",
         "--quiet"],
        ["evaluate", "--reference", "imgt", "--reference", "real", "--reference", "shankar", "--reference", "mturk",
         "--reference", f"snapshot:{SNAPSHOT}", "--metric", "shankar", "--out", str(report)],
    ]  # fmt: skip
    for args in steps:
        relabel([*base, *args])
    return report


def check_parts(report: Path) -> list[str]:
    """One line per run and reference: the paired difference and its three parts, checked to sum exactly."""
    data = json.loads((report / "evaluation.json").read_text())
    paired = {(s["run"], s["reference"]): s["paired"] for s in data["scores"] if s["paired"]}
    lines = []
    for change in data["label_changes"]:
        p, d = change["parts"], paired[(change["run"], change["reference"])]
        if p["n_leniency"] + p["n_a_wrong"] - p["n_dropped"] != d["n_only_b"] - d["n_only_a"]:
            raise SystemExit(f"the parts of {change['run']} under {change['reference']} do not sum to the difference")
        n = p["n_common"]
        lines.append(
            f"{change['run']} {change['reference']}: {100 * (d['n_only_b'] - d['n_only_a']) / n:+.2f} = "
            f"{100 * p['n_leniency'] / n:+.2f} leniency {100 * p['n_a_wrong'] / n:+.2f} imgt wrong "
            f"{-100 * p['n_dropped'] / n:+.2f} dropped (n = {n:,})"
        )
    return lines


def check_uncertain(report: Path) -> list[str]:
    """One line per run against the snapshot: its uncertain images (votes that settle nothing) and unrated images
    (nobody rated them), checked to add up to its category U images, and the aggregation-sensitivity rows."""
    data = json.loads((report / "evaluation.json").read_text())
    sensitivity = {(i["run"], i["reference"]): i for i in data["label_sensitivity"]}
    markdown = (report / "report.md").read_text()
    if "## Aggregation sensitivity" not in markdown or not sensitivity:
        raise SystemExit("the report has no aggregation-sensitivity table")
    lines = []
    for s in data["scores"]:
        if s["reference"] != SNAPSHOT:
            continue
        u, category = s["uncertain"], s["per_category"]["U"]
        n_u = category["n_scored"] + category["n_excluded"]
        uncertain = n_u - u["n_unrated"]
        if f"| {uncertain} | {u['n_draws']} |" not in markdown:
            raise SystemExit(f"the label-uncertainty table of {s['run']} does not show {uncertain} uncertain images")
        item = sensitivity[(s["run"], SNAPSHOT)]
        lines.append(
            f"{s['run']} {SNAPSHOT}: {uncertain:,} uncertain + {u['n_unrated']:,} unrated = {n_u:,} in category U; "
            f"{len(item['rows'])} aggregation-sensitivity rows"
        )
    return lines


def publish(report: Path, out: Path, name: str = "example-report") -> Path:
    """report.md as OUT/NAME.md, its figures in OUT/NAME/ (links rewritten)."""
    figures = out / name
    figures.mkdir(parents=True, exist_ok=True)
    for png in report.glob("*.png"):
        shutil.copyfile(png, figures / png.name)
    markdown = (report / "report.md").read_text()
    markdown = re.sub(r"\]\(([\w.-]+\.png)\)", rf"]({figures.name}/\1)", markdown)
    target = out / f"{name}.md"
    target.write_text(markdown)
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("docs"), help="folder for the Markdown and its figures")
    args = parser.parse_args()
    if not VAL.is_dir():
        parser.error(f"{VAL} not found: the shared data set must sit beside the checkout")
    with tempfile.TemporaryDirectory() as tmp:
        report = build_report(Path(tmp))
        print("\n".join(check_parts(report) + check_uncertain(report)))
        print(f"wrote {publish(report, args.out)}")


if __name__ == "__main__":
    main()
