"""The README's "Coming from Kafka Streams" side by side, run as written: the Python block is the
application file it says it is (imported, described, run in iqmesh's TopologyTestDriver and by
``iqmesh describe``), and the Java block, compiled against Kafka Streams 4.4.0 (the oracle's
classpath, tests/oracle/kstreams), runs in Kafka Streams' own TopologyTestDriver on the same lines.
Both must describe the same topology and write the same records to the same topic. Without Java
and Maven the Java half skips (fails under CI=true)."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from instance.serde import LongSerde, StringSerde
from instance.testing import TopologyTestDriver

ROOT = Path(__file__).resolve().parents[2]
LINES = ["all streams lead to kafka", "hello kafka streams", "  Join Kafka Summit!  ", "", "kafka, kafka; streams"]

HARNESS = """
import java.util.*;
import org.apache.kafka.common.serialization.*;
import org.apache.kafka.streams.*;
import org.apache.kafka.streams.kstream.*;

public class ReadmeWordCount {
    public static void main(String[] args) throws Exception {
%(block)s
        Topology topology = builder.build();
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[0]);
        System.out.print(topology.describe());
        System.out.println("---");
        try (TopologyTestDriver driver = new TopologyTestDriver(topology, props)) {
            TestInputTopic<String, String> in = driver.createInputTopic(
                "streams-plaintext-input", new StringSerializer(), new StringSerializer());
            TestOutputTopic<String, Long> out = driver.createOutputTopic(
                "streams-wordcount-output", new StringDeserializer(), new LongDeserializer());
            Scanner stdin = new Scanner(System.in, "UTF-8");
            while (stdin.hasNextLine()) {
                in.pipeInput(stdin.nextLine());
            }
            for (KeyValue<String, Long> kv : out.readKeyValuesToList()) {
                System.out.println(kv.key + "\\t" + kv.value);
            }
        }
    }
}
"""


def section_blocks() -> dict[str, str]:
    """The first ```java and ```python blocks under "## Coming from Kafka Streams"."""
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Coming from Kafka Streams\n", 1)[1].split("\n## ", 1)[0]
    out = {}
    for lang in ("java", "python"):
        m = re.search(rf"```{lang}\n(.*?)```", section, re.S)
        assert m is not None, f"no {lang} block under ## Coming from Kafka Streams"
        out[lang] = m.group(1)
    return out


def _python_app(tmp_path: Path) -> tuple[Path, ModuleType]:
    path = tmp_path / "wordcount.py"
    path.write_text(section_blocks()["python"])
    spec = importlib.util.spec_from_file_location("readme_wordcount", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return path, module


def _python_run(module: ModuleType) -> tuple[str, list[tuple[str, int]]]:
    topology = module.build()
    driver = TopologyTestDriver(topology, {"application.id": "wordcount", "bootstrap.servers": "localhost:9092"})
    try:
        source = driver.create_input_topic("streams-plaintext-input", StringSerde(), StringSerde())
        for line in LINES:
            source.pipe_input(None, line)
        out = driver.create_output_topic("streams-wordcount-output", StringSerde(), LongSerde())
        return topology.describe(), out.read_key_values_to_list()
    finally:
        driver.close()


def test_the_python_block_is_an_application_file(tmp_path: Path) -> None:
    path, module = _python_app(tmp_path)
    description, records = _python_run(module)
    assert dict(records) == {"all": 1, "streams": 3, "lead": 1, "to": 1, "kafka": 5, "hello": 1, "join": 1,
                             "summit": 1}
    assert "Sub-topology: 1" in description and "counts-repartition" in description
    # as the comment on its first line says: a file `iqmesh` takes
    done = subprocess.run([str(Path(sys.executable).parent / "iqmesh"), "describe", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == description.strip()


def _java() -> tuple[str, str, str]:
    """javac and java, and the oracle's Kafka Streams classpath (built once by Maven)."""
    from tests.oracle.kstreams import LIB, OracleUnavailable, build_jar

    javac, java = shutil.which("javac"), shutil.which("java")
    why = ""
    if javac is None or java is None or shutil.which("mvn") is None:
        why = "the Java half needs a JDK 17+ (javac, java) and Maven"
    else:
        try:
            build_jar()
        except OracleUnavailable as e:
            why = str(e)
    if why:
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    assert javac is not None and java is not None
    return javac, java, str(LIB / "*")


@pytest.mark.timeout(900)
def test_the_java_block_and_the_python_block_do_the_same(tmp_path: Path) -> None:
    javac, java, classpath = _java()
    block = "\n".join("        " + line for line in section_blocks()["java"].splitlines())
    src = tmp_path / "ReadmeWordCount.java"
    src.write_text(HARNESS % {"block": block})
    classes = tmp_path / "classes"
    done = subprocess.run([javac, "-d", str(classes), "-cp", classpath, str(src)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    done = subprocess.run([java, "-cp", f"{classes}{os.pathsep}{classpath}", "ReadmeWordCount",
                           str(tmp_path / "state")], input="\n".join(LINES) + "\n", capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    java_description, _, java_out = done.stdout.partition("---\n")
    java_records = [(k, int(v)) for k, v in (line.split("\t") for line in java_out.splitlines())]

    _, module = _python_app(tmp_path)
    description, records = _python_run(module)
    assert records == java_records and len(records) == 14
    # the same sub-topologies, topics, stores and edges; node names aside: Kafka Streams names the
    # repartition nodes after the store (counts-repartition-filter), iqmesh numbers them
    # (KSTREAM-FILTER-0000000005), as the README says
    assert "counts-repartition-filter" in java_description and "counts-repartition-filter" not in description
    assert _shape(description) == _shape(java_description)


def _shape(description: str) -> str:
    """A topology description with every node name replaced by ``node<i>``, numbered in the order
    the nodes are declared (topic and store names stay)."""
    declared = re.findall(r"(?:Source|Processor|Sink): (\S+)", description)
    names = {name: f"node{i}" for i, name in enumerate(dict.fromkeys(declared))}
    pattern = re.compile("|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)))
    return pattern.sub(lambda m: names[m.group(0)], description.strip())
