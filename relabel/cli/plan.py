"""`relabel plan`: how many more reviews, in the active order, until the stored runs' scores stop moving."""

from __future__ import annotations

import json

import click

from relabel.cli.options import dataset_option, pass_settings
from relabel.common.settings import Settings
from relabel.planning.plan import REVIEW_RESIDUAL, STABILITY, TARGET_HALFWIDTH


@click.command("plan")
@dataset_option()
@click.option(
    "--snapshot", help="A snapshot whose consensus read votes (default: the newest such snapshot of the dataset)."
)
@click.option("--run", "runs", multiple=True, help="Stored run to plan for; repeat for several (default: every run).")
@click.option(
    "--target",
    type=float,
    default=TARGET_HALFWIDTH,
    show_default=True,
    help="Half-width, in points of top-1, each run's interval from label uncertainty must reach.",
)
@click.option(
    "--stability",
    type=float,
    default=STABILITY,
    show_default=True,
    help="Probability with which the ranking of the runs must hold.",
)
@click.option(
    "--residual",
    type=float,
    default=REVIEW_RESIDUAL,
    show_default=True,
    help="Share of an image's variance one review leaves (measured on a replay of ReaL's raters, BENCHMARKS.md); "
    "0 assumes a review settles the image.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@pass_settings
def plan(
    settings: Settings,
    dataset: str | None,
    snapshot: str | None,
    runs: tuple[str, ...],
    target: float,
    stability: float,
    residual: float,
    as_json: bool,
) -> None:
    """How many more reviews, in the active order, until (a) each run's top-1 interval from label uncertainty is
    within ±TARGET points and (b) the ranking of the runs holds with probability STABILITY.

    From the posteriors of a vote-based snapshot and the stored runs. A review is assumed to remove (1 - RESIDUAL)
    of its image's share of each run's variance, the expected scores staying as they are (relabel.planning.plan
    states every assumption). Refitting the consensus moves other images too, so treat the numbers as a forecast
    and run the command again after each round.

    \b
    Examples:
      relabel plan                                   # every run, the newest vote-based snapshot
      relabel plan --snapshot round-2-ds --run resnet50 --run vit-b16 --target 0.5
      relabel plan --json > plan.json
    """
    from relabel.planning.budget import plan_reviews

    report = plan_reviews(
        settings.engine, dataset=dataset, snapshot=snapshot, runs=runs, target_halfwidth=target, stability=stability,
        residual=residual,
    )  # fmt: skip
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
        return
    for line in plan_lines(report.to_dict()):
        click.echo(line)


def plan_lines(d: dict) -> list[str]:
    """The plan as a short table and two lines (from `BudgetReport.to_dict`)."""
    target, unrated = d["target_halfwidth"], d["n_unrated"]
    left_out = f", {unrated:,} nobody rated left out" if unrated else ""
    lines = [
        f"snapshot {d['snapshot']!r} ({d['rule']}): {d['n_images']:,} images{left_out}; "
        f"reviews counted in the active order (pool {d['pool']:,}), each leaving {d['residual']:g} of its variance"
    ]
    width = max(len("run"), *(len(r["run"]) for r in d["runs"]))
    lines.append(f"{'run':<{width}}  {'top-1 now':>9}  {'± now':>6}  reviews until ±{target:g}")
    for r in d["runs"]:
        top1 = "n/a" if r["top1"] is None else f"{r['top1']:.2f}"
        half = "n/a" if r["halfwidth"] is None else f"±{r['halfwidth']:.2f}"
        lines.append(f"{r['run']:<{width}}  {top1:>9}  {half:>6}  {_reviews(r['reviews_until_target'])}")
    lines.append(f"every run within ±{target:g}: {_reviews(d['reviews_until_halfwidth'])}")
    lines.append(_ranking_line(d))
    if d.get("caution"):
        lines.append(f"caution: {d['caution']}")
    return lines


def _ranking_line(d: dict) -> str:
    pairs = d["ranking_pairs"]
    if not pairs:
        return f"ranking: one run ({d['ranking'][0]}), nothing to order"
    shown = d["ranking"][0] + "".join(f" {'=' if p['tied'] else '>'} {p['below']}" for p in pairs)
    now = f"ranking {shown}: holds with {100 * d['ranking_stability']:.1f} % now"
    tied = [f"{p['above']} and {p['below']}" for p in pairs if p["tied"]]
    if tied:
        return f"{now}; {', '.join(tied)} have the same top-1: no number of reviews orders them"
    if d["reviews_until_stable_ranking"] is None:
        top1 = {r["run"]: r["top1"] for r in d["runs"]}
        weakest = min(pairs, key=lambda p: p["after_pool"])
        gap = top1[weakest["above"]] - top1[weakest["below"]]
        return (
            f"{now}; reaches {100 * d['stability']:g} % not within the pool: {weakest['above']} and "
            f"{weakest['below']} are {gap:.2f} points apart and would keep their order with "
            f"{100 * weakest['after_pool']:.1f} % after every review: on these images the two are level"
        )
    return f"{now}; reaches {100 * d['stability']:g} % {_reviews(d['reviews_until_stable_ranking'])}"


def _reviews(k: int | None) -> str:
    if k is None:
        return "not within the pool"
    return "now" if k == 0 else f"after {k:,} more reviews"


COMMANDS = [plan]
