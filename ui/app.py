"""The annotation studio as a Gradio app: review, adjudication, dashboard, snapshots and reports.

Login is Gradio's own (`launch(auth=studio.login)`). The review and adjudication cards are drawn in the page by
one script each (`ui.card_component`), which sends every action as one request to the card's server functions and
gets the next card back: the 1000 classes never travel with a card, and nothing is kept in the browser's run
history. Leads' tabs are Gradio components that load when the lead opens them. Every handler takes the user from
the server-side session; lead-only handlers check the role again on the server.

The web trust boundary sits in front of Gradio's routes: sign-in is throttled and hashed off the event loop
(`ui.login`); requests for other host names, cross-origin requests, sign-out by GET and the API listing are
refused, cookies are SameSite=Lax, and `X-Forwarded-For` counts only from the trusted proxies (`ui.security`);
uploads are capped at MAX_UPLOAD and request bodies at MAX_BODY. Sign-in sessions are rows of the database, shared
by every studio process on it (`ui.sessions`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gradio as gr
from starlette.middleware import Middleware

from relabel.review.sessions import DbSessions, cookie_id
from relabel.review.studio import Studio
from ui import dashboard_tab, grid_tab, guidelines_tab, handlers, reports_tab, snapshots_tab
from ui.card_component import asset, card
from ui.context import WorkspaceContext
from ui.events import guarded
from ui.login import FREE_PER_USER, LOCK_S, LoginGuard
from ui.security import StudioGuard, served_hosts
from ui.sessions import SessionTokens, SharedSessions

MAX_UPLOAD = "1mb"  # the studio has no upload component; Gradio's upload route takes files up to this size
MAX_BODY = 2 * 1024 * 1024  # bytes of any request body: the studio's own requests are small JSON
AUTH_MESSAGE = (
    "ReGT studio: sign in with the name and password a lead gave you (relabel users add). "
    f"After {FREE_PER_USER} failed sign-ins a name is locked for {LOCK_S:.0f} s, then twice as long after each "
    "further failure, and even the right password is refused until then."
)

# Gradio's page chrome, made compact so the card fits a 1366×768 screen without scrolling.
PAGE_CSS = """
.gradio-container { padding-top: 0 !important; padding-bottom: 0 !important; }
.gradio-container > .main { padding-top: 4px !important; }
#studio-tabs { gap: 0 !important; }
#studio-tabs .tabitem { padding-top: 4px !important; }
#review-card .html-container, #adjudicate-card .html-container { padding: 0 !important; }
footer { display: none !important; }
"""


class StudioBlocks(gr.Blocks):
    """Blocks whose API listing is empty: the studio's events are for its own page, so `/gradio_api/info`, the
    listing embedded in the page (the login page too) and the "view API" page name none. Clients that know an
    event's name (gradio_client, for leads' scripts) still call it, signed in, as before."""

    def get_api_info(self, all_endpoints: bool = False, page: str | None = None) -> Any:
        return {"named_endpoints": {}, "unnamed_endpoints": {}}


def build_app(studio: Studio, *, exports_dir: Path, reports_dir: Path) -> gr.Blocks:
    """The studio's Blocks; `launch_app` serves it."""
    workspace = WorkspaceContext.of(studio, reports_dir)  # all the Dashboard and Reports tabs see of the studio
    with StudioBlocks(title="ReGT studio", fill_width=True) as app:
        with gr.Tabs(elem_id="studio-tabs"):
            with gr.Tab("Review", id="review"):
                card(studio, "review")
            with gr.Tab("Adjudicate", id="adjudicate", visible=False) as adjudicate_tab:
                card(studio, "adjudicate")
            with gr.Tab("Images", id="images", visible=False) as images_tab:
                grid_tab.build(studio, guarded, images_tab)
            with gr.Tab("Dashboard", id="dashboard", visible=False) as dash_tab:
                guidelines_tab.build(studio, guarded)
                dashboard_tab.build(workspace, guarded, dash_tab, lambda u: handlers.reload_queue(studio, u))
            with gr.Tab("Snapshots", id="snapshots", visible=False) as snap_tab:
                snapshots_tab.build(studio, guarded, exports_dir, snap_tab)
            with gr.Tab("Reports", id="reports", visible=False) as rep_tab:
                reports_tab.build(workspace, guarded, rep_tab)

        def on_load(user: str) -> tuple[Any, ...]:
            _, role = studio.user(user)
            return tuple(gr.Tab(visible=role.value == "lead") for _ in range(5))

        lead_tabs = [adjudicate_tab, images_tab, dash_tab, snap_tab, rep_tab]
        app.load(guarded(on_load), None, lead_tabs, api_visibility="private")
    return app


def launch_app(
    studio: Studio,
    *,
    host: str = "127.0.0.1",
    port: int | None = None,
    exports_dir: Path,
    block: bool = True,
    concurrency: int = 16,
    reports_dir: Path | None = None,
    allowed_hosts: Sequence[str] = (),
    trusted_proxies: Sequence[str] = (),
) -> gr.Blocks:
    """Serve the studio. Never creates a share link; binds 127.0.0.1 unless told otherwise. Requests must name a
    loopback name, `host` or one of `allowed_hosts`; `X-Forwarded-For` is read only from `trusted_proxies`
    (addresses or networks, checked by `ui.security.check_trusted_proxy`), by default from no one."""
    exports_dir.mkdir(parents=True, exist_ok=True)
    reports_dir = reports_dir or exports_dir.parent / reports_tab.REPORTS_DIR  # both in the workspace by default
    reports_dir.mkdir(parents=True, exist_ok=True)
    # Card images are served from the display cache where they lie instead of being copied into Gradio's cache on
    # every card; /file= still requires a signed-in session. The cache holds only images the studio wrote or
    # linked in under an image suffix; dataset roots, exports and reports are never served as they are (lead-only
    # downloads go out as copies, ui.files).
    gr.set_static_paths([studio.display.folder])
    app = build_app(studio, exports_dir=exports_dir, reports_dir=reports_dir)
    # Gradio rebuilds a pandas summary of up to 10,000 past events after every event by default: O(events) work
    # per event that only its monitoring page reads. Summarise every 1000 events over the last 2000 instead.
    os.environ.setdefault("GRADIO_ANALYTICS_CACHE_FREQUENCY", "1000")
    os.environ.setdefault("GRADIO_ANALYTICS_MAX_EVENTS", "2000")
    app.queue(default_concurrency_limit=concurrency)
    tokens = SessionTokens(DbSessions(studio.engine))
    # uvicorn rewrites the client address from X-Forwarded-For for the peers this names (its default: 127.0.0.1,
    # so any local page or program could choose its address); Gradio builds uvicorn's config from the environment.
    os.environ["FORWARDED_ALLOW_IPS"] = ",".join(trusted_proxies)
    app.launch(
        server_name=host,
        server_port=port,
        share=False,
        # a coroutine: Gradio awaits it instead of hashing on its event loop (its type says a plain function)
        auth=LoginGuard.shared(studio.login, studio.engine).login,  # type: ignore[arg-type]
        auth_message=AUTH_MESSAGE,
        allowed_paths=[str(studio.display.folder)],
        max_file_size=MAX_UPLOAD,
        app_kwargs={
            "middleware": [
                Middleware(StudioGuard, served=served_hosts(host, allowed_hosts)),
                # sign-in sessions in the database, shared by every process on it (inside the guard: only
                # same-origin sign-ins and sign-outs reach it)
                Middleware(SharedSessions, tokens=tokens, cookie_id=cookie_id(studio.engine)),
            ],
            "max_body_size": MAX_BODY,
        },
        prevent_thread_lock=not block,
        quiet=True,
        show_error=True,
        css=PAGE_CSS + asset("card.css"),
        footer_links=[],
        ssr_mode=False,
        # Gradio's run history keeps every event in the browser's storage and rewrites it on each one: the page
        # slowed down card by card. The studio's own audit trail is in the workspace.
        run_history=False,
    )
    return app
