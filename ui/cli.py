"""`relabel serve`: the annotation studio. Registered on the `relabel` command through the `relabel.commands`
entry-point group, so the core package never imports the UI."""

from __future__ import annotations

import os

import click

from relabel.cli.options import dataset_option, pass_settings
from relabel.common.settings import Settings


@click.command()
@dataset_option()
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Address to bind; keep 127.0.0.1 unless behind a proxy."
)
@click.option("--port", type=click.IntRange(1, 65535), default=7860, show_default=True, help="Port to listen on.")
@click.option(
    "--overlap", type=click.IntRange(1, 100), default=1, show_default=True, help="Annotators per image (blind overlap)."
)
@click.option("--suggestion-run", help="Run whose answers are the suggestion (default: the newest OW/CW/CW+ run).")
@click.option("--classifier-run", help="Run shown as the classifier's top-5 (default: the newest top-k run).")
@click.option(
    "--concurrency", type=click.IntRange(1, 256), default=16, show_default=True, help="Requests handled at once."
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME",
    help="A host name users reach the studio by (behind a proxy: its public name); repeatable. localhost, "
    "127.0.0.1, ::1 and the --host address are always served; requests naming any other host are refused.",
)
@click.option(
    "--trusted-proxy",
    "trusted_proxies",
    multiple=True,
    metavar="ADDRESS",
    help="Address or network of a reverse proxy whose X-Forwarded-For names the client; repeatable. "
    "Default: none (each request counts as the address it comes from).",
)
@pass_settings
def serve(
    settings: Settings,
    dataset: str | None,
    host: str,
    port: int,
    overlap: int,
    suggestion_run: str | None,
    classifier_run: str | None,
    concurrency: int,
    allowed_hosts: tuple[str, ...],
    trusted_proxies: tuple[str, ...],
) -> None:
    """Open the annotation studio in the browser (sign in with a user from `relabel users add`).

    Annotators review cards, the most suspect images first; leads also adjudicate, watch the dashboard and create
    and export snapshots. Stop it with Ctrl-C: every acknowledged decision is already in the workspace.

    \b
    Examples:
      relabel users add alice --role annotator
      relabel users add lena --role lead
      relabel serve --overlap 3                     # three annotators per image
      relabel serve --suggestion-run gpt-4o@cwplus --port 8080
      relabel serve --allowed-host studio.lab.example --trusted-proxy 127.0.0.1   # behind nginx on this machine
    """
    from relabel.common.stages import stage
    from ui.security import WILDCARD_BINDS, check_allowed_host, check_trusted_proxy

    names = [check_allowed_host(h) for h in allowed_hosts]
    proxies = [check_trusted_proxy(p) for p in trusted_proxies]
    check_port_free(host, port)
    # Start-up takes seconds to a minute on a large dataset: each step says what it does while it runs.
    with stage("opening the workspace: dataset, runs and the review queue"):
        from relabel.evaluation.report import REPORTS_DIR
        from relabel.review.studio import Studio

        studio = Studio(
            settings.engine,
            dataset,
            cache_dir=settings.workspace / "cache",
            overlap=overlap,
            suggestion_run=suggestion_run,
            classifier_run=classifier_run,
        )
    with stage("loading the web framework (Gradio)"):
        from ui.app import launch_app
    counts = studio.queue.counts()
    click.echo(
        f"dataset {studio.dataset_name!r}: {counts['images']} images to review, overlap {overlap}; "
        f"suggestions from run {studio.runs.name(studio.runs.suggestion)!r}, "
        f"classifier run {studio.runs.name(studio.runs.classifier)!r}"
    )
    click.echo(f"studio on http://{host}:{port}  (Ctrl-C stops it)")
    if host in WILDCARD_BINDS and not names:
        click.echo("note: only localhost names are served; add --allowed-host NAME for the names users type")
    if os.environ.get("FORWARDED_ALLOW_IPS") and not proxies:
        click.echo("note: FORWARDED_ALLOW_IPS is not read; name the proxy with --trusted-proxy ADDRESS")
    click.echo("building the studio's pages and starting the server ...", err=True)
    launch_app(
        studio,
        host=host,
        port=port,
        exports_dir=settings.workspace / "exports",
        reports_dir=settings.workspace / REPORTS_DIR,
        concurrency=concurrency,
        allowed_hosts=names,
        trusted_proxies=proxies,
    )


def check_port_free(host: str, port: int) -> None:
    """Refuse, in one line, a port another program already listens on (before the studio loads its queue).

    The probe binds with SO_REUSEADDR, as the server itself does: after a crash the old connections linger in
    TIME_WAIT for about a minute, and they must not keep the studio from starting again at once; a port that a
    program listens on is still refused."""
    import socket

    from relabel.common.errors import InputError

    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as exc:
        raise InputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose another --port") from None
