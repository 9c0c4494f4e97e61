"""Apache Kafka's command-line tools, as users run them (``bin/kafka-streams-groups.sh`` is
``org.apache.kafka.tools.streams.StreamsGroupCommand``): resolved once with Maven from
``kafka_tools/pom.xml`` into the launcher's cache, then run with ``java -cp``."""

from __future__ import annotations

import subprocess
from pathlib import Path

from instance.local.kafka_broker import KAFKA_VERSION, maven_classpath

POM = Path(__file__).with_name("kafka_tools") / "pom.xml"
STREAMS_GROUPS = "org.apache.kafka.tools.streams.StreamsGroupCommand"


def tools_classpath() -> Path:
    """The folder of jars of kafka-tools (the launcher's release), resolved on first use."""
    return maven_classpath(POM, f"kafka-tools-{KAFKA_VERSION}", KAFKA_VERSION, f"kafka-tools {KAFKA_VERSION}")


def run_tool(main_class: str, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """One run of a Kafka tool; its stdout is what a user reads."""
    return subprocess.run(["java", "-cp", f"{tools_classpath()}/*", main_class, *args], capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)
