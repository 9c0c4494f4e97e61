"""The README's "Using it" sequence, run as written (issue 16 point 5): each pasted command is a
subprocess of its own (bash, from the repository's root, `iqmesh` on PATH as `source
.venv/bin/activate` puts it), a command ending in `&` runs in the background and `kill %1` stops
it. Only the addresses change, so the run starts its own dev broker and does not clash with
anything else on the machine: port 9092, port 50051, /tmp/wc-0 and .iqmesh/broker (and the
`get --wait` deadline, longer for a busy machine)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from instance.local.broker import free_port

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
WORDS = {"all", "streams", "lead", "to", "kafka", "hello"}


def using_it() -> list[str]:
    """The commands of the first code block under "## Using it", continuation lines joined."""
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Using it\n", 1)[1]
    block = re.search(r"```\n(.*?)```", section, re.S)
    assert block is not None, "no code block under ## Using it"
    return [line.strip() for line in block.group(1).replace("\\\n", " ").splitlines() if line.strip()]


def _command(line: str) -> str:
    """The line without its trailing comment (comments start with `  #`)."""
    return re.split(r"\s+#\s", line, maxsplit=1)[0].strip()


@pytest.mark.timeout(420)
def test_the_using_it_sequence_runs_as_written(tmp_path: Path) -> None:
    commands = using_it()
    assert commands[0].startswith("source .venv/bin/activate"), commands[0]
    broker_port, grpc_port = free_port(), free_port()
    broker_dir = tmp_path / "broker"
    # and one deadline: `get --wait 30` waits for the instance started just before to join, be
    # assigned and count, which on a busy machine (CI runs two suites on two cores) can take
    # longer; a longer wait only ends later when it fails
    subs = {"9092": str(broker_port), "50051": str(grpc_port), "/tmp/wc-0": str(tmp_path / "wc-0"),
            ".iqmesh/broker": str(broker_dir), "--wait 30": "--wait 150"}
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONUNBUFFERED": "1"}
    background: list[subprocess.Popen[bytes]] = []
    outputs: list[tuple[str, str]] = []
    try:
        for line in commands[1:]:
            cmd = _command(line)
            for old, new in subs.items():
                cmd = cmd.replace(old, new)
            if cmd == "kill %1":
                proc = background[0]
                proc.send_signal(signal.SIGTERM)
                assert proc.wait(60) == 0, (tmp_path / "bg-0.log").read_text()
                continue
            if cmd.endswith("&"):
                log = open(tmp_path / f"bg-{len(background)}.log", "wb")  # noqa: SIM115 - the child's
                background.append(subprocess.Popen(["bash", "-c", "exec " + cmd[:-1].strip()], cwd=ROOT, env=env,
                                                   stdout=log, stderr=subprocess.STDOUT))
                log.close()
                continue
            done = subprocess.run(["bash", "-c", cmd], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
            assert done.returncode == 0, f"{line}\n{done}\n" + "".join(
                (tmp_path / f"bg-{i}.log").read_text() for i in range(len(background)))
            outputs.append((cmd, done.stdout))
        _check(outputs)
    finally:
        for proc in background:
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)
        subprocess.run([str(Path(sys.executable).parent / "iqmesh"), "broker", "stop", "--data-dir",
                        str(broker_dir)], capture_output=True, timeout=60)


def _lines(text: str) -> list[Any]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _check(outputs: list[tuple[str, str]]) -> None:
    """What each command printed is what the README says it prints."""

    def out(command: str) -> list[str]:
        return [stdout for cmd, stdout in outputs if command in cmd]

    created = [json.loads(v) for v in out("iqmesh topic create")]
    assert len(created) == 2 and all(c["created"] for c in created), created
    listed = {t["topic"] for t in _lines(out("iqmesh topic list")[0])}
    assert {"streams-plaintext-input", "streams-wordcount-output"} <= listed, listed
    assert "Sub-topology" in out("iqmesh describe examples/wordcount.py")[0]
    assert json.loads(out("iqmesh produce --topic")[0])["records"] == 2
    got = json.loads(out("iqmesh get --target")[0])
    assert got["found"] and got["value"] in (1, 2) and got["metadata"]["served_by"] == "wc-0", got
    assert [i["instance_id"] for i in json.loads(out("iqmesh metadata --target")[0])["instances"]] == ["wc-0"]
    records = _lines(out("iqmesh consume --topic")[0])
    assert len(records) == 6 and all(r["key"] in WORDS and isinstance(r["value"], int) and r["value"] >= 1
                                     for r in records), records
