"""The command line: help with examples, one-line errors, the demo, and the README covering every command."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from relabel.cli import cli, main
from tests import images
from tests.cli_process import run_relabel
from tests.conftest import REPO


def all_commands(group: click.Group = cli, prefix: str = "") -> list[tuple[str, click.Command]]:
    out = []
    for name, cmd in sorted(group.commands.items()):
        path = f"{prefix} {name}".strip()
        if isinstance(cmd, click.Group):
            out += all_commands(cmd, path)
        else:
            out.append((path, cmd))
    return out


def run(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    """`relabel --workspace tmp_path/ws ARGS` as the executable runs it, in this process (tests/cli_process.py)."""
    return run_relabel(["--workspace", str(tmp_path / "ws"), *args])


@pytest.mark.parametrize(("path", "command"), all_commands(), ids=lambda x: x if isinstance(x, str) else "")
def test_every_command_has_help_with_an_example(path: str, command: click.Command) -> None:
    result = CliRunner().invoke(cli, [*path.split(), "--help"])
    assert result.exit_code == 0
    assert re.search(r"Examples?:\n\s+relabel ", result.output), f"`relabel {path} --help` shows no example"


def test_readme_documents_every_command() -> None:
    readme = (REPO / "README.md").read_text()
    missing = [
        p
        for p, _ in all_commands()
        if f"relabel {p}" not in readme and f"relabel --workspace demo-workspace {p}" not in readme
    ]
    assert not missing, f"README.md does not show: {missing}"


def test_errors_are_one_line_on_stderr_with_nonzero_exit(tmp_path: Path) -> None:
    cases = [
        (["snapshot", "export", "nope", "--format", "real", "--out", str(tmp_path / "o.json")], "no dataset yet"),
        (["labels", "import", str(tmp_path / "missing.json"), "--format", "real"], "does not exist"),
        (["ingest", str(tmp_path / "nowhere"), "--layout", "folders"], "is not a directory"),
        (["snapshot", "create"], "Missing argument 'NAME'"),
    ]
    for args, expected in cases:
        r = run(args, tmp_path)
        assert r.returncode != 0, args
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("error: ") and expected in r.stderr, r.stderr
        assert "Traceback" not in r.stderr


def test_an_import_that_matches_no_image_fails_even_with_skip_unknown(tmp_path: Path) -> None:
    """ReaL labels are keyed by ImageNet val numbers: on a dataset of other file names nothing matches, and the
    command says so instead of importing 0 labels and exiting 0."""
    images.photo(tmp_path / "data" / "n01440764_a.jpg")
    (tmp_path / "real.json").write_text("[[0], [1]]")
    (tmp_path / "preds.csv").write_text("image,label\nILSVRC2012_val_00000001,tench\n")
    assert run(["ingest", str(tmp_path / "data"), "--dataset", "mini", "--quiet"], tmp_path).returncode == 0
    for args in (
        ["labels", "import", str(tmp_path / "real.json"), "--format", "real", "--skip-unknown"],
        ["predictions", "import", str(tmp_path / "preds.csv"), "--run", "m", "--skip-unknown"],
    ):
        r = run(args, tmp_path)
        assert r.returncode == 2, (args, r.stdout)
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("error: ") and "nothing written" in r.stderr
        assert "keyed by ImageNet validation numbers" in r.stderr and "'ILSVRC2012_val_00000001'" in r.stderr
        assert "'n01440764_a.jpg'" in r.stderr and "Traceback" not in r.stderr
    stats = run(["stats"], tmp_path).stdout  # no empty source or run was left behind
    assert "labels:      imgt 1\n" in stats and "model runs:  none\n" in stats


def test_unreachable_database_is_one_line(tmp_path: Path) -> None:
    # the one command of this file run by `python -m relabel` in a new interpreter: the executable's own exit status
    r = subprocess.run(
        [sys.executable, "-m", "relabel", "--db", "postgresql+psycopg://nobody@127.0.0.1:1/x", "stats"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 5 and r.stderr.startswith("error: database error:") and r.stderr.count("\n") == 1


def test_demo_builds_a_workspace_and_says_what_next(tmp_path: Path) -> None:
    r = run(["demo", "--quiet", "--no-serve"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert "dataset 'demo' (manifest): 8 image(s): ok 8" in r.stdout and "Next steps" in r.stdout
    # a first evaluation report, so the studio's Reports tab has one to show; kept when the demo runs again
    reports = sorted((tmp_path / "ws" / "reports").glob("*/report.md"))
    assert len(reports) == 1 and "efficientnet-lite0@topk" in reports[0].read_text()
    again = run(["demo", "--quiet", "--no-serve"], tmp_path)
    assert "unchanged since last ingest 8" in again.stdout
    assert (tmp_path / "ws" / "relabel.db").exists()
    assert sorted((tmp_path / "ws" / "reports").glob("*/report.md")) == reports


def test_workflow_through_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "data"
    images.photo(root / "n01440764_a.jpg")
    images.photo(root / "n02123045_b.jpg", color=(1, 2, 3))
    (tmp_path / "prior.csv").write_text("image,labels\nn01440764_a.jpg,tench|goldfish\nn02123045_b.jpg,tabby\n")
    (tmp_path / "preds.csv").write_text("image,labels,scores\nn01440764_a,tench,0.8\nn02123045_b,tiger cat,0.6\n")
    steps = [
        ["init"],
        ["ingest", str(root), "--dataset", "mini", "--quiet"],
        ["labels", "import", str(tmp_path / "prior.csv"), "--format", "csv", "--name", "team"],
        ["predictions", "import", str(tmp_path / "preds.csv"), "--run", "m"],
        ["snapshot", "create", "s1", "--base", "team"],
        ["snapshot", "create", "s2"],
        ["snapshot", "export", "s1", "--format", "real", "--out", str(tmp_path / "s1.json"), "--allow-partial"],
        ["snapshot", "diff", "s1", "s2"],
        ["snapshot", "list"],
        ["stats"],
    ]
    outputs = []
    for args in steps:  # in this process (a failing step exits): the tests above start `python -m relabel`
        main(["--workspace", str(tmp_path / "ws"), *args])
        outputs.append(capsys.readouterr().out)
    assert (tmp_path / "s1.json").read_text() == "[[0, 1], [281]]"
    assert "1 changed, 1 unchanged" in outputs[7]
    assert "model runs:  m: ok 2" in outputs[9]


def test_users_add_reads_the_password_from_the_environment(tmp_path: Path, monkeypatch, capsys) -> None:
    from sqlmodel import Session, select

    from db import create_db_engine
    from db.models import User
    from relabel.decisions.annotations import verify_password

    monkeypatch.setenv("RELABEL_PASSWORD", "s3cret-passphrase")
    main(["--workspace", str(tmp_path / "ws"), "users", "add", "alice", "--role", "lead"])
    assert "added lead 'alice'" in capsys.readouterr().out
    with Session(create_db_engine(f"sqlite:///{tmp_path / 'ws' / 'relabel.db'}")) as s:
        user = s.exec(select(User)).one()
    assert user.role.value == "lead" and verify_password("s3cret-passphrase", user.password_hash)


def test_hostile_input_files_are_one_line_errors_and_write_nothing(tmp_path: Path) -> None:
    """The tester's files: a cut list, NaN scores, latin-1, deep JSON, a vocabulary of numbers, an export to /proc,
    a lone surrogate, a 401-digit score, a digits vocabulary whose "0" is both an index and a name; exports over a
    symbolic link, a FIFO and a socket (each left as it was); an .npz whose header claims a 1.86 TiB array and one
    of 2 MB that inflates to 2 GB."""
    import os
    import socket
    import zlib

    from tests.relabel.common.test_arrays import archive_with_tensor, deflated, npy_header, zeros_deflated

    images.photo(tmp_path / "data" / "n01440764_a.jpg")
    (tmp_path / "keep.csv").write_text("keep\n")
    (tmp_path / "link.csv").symlink_to(tmp_path / "keep.csv")
    os.mkfifo(tmp_path / "fifo.csv")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tmp_path / "sock.csv"))
    header = npy_header((85, 1_000_000_000, 3))
    archive_with_tensor(tmp_path / "huge.npz", (deflated(header), len(header), zlib.crc32(header)))
    archive_with_tensor(tmp_path / "bomb.npz", (zeros_deflated(npy_header((85, 1_052_787, 3)), 2 << 30), 2 << 30, 0))
    files = {
        "cut.csv": b'id,category,proposed_labels\nn01440764_a.jpg,M,"415, 813, 8',
        "nan.csv": b"image,label,score\nn01440764_a.jpg,tench,nan\n",
        "latin1.csv": "image,labels\nn01440764_a.jpg,caf\u00e9\n".encode("latin-1"),
        "deep.json": b"[" * 100_000 + b"]" * 100_000,
        "v.json": b"[1, 2, 3]",
        "lone.jsonl": b'{"path": "\\ud800.jpg", "label": "tench"}\n',
        "huge.jsonl": b'{"image": "n01440764_a.jpg", "label": "tench", "score": ' + b"9" * 401 + b"}\n",
        "digits.json": b'["1", "2", "3", "4", "5", "6", "7", "8", "9", "0"]',
        "digits.csv": b"path,label\nn01440764_a.jpg,0\n",
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    assert run(["ingest", str(tmp_path / "data"), "--dataset", "mini", "--quiet"], tmp_path).returncode == 0
    assert run(["snapshot", "create", "s"], tmp_path).returncode == 0
    cases = [
        (["labels", "import", str(tmp_path / "cut.csv"), "--format", "shankar"], 2, "cut.csv:2: a quoted field"),
        (["predictions", "import", str(tmp_path / "nan.csv"), "--run", "m"], 2, "nan.csv:2: score 'nan' is not"),
        (["labels", "import", str(tmp_path / "latin1.csv"), "--format", "csv"], 2, "byte offset 32 (line 2)"),
        (["labels", "import", str(tmp_path / "deep.json"), "--format", "real"], 2, "deep.json: JSON nested too"),
        (["ingest", str(tmp_path / "data"), "--vocabulary", str(tmp_path / "v.json")], 2, "v.json: class 0 is 1;"),
        (["ingest", str(tmp_path / "data"), "--manifest", str(tmp_path / "lone.jsonl")], 2, "\\ud800 is an unpaired"),
        (["predictions", "import", str(tmp_path / "huge.jsonl"), "--run", "m"], 2, "has 401 digits before the"),
        (
            ["ingest", str(tmp_path / "data"), "--manifest", str(tmp_path / "digits.csv"), "--vocabulary"]
            + [str(tmp_path / "digits.json"), "--dataset", "digits"],
            2,
            "digits.csv:2: class '0' is ambiguous in vocabulary 'digits': as an index it is class 0 '1', as a name",
        ),
        (["snapshot", "export", "s", "--format", "csv", "--out", "/proc/regt.csv"], 6, "cannot write '/proc/regt"),
        (["snapshot", "export", "s", "--format", "csv", "--out", str(tmp_path / "link.csv")], 6, "a symbolic link"),
        (["snapshot", "export", "s", "--format", "csv", "--out", str(tmp_path / "fifo.csv")], 6, "a FIFO"),
        (["snapshot", "export", "s", "--format", "csv", "--out", str(tmp_path / "sock.csv")], 6, "it is a socket"),
        (
            ["votes", "import", str(tmp_path / "huge.npz"), "--format", "real-raters", "--name", "r"],
            2,
            "huge.npz member tensor: its header announces a float64 array of shape (85, 1000000000, 3) (1.86 TiB)",
        ),
        (
            ["votes", "import", str(tmp_path / "bomb.npz"), "--format", "real-raters", "--name", "r"],
            2,
            "bomb.npz: tensor, info, ids inflate to 2 GiB",
        ),
    ]
    for args, code, expected in cases:
        r = run(args, tmp_path)
        assert r.returncode == code, (args, r.stderr)
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("error: ") and expected in r.stderr, r.stderr
        assert "Traceback" not in r.stderr
    stats = run(["stats"], tmp_path).stdout
    assert "labels:      imgt 1\n" in stats and "model runs:  none\n" in stats
    assert (tmp_path / "link.csv").is_symlink() and (tmp_path / "keep.csv").read_text() == "keep\n"
    assert (tmp_path / "fifo.csv").is_fifo() and (tmp_path / "sock.csv").is_socket()
