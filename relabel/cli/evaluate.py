"""`relabel evaluate`: score stored runs against references, robustness runs, and the history of evaluations."""

from __future__ import annotations

from pathlib import Path

import click

from relabel.cli.choices import registry_option
from relabel.cli.options import dataset_option
from relabel.cli.suggest import model_option
from relabel.common.settings import Settings

OUT_DIR = click.Path(file_okay=False, path_type=Path)


@click.group(invoke_without_command=True)
@dataset_option()
@click.option("--run", "runs", multiple=True, help="Model run to score; repeat for several (default: every run).")
@click.option(
    "--reference",
    "references",
    multiple=True,
    help="imgt, a prior source (real), snapshot:NAME or latest; repeat for several "
    "(default: imgt and the newest snapshot). Only these enter any table: the reliability table scores against the "
    "cleanest of them (a named snapshot, else the named prior labelling the most images, else imgt; MC runs "
    "against imgt); a snapshot or prior not named is never used.",
)
@registry_option(
    "--weights",
    entries="evaluator.reliability_parts:weight_entries",
    choose=False,
    default="",
    help="Weights of the reliability overall score, NAME=NUMBER separated by commas (e.g. P=2,E=0); a part not "
    "named has weight 1, 0 leaves it out. Parts: {entries}.",
)
@click.option(
    "--metric",
    "metrics",
    multiple=True,
    help="Also score with a published metric: shankar (Shankar et al. 2020's own reading of an imported Shankar "
    "source; shankar:SOURCE names it). Repeat for several.",
)
@click.option(
    "--boot",
    type=int,
    default=1000,
    show_default=True,
    help="Bootstrap resamples for paired differences and rank intervals, the reliability table's intervals (CDC, "
    "RR, overall score, ranks), and label draws (each with a resample) for the expected top-1 against a "
    "probabilistic snapshot (0: none; top-1 always has its Wilson interval).",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the bootstrap.")
@click.option("--out", type=OUT_DIR, help="Report folder (default: WORKSPACE/reports/<UTC time>).")
@click.option("--no-report", is_flag=True, help="Print and store only; write no report files.")
@click.option("--history", is_flag=True, help="Print the stored evaluations and how each run's score moved.")
@click.option("--quiet", is_flag=True, help="No step lines on stderr (they show on a terminal).")
@click.option(
    "--protocol-analysis",
    is_flag=True,
    help="Also compare each model's protocols on common images (ow/cw/cwplus, random → hard mc), out-of-prompt "
    "rate per class, failure rate per run, and the batch-size and option-order ablations; printed and added to the "
    "report.",
)
@click.pass_context
def evaluate(
    ctx: click.Context,
    dataset: str | None,
    runs: tuple[str, ...],
    references: tuple[str, ...],
    weights: str,
    metrics: tuple[str, ...],
    boot: int,
    seed: int,
    out: Path | None,
    no_report: bool,
    history: bool,
    quiet: bool,
    protocol_analysis: bool,
) -> None:
    """Score stored model runs against ImGT and ReGT references; store the evaluation and write a report.

    Nothing is re-run: the stored predictions are rescored, so run this after every labeling round. Every run's
    row is computed on the images that run scored, so adding a run never changes another run's numbers;
    comparisons across runs (ranks, Kendall's tau) are on the images all of them scored, printed with their count.
    Against a
    snapshot that stores posteriors (`snapshot create --consensus ds`), the expected top-1 over label sets sampled
    from them and its interval with label uncertainty (after Stutz et al. 2023) are shown beside top-1.
    Runs of the pope and caption protocols get their own tables: POPE's presence numbers per sampling and CHAIR,
    against the first reference and each other one side by side.

    \b
    Examples:
      relabel evaluate                                   # every run vs imgt and the newest snapshot
      relabel evaluate --reference imgt --reference real --run cv
      relabel evaluate --reference imgt --reference real --reference shankar --metric shankar
      relabel evaluate --reference snapshot:round-3-ds   # a ds snapshot: expected top-1 with label noise
      relabel evaluate --weights P=1,CDC=1,RR=2,E=0.5 --out reports/round-3
      relabel evaluate --history                         # how each run's score moved across rounds
      relabel evaluate --reference imgt --protocol-analysis  # protocols, batch size and option order compared
      relabel evaluate robustness --model efficientnet-lite0 --limit 200
    """
    if ctx.invoked_subcommand is not None:
        return
    from relabel.evaluation import evaluate as evaluate_runs
    from relabel.evaluation import evaluation_history, text
    from relabel.evaluation.reliability import parse_weights

    settings: Settings = ctx.obj
    if history:
        click.echo(text.render_history(evaluation_history(settings.engine, dataset)))
        return
    ev = evaluate_runs(
        settings.engine, dataset, runs=runs, references=references, weights=parse_weights(weights), metrics=metrics,
        n_boot=boot, seed=seed, show_progress=not quiet,
    )  # fmt: skip
    click.echo(text.render_evaluation(ev))
    report = None
    if not no_report:  # the report's plots import matplotlib: only when a report is written
        from relabel.evaluation.report import default_report_dir, write_report

        report = write_report(ev, out or default_report_dir(settings.workspace)).markdown
    if protocol_analysis:
        from relabel.evaluation.protocol_analysis import analyze_protocols
        from relabel.evaluation.protocol_analysis_text import add_protocol_section, render_protocol_analysis

        analysis = analyze_protocols(settings.engine, ev, n_boot=boot, seed=seed)
        if report is not None:
            add_protocol_section(analysis, report)
        click.echo(render_protocol_analysis(analysis))
    if report is not None:
        click.echo(f"report: {report}")


@evaluate.command("robustness")
@model_option
@dataset_option()
@click.option("--limit", type=int, help="At most N images (in the seeded order).")
@click.option(
    "--perturbations", default="all", show_default=True, help="Comma-separated names, or all (those the model reads)."
)
@click.option("--severities", default="1-5", show_default=True, help="A range (1-5) or a list (1,3,5).")
@click.option("--reference", "references", multiple=True, help="Reference(s) to score against (default: imgt).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of image order, noise, typos.")
@registry_option(
    "--protocol",
    entries="relabel.suggest.protocols:generative_summaries",
    help="How a generative model is asked (default cw): {entries}. Scoring models are always read by their ranked "
    "scores.",
)
@click.option("--encoder", help="Text encoder mapping ow/cwplus answers (default: the protocol's, minilm).")
@registry_option(
    "--distractors",
    entries="relabel.suggest.distractor_sources:distractor_summaries",
    choose=False,
    default="hard",
    show_default=True,
    help="mc protocol: the distractors, as for relabel suggest: {entries}.",
)
@click.option("--batch-size", type=int, help="Images per forward pass (default: the model's own).")
@click.option("--device", default="auto", show_default=True, help="auto, cpu, cuda, mps.")
@click.option("--base-url", envvar="OPENAI_BASE_URL", help="OpenAI-compatible server (env OPENAI_BASE_URL).")
@click.option("--out", type=OUT_DIR, help="Report folder (default: WORKSPACE/reports/<UTC time>).")
@click.option("--no-report", is_flag=True, help="Print and store only; write no report files.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@click.pass_obj
def robustness(
    settings: Settings,
    model_spec: str,
    dataset: str | None,
    limit: int | None,
    perturbations: str,
    severities: str,
    references: tuple[str, ...],
    seed: int,
    protocol: str | None,
    encoder: str | None,
    distractors: str,
    batch_size: int | None,
    device: str,
    base_url: str | None,
    out: Path | None,
    no_report: bool,
    quiet: bool,
) -> None:
    """Run a model on clean and perturbed inputs: top-1, robustness retention (RR), latency, memory.

    Image perturbations (ImageNet-C style, seeded): gaussian_noise, shot_noise, impulse_noise, gaussian_blur,
    defocus_blur, motion_blur, jpeg, contrast, brightness, pixelate. Text perturbation: typo (seeded keyboard
    typos) in the class names of CLIP/SigLIP or in the instructions of a generative model's prompt (the
    listed classes and options stay as written); image-only classifiers read
    no text and refuse it. Generative models are asked through --protocol (default cw; mc draws --distractors,
    hard by default). The result is stored
    with each image's outcome per condition; `relabel evaluate` folds it into the reliability table (RR, with an
    interval over resamples of these images, and E).

    \b
    Examples:
      relabel evaluate robustness --limit 100 --perturbations gaussian_noise,jpeg --severities 1-5
      relabel evaluate robustness --model clip:openai/clip-vit-base-patch32 --perturbations typo,jpeg
      relabel evaluate robustness --model hf-vlm:Qwen/Qwen2.5-VL-3B-Instruct --protocol cw --limit 50 \\
          --perturbations typo,gaussian_noise --severities 1,3,5
      relabel evaluate robustness --model openai:gpt-4o --protocol mc --distractors hard --limit 50 \\
          --perturbations jpeg
    """
    from relabel.evaluation import text
    from relabel.evaluation.report import default_report_dir, write_robustness_report
    from relabel.evaluation.robustness import model_options, parse_perturbations, parse_severities, run_robustness
    from relabel.evaluation.robustness_summary import build_robustness_summary

    result = run_robustness(
        settings.engine,
        model=model_spec,
        dataset=dataset,
        references=references or ("imgt",),
        perturbations=parse_perturbations(perturbations),
        severities=parse_severities(severities),
        limit=limit,
        seed=seed,
        protocol=protocol,
        encoder=encoder,
        distractors=distractors,
        cache_dir=None,  # class-text embeddings: the user's cache, shared by every workspace
        adapter_options=model_options(model_spec, device=device, batch_size=batch_size, base_url=base_url),
        show_progress=not quiet,
    )
    summary = build_robustness_summary(result)  # RR's interval: one bootstrap for the text and the report
    click.echo(text.render_robustness(summary))
    if not no_report:
        folder = out or default_report_dir(settings.workspace)
        click.echo(f"report: {write_robustness_report(summary, folder).markdown}")


COMMANDS = [evaluate]
