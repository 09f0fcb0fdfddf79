"""The floor of the browser benchmark: a bare Gradio app that swaps photos on a key press.

One gr.Image and one button; pressing N clicks the button, whose handler returns the next photo's path. This is
the least a Gradio page can do per card on this machine, so the studio is measured against it in the same run.

Example:
  python bench/floor_app.py --port 7898 --photos /tmp/studio-bench/images
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import gradio as gr

HEAD = """<script>
document.addEventListener("keydown", (ev) => {
  if (ev.key === "n") document.querySelector("#floor-next").click();
});
</script>"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--photos", type=Path, required=True, help="a folder of JPEG photos to swap through")
    args = parser.parse_args()
    photos = sorted(str(p) for p in args.photos.glob("*.JPEG"))
    if not photos:
        raise SystemExit(f"no *.JPEG photos in {args.photos}")
    counter = itertools.count()

    def next_photo() -> str:
        return photos[next(counter) % len(photos)]

    with gr.Blocks(title="floor") as app:
        image = gr.Image(type="filepath", interactive=False, elem_id="floor-photo", height=480)
        button = gr.Button("next [N]", elem_id="floor-next")
        button.click(next_photo, None, image)
    app.launch(
        server_name="127.0.0.1",
        server_port=args.port,
        head=HEAD,
        quiet=True,
        ssr_mode=False,
        allowed_paths=[str(args.photos.resolve())],
    )


if __name__ == "__main__":
    main()
