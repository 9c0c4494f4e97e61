"""loadtest.scenarios puts the settings a scenario asks for into the rendered app.properties,
and loadtest.chaos waits the session timeout the group protocol actually uses."""

from __future__ import annotations

from loadtest.chaos.scenarios import session_timeout_s
from loadtest.k8s_sim.manifests import Rendered
from loadtest.scenarios.__main__ import parse, settings_of
from loadtest.scenarios.run import Settings, patched

PROPERTIES = "processing.guarantee=at_least_once\nsession.timeout.ms=10000\nreplication.factor=3\n"


def _properties(settings: Settings) -> dict[str, str]:
    rendered = Rendered(({"kind": "ConfigMap", "data": {"app.properties": PROPERTIES}},))
    text = patched(rendered, settings).docs[0]["data"]["app.properties"]
    return dict(line.split("=", 1) for line in text.splitlines() if line)


def test_the_overlay_keeps_its_protocol_unless_one_is_asked_for() -> None:
    assert "group.protocol" not in _properties(Settings())
    props = _properties(Settings(group_protocol="streams", guarantee="exactly_once_v2", engine="kafka"))
    assert props == {"processing.guarantee": "exactly_once_v2", "session.timeout.ms": "10000",
                     "replication.factor": "1", "group.protocol": "streams"}


def test_group_protocol_flag_reaches_the_settings() -> None:
    assert settings_of(parse(["--out", "o", "--group-protocol", "streams"])).group_protocol == "streams"
    assert settings_of(parse(["--out", "o"])).group_protocol is None


def test_broker_side_protocols_wait_the_brokers_session_timeout() -> None:
    assert session_timeout_s(["session.timeout.ms=6000"]) == 6.0
    assert session_timeout_s(["session.timeout.ms=6000", "group.protocol=consumer"]) == 45.0
    assert session_timeout_s(["session.timeout.ms=6000", "group.protocol=streams"]) == 45.0
