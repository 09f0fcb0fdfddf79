"""Simulation commands: replay a review on answers given already, to compare review orders before paying for one."""

from __future__ import annotations

import json
from pathlib import Path

import click

from relabel.cli.options import dataset_option, pass_settings
from relabel.common.settings import Settings


@click.group()
def simulate() -> None:
    """Replay work on answers a dataset holds already (e.g. ReaL's raters), to see what an order of review buys.

    \b
    Examples:
      relabel simulate review --reference real
    """


def _names(values: tuple[str, ...]) -> list[str]:
    """--x a,b --x c as [a, b, c]."""
    return [n.strip() for v in values for n in v.split(",") if n.strip()]


@simulate.command("review")
@click.option("--reference", required=True, help="Label source to measure agreement with (e.g. real).")
@click.option(
    "--sources", multiple=True, help="Imported vote sources to replay (repeatable, comma-separated; default: all)."
)
@click.option(
    "--runs", multiple=True, help="Stored runs whose top-1 to follow (repeatable, comma-separated; default: all)."
)
@click.option(
    "--orders", default="random,disputed,active", show_default=True,
    help="Review orders to compare: random, disputed, active, learned.",
)  # fmt: skip
@click.option("--step", type=click.IntRange(min=1), default=250, show_default=True, help="Reviews between refits.")
@click.option("--budget", type=click.IntRange(min=0), help="Reviews to replay (default: a third of the images).")
@click.option("--seed", type=int, default=0, show_default=True, help="Draws the first answers, the random order, ties.")
@click.option("--threshold", type=float, default=0.9, show_default=True, help="Posterior a class needs.")
@click.option(
    "--keep-original", type=float, default=0.5, show_default=True, help="Posterior ImGT's class needs; 0: off."
)
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), help="Write the curves here.")
@dataset_option()
@click.option("--quiet", is_flag=True, help="No progress bar.")
@pass_settings
def simulate_review(
    settings: Settings, reference: str, sources: tuple[str, ...], runs: tuple[str, ...], orders: str, step: int,
    budget: int | None, seed: int, threshold: float, keep_original: float, json_out: Path | None,
    dataset: str | None, quiet: bool,
) -> None:  # fmt: skip
    """Replay a review of the imported votes: start from one answer per (image, class) pair plus ImGT; a review
    of an image reveals its other answers; every --step reviews the Dawid-Skene consensus is rebuilt and its
    agreement with --reference and each run's top-1 are measured, for each order (random, disputed: the queue's
    uncertain-first priority, active: expected benefit of a review, learned: the chance a review changes the label
    set, from a model fitted on the images already reviewed).

    \b
    Examples:
      relabel simulate review --sources real-raters --reference real --step 250 --json curves.json
      relabel simulate review --reference real --orders random,active --budget 2000 --runs resnet50
      relabel simulate review --reference real --orders random,learned
    """
    from relabel.common.progress import progress_bar
    from relabel.planning.pool import load_pool
    from relabel.planning.simulation import check_order, curve_lines, simulate, steps_as_dicts

    chosen = [check_order(o) for o in _names((orders,))]
    loaded = load_pool(
        settings.engine,
        reference=reference,
        dataset=dataset,
        sources=_names(sources) or None,
        runs=_names(runs) or None,
    )
    pool = loaded.pool
    budget = min(pool.n_images // 3 if budget is None else budget, pool.n_images)
    click.echo(
        f"{pool.n_images:,} images ({pool.votes.n_items:,} pairs, {len(pool.votes.item):,} answers of "
        f"{', '.join(loaded.sources)}) against {reference}"
        + (
            f"; {loaded.unreferenced:,} voted images without a {reference} label left out"
            if loaded.unreferenced
            else ""
        )
        + f"; runs: {', '.join(pool.run_names) or 'none'}; {budget:,} reviews, a refit every {step}"
    )
    curves = {}
    bar = progress_bar(budget * len(chosen), "simulate", enabled=not quiet, unit="review")
    for order in chosen:
        done = [0]

        def advance(s, _state, order: str = order, done: list[int] = done) -> None:  # noqa: ANN001
            bar.update(s.reviews - done[0])
            done[0] = s.reviews
            bar.set_postfix_str(f"{order}: sets {100 * s.set_agreement:.2f} %")

        curves[order] = simulate(pool, order, step, budget, seed, threshold, keep_original or None, advance)
    bar.close()
    for line in curve_lines(curves, pool.run_names):
        click.echo(line)
    if json_out is not None:
        body = {"reference": reference, "sources": list(loaded.sources), "images": pool.n_images, "step": step,
                "seed": seed, "threshold": threshold, "keep_original": keep_original or None,
                "curves": {o: steps_as_dicts(c, pool.run_names) for o, c in curves.items()}}  # fmt: skip
        json_out.write_text(json.dumps(body, indent=1) + "\n")
        click.echo(f"wrote {json_out}")


COMMANDS = [simulate]
