"""The example robustness report in docs/: EfficientNet-Lite0 on 300 of the 1,000 ImageNet sample photos, clean and
under Gaussian noise, motion blur and JPEG at severities 1-5, with RR and its 95 % interval.

Builds a workspace in a temporary folder from ../shared/data/imagenet-sample through the tool's own commands:

  relabel ingest imagenet-sample
  relabel evaluate robustness --model efficientnet-lite0 --limit 300 \
      --perturbations gaussian_noise,motion_blur,jpeg --severities 1-5

and the report's Markdown goes to OUT/example-robustness-report.md, its figure to OUT/example-robustness-report/.
Latency and throughput are those of the machine it runs on (about 3 minutes on two CPU cores).

Example:
  HF_HUB_OFFLINE=1 python scripts/example_robustness_report.py --out docs
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from example_report import publish  # scripts/ is on the path when a script runs

from relabel.cli import main as relabel

SAMPLE = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "imagenet-sample"
NAME = "example-robustness-report"


def build_report(tmp: Path) -> Path:
    """The workspace and the robustness report in `tmp`; returns the report folder."""
    base = ["--workspace", str(tmp / "ws")]
    report = tmp / "report"
    steps = [
        ["ingest", str(SAMPLE), "--quiet"],
        ["evaluate", "robustness", "--model", "efficientnet-lite0", "--limit", "300",
         "--perturbations", "gaussian_noise,motion_blur,jpeg", "--severities", "1-5", "--quiet", "--out", str(report)],
    ]  # fmt: skip
    for args in steps:
        relabel([*base, *args])
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("docs"), help="folder for the Markdown and its figure")
    args = parser.parse_args()
    if not SAMPLE.is_dir():
        parser.error(f"{SAMPLE} not found: the shared data set must sit beside the checkout")
    with tempfile.TemporaryDirectory() as tmp:
        print(f"wrote {publish(build_report(Path(tmp)), args.out, NAME)}")


if __name__ == "__main__":
    main()
