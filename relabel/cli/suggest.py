"""`relabel suggest`: run a model over the dataset and store its answers as a model run."""

from __future__ import annotations

import click

from relabel.cli.choices import registry_option
from relabel.cli.options import dataset_option, pass_settings
from relabel.common.settings import Settings
from relabel.suggest.failures import STOP_AFTER_FAILURES

model_option = registry_option(
    "--model",
    "model_spec",
    entries="relabel.suggest.adapters:kind_examples",
    choose=False,
    default="efficientnet-lite0",
    show_default=True,
    help="KIND:MODEL: {entries}.",
)


@click.command()
@model_option
@registry_option("--protocol", entries="relabel.suggest.protocols:protocol_summaries", help="{entries}.")
@click.option(
    "--run", "run_name", help="Model run name (default MODEL@PROTOCOL); run again to resume and retry failed calls."
)
@click.option(
    "--retry-errors",
    is_flag=True,
    help="Also ask again for the run's final errors (refused requests, unreadable answers); answers already "
    "received are read again from the response cache, not paid for twice.",
)
@click.option(
    "--images",
    "which",
    type=click.Choice(["all", "suspect"]),
    default="all",
    show_default=True,
    help="suspect: only images whose original label other evidence contradicts (no ImGT label, a prior "
    "relabel or another run's top-1 without it).",
)
@click.option("--limit", type=int, help="At most N images (in the seeded order).")
@dataset_option()
@click.option("--concurrency", type=int, default=8, show_default=True, help="Requests in flight (API models).")
@click.option(
    "--max-retries",
    type=int,
    default=5,
    show_default=True,
    help="API models: retries of a request that failed for a passing reason, with backoff.",
)
@click.option(
    "--stop-after-failures",
    type=int,
    default=STOP_AFTER_FAILURES,
    show_default=True,
    help="API models: stop the run after N requests in a row get no answer (server down, 429/5xx, timeouts).",
)
@click.option(
    "--batch-size",
    type=int,
    help="Images per forward pass (local models; default: the model's own, 8 for EfficientNet-Lite0).",
)
@click.option(
    "--threads",
    type=int,
    help="torch threads for local models (default: 1 when the machine's load average reaches its core count, "
    "else torch's default, at most the core count).",
)
@click.option("--images-per-request", type=int, default=1, show_default=True, help="Images in one prompt (ow, cw).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the image order and MC options.")
@click.option("--mc-options", type=int, default=4, show_default=True, help="Options per MC question.")
@registry_option(
    "--distractors",
    entries="relabel.suggest.distractor_sources:distractor_summaries",
    choose=False,
    default="random",
    show_default=True,
    help="MC distractors: {entries}. Join sources with + to try them in order, e.g. "
    "imagenet-confusions+wordnet, or with | to merge them in turns, e.g. 'imagenet-confusions|real-proposals'; "
    "a run: of the model under test is refused. pope: the sources of its adversarial negatives (random: the "
    "default hard sources).",
)
@click.option(
    "--distractor-spread",
    type=int,
    default=1,
    show_default=True,
    help="MC: each source picks among its best N × free slots classes (1: always its most confusable ones).",
)
@click.option(
    "--reference",
    help="pope: the labels its probes are built on: imgt (default), snapshot:NAME, latest or a prior source.",
)
@click.option(
    "--pope-negatives",
    type=int,
    default=1,
    show_default=True,
    help="pope: negative probes per image for each sampling (random, popular, adversarial).",
)
@click.option(
    "--accept-synonyms",
    is_flag=True,
    help="cw/cwplus: also accept an unlisted synonym or wnid as its class (still counted out-of-prompt).",
)
@click.option("--encoder", help="Text encoder for mapping: minilm, st:MODEL, ... (default: the protocol's, minilm).")
@click.option("--base-url", envvar="OPENAI_BASE_URL", help="OpenAI-compatible server (env OPENAI_BASE_URL).")
@click.option("--max-side", type=int, default=1024, show_default=True, help="Longest image side sent to API models.")
@click.option(
    "--no-cache",
    "no_cache",
    is_flag=True,
    help="API models: neither read answers from the response cache nor store them (every request is sent).",
)
@click.option(
    "--batch-api",
    is_flag=True,
    help="openai models: send the requests as OpenAI Batch API jobs (half the price, answers within 24 h); "
    "run the same command again after an interruption to pick up the same batch.",
)
@click.option("--poll-seconds", type=float, default=30.0, show_default=True, help="--batch-api: seconds between polls.")
@click.option("--device", default="auto", show_default=True, help="auto, cpu, cuda, mps (local models).")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@pass_settings
def suggest(
    settings: Settings,
    model_spec: str,
    protocol: str | None,
    run_name: str | None,
    which: str,
    limit: int | None,
    dataset: str | None,
    retry_errors: bool,
    no_cache: bool,
    batch_api: bool,
    poll_seconds: float,
    quiet: bool,
    **options: object,
) -> None:
    """Run a model over the images and store its answers (suggestions for annotators, predictions for scoring).

    Running the same command again resumes: images already answered are skipped, and failed calls that may pass
    (server down, timeouts, HTTP 429/5xx) are asked again; answers already received come from the response cache,
    never paid for twice; the cache is per run, so another --run name (or another server) asks afresh. If the
    server goes down, the run stops early (exit status 75) and says how many images are done, failed and not
    started. The same command with --retry-errors (third example) also asks again for final errors: refused
    requests (HTTP 400) and answers that could not be read.

    \b
    Examples:
      relabel suggest                                           # offline EfficientNet-Lite0, top-5
      relabel suggest --model openai:gpt-4o --protocol cwplus --images suspect --concurrency 16
      relabel suggest --model openai:gpt-4o --protocol cwplus --images suspect --concurrency 16 --retry-errors
      relabel suggest --model openai:qwen2.5-vl --base-url http://localhost:8000/v1 --protocol ow
      relabel suggest --model openai:qwen2.5-vl --base-url http://localhost:8000/v1 --run again --no-cache
      relabel suggest --threads 1 --batch-size 8                # local model on a busy machine
      relabel suggest --model openai:gpt-4o --protocol cw --accept-synonyms    # synonyms/wnids still count as OOP
      relabel suggest --model hf-vlm:Qwen/Qwen2.5-VL-3B-Instruct --protocol mc --distractors hard
      relabel suggest --model openai:gpt-4o --protocol mc --distractors run:efficientnet-lite0@topk+wordnet
      relabel suggest --model openai:gpt-4o --protocol pope --reference latest   # yes/no probes, then evaluate
      relabel suggest --model openai:gpt-4o --protocol caption                   # captions for CHAIR
      relabel suggest --model clip:openai/clip-vit-base-patch32 --protocol retrieval  # embeddings for R@K, mAP
      relabel suggest --model openai:gpt-4o-mini --protocol cw --batch-api       # Batch API: half the price
    """
    from relabel.suggest.distractor_sources import distractors_line
    from relabel.suggest.failures import OutageError
    from relabel.suggest.protocols import task_of_protocol
    from relabel.suggest.retrieval_protocol import RETRIEVAL
    from relabel.suggest.runner import run_suggestions
    from relabel.suggest.setup import SuggestSettings, build_job, default_protocol

    s = SuggestSettings(model=model_spec, protocol=protocol, dataset=dataset, use_cache=not no_cache, **options)  # type: ignore[arg-type]
    if protocol is not None and task_of_protocol(protocol) == RETRIEVAL:  # embeddings, not answers
        from relabel.suggest.retrieval_run import run_retrieval_command

        click.echo(run_retrieval_command(settings, s, run_name, which, limit, retry_errors or batch_api, quiet))
        return
    from relabel.evaluation.probe_labels import reference_sets

    # class-text embeddings: the user's cache, shared by every workspace (relabel.suggest.embedding_cache)
    job = build_job(s, settings.engine, None, read_reference=reference_sets)
    name = run_name or f"{model_spec}@{protocol or default_protocol(model_spec)}"
    if batch_api:
        from relabel.suggest.batch_api import run_batch_suggestions

        r = run_batch_suggestions(
            job,
            dataset=dataset,
            run_name=name,
            which=which,
            limit=limit,
            retry_errors=retry_errors,
            poll_seconds=poll_seconds,
            show_progress=not quiet,
        )
    else:
        r = run_suggestions(
            job,
            dataset=dataset,
            run_name=name,
            which=which,
            limit=limit,
            retry_errors=retry_errors,
            show_progress=not quiet,
        )
    click.echo(r.line())
    if job.ctx.distractors is not None and (line := distractors_line(job.ctx.distractors.describe())):
        click.echo(f"  {line}")
    if r.usage:
        click.echo(f"  tokens: {r.usage}" + (f", estimated cost ${r.cost:.4f}" if r.cost is not None else ""))
    if r.stopped:
        raise OutageError(r.stop_message())


COMMANDS = [suggest]
