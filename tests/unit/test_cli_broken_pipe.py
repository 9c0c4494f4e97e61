"""A reader that goes away (``iqmesh ... | head``) ends the command quietly: no OS_ERROR line, no
traceback, the exit status of a tool SIGPIPE ended."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

APP = '''
from instance.serde import StringSerde
from instance.topology import StreamsBuilder

def build():
    b = StreamsBuilder(default_key_serde=StringSerde(), default_value_serde=StringSerde())
    for i in range(50):
        b.stream(f"topic-{i}").filter(lambda k, v: True).map_values(str.upper).to(f"out-{i}")
    return b.build()
'''


def test_a_closed_pipe_ends_the_command_quietly(tmp_path: Path) -> None:
    app = tmp_path / "many.py"
    app.write_text(APP)
    p = subprocess.Popen([sys.executable, "-m", "instance.cli", "describe", str(app)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout is not None and p.stderr is not None
    p.stdout.close()  # as head does after its lines: here before the first, while the app loads
    err = p.stderr.read().decode()
    assert p.wait(60) == 141, err
    assert err == "", err
