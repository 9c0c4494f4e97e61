"""`iqmesh reset`'s rules that need no broker: where each position flag moves a partition's
offset (Kafka's StreamsResetter: kept within the log), the arguments of --to-datetime,
--by-duration and --from-file, and which topics are an application's internal ones."""

from __future__ import annotations

import pytest

from instance.errors import ConfigException
from instance.reset.internal import chosen_internal_topics, inferred_internal_topics, is_internal_name
from instance.reset.positions import Bounds, ResetPosition, parse_datetime, parse_duration, parse_reset_plan

TP = ("in", 0)
LOG = Bounds(earliest=5, latest=20, committed=12)


@pytest.mark.parametrize(("position", "bounds", "expected"), [
    (ResetPosition("earliest"), LOG, 5),
    (ResetPosition("latest"), LOG, 20),
    (ResetPosition("offset", 9), LOG, 9),
    (ResetPosition("offset", 2), LOG, 5),            # below the log: its start
    (ResetPosition("offset", 99), LOG, 20),          # past the end: the end
    (ResetPosition("shift", -4), LOG, 8),
    (ResetPosition("shift", -40), LOG, 5),
    (ResetPosition("shift", 40), LOG, 20),
    (ResetPosition("shift", 3), Bounds(5, 20, None), 8),  # nothing committed: from the earliest
    (ResetPosition("time", 1), Bounds(5, 20, 12, at_time=17), 17),
    (ResetPosition("time", 1), Bounds(5, 20, 12, at_time=None), 20),  # no record that late: the end
    (ResetPosition("file", plan={TP: 3}), LOG, 5),
    (ResetPosition("file", plan={TP: 15}), LOG, 15),
    (ResetPosition("file", plan={("in", 1): 15}), LOG, None),  # not in the file: left as it is
])
def test_each_position_rule_stays_within_the_log(position: ResetPosition, bounds: Bounds,
                                                 expected: int | None) -> None:
    assert position.target(TP, bounds) == expected


@pytest.mark.parametrize(("text", "ms"), [
    ("P1D", 86_400_000), ("PT5H30M", 19_800_000), ("pt90s", 90_000), ("PT0.5S", 500), ("PT1,25S", 1250),
    ("P1DT1H", 90_000_000), ("-PT1H", -3_600_000), ("PT-1H30M", -1_800_000), ("PT-0.5S", -500),
])
def test_durations_read_as_java_duration_parse_reads_them(text: str, ms: int) -> None:
    assert parse_duration(text) == ms


@pytest.mark.parametrize("text", ["", "P", "PT", "5h", "P1H", "PT1D", "P1DT", "1D"])
def test_a_duration_that_is_not_iso_8601_is_refused_naming_the_format(text: str) -> None:
    with pytest.raises(ConfigException, match="PnDTnHnMnS"):
        parse_duration(text)


def test_datetimes_are_utc_unless_a_zone_is_given() -> None:
    utc = parse_datetime("2024-03-01T10:00:00.000")
    assert utc == 1_709_287_200_000
    assert parse_datetime("2024-03-01T10:00:00.000Z") == utc
    assert parse_datetime("2024-03-01T11:00:00.000+01:00") == utc
    assert parse_datetime("2024-03-01T11:00:00.000+0100") == utc
    assert parse_datetime("2024-03-01T10:00:00.250") == utc + 250
    assert parse_datetime("2024-03-01T10:00:00") == utc
    for bad in ("2024-03-01", "2024-03-01T25:00:00.000", "yesterday T"):
        with pytest.raises(ConfigException, match="--to-datetime"):
            parse_datetime(bad)


def test_a_reset_plan_file_is_topic_partition_offset_lines() -> None:
    assert parse_reset_plan("in,0,7\n\nin, 1 ,9\nother,0,0\n") == {("in", 0): 7, ("in", 1): 9, ("other", 0): 0}
    for bad, line in (("in,0\n", 1), ("in,0,7\nin,x,1\n", 2), (",0,1", 1)):
        with pytest.raises(ConfigException, match=f"line {line} "):
            parse_reset_plan(bad)
    with pytest.raises(ConfigException, match="names no partition"):
        parse_reset_plan("\n")


def test_internal_topics_are_the_applications_own_by_their_names() -> None:
    app = "wc"
    own = ["wc-counts-changelog", "wc-counts-repartition", "wc-iqmesh-instances",
           "wc-join-subscription-registration-topic", "wc-join-subscription-response-topic",
           "wc-KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000012-topic",
           "wc-KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000020-topic"]
    strangers = ["wc-output", "wcx-counts-changelog", "other-counts-changelog", "wc-counts-changelog-copy",
                 "wc2-iqmesh-instances", "streams-plaintext-input"]
    assert all(is_internal_name(app, t) for t in own)
    assert not any(is_internal_name(app, t) for t in strangers)
    # an input topic named like an internal one is not deleted (Kafka's KAFKA-7930)
    assert inferred_internal_topics(app, [*own, *strangers], {"wc-counts-repartition"}) == \
        sorted(set(own) - {"wc-counts-repartition"})
    assert chosen_internal_topics(own, []) == own
    assert chosen_internal_topics(own, ["wc-counts-changelog"]) == ["wc-counts-changelog"]
    with pytest.raises(ConfigException, match="--internal-topics names 'wc-output'"):
        chosen_internal_topics(own, ["wc-counts-changelog", "wc-output"])
