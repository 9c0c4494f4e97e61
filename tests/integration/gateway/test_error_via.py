"""An error an instance answered with names that instance, as a success does (``via``); an error
no instance answered (none reachable, a request the gateway itself refuses) names none."""

from __future__ import annotations

from tests.integration.gateway.conftest import GatewayCluster


def test_an_instances_error_says_which_instance_answered(gateway_cluster: GatewayCluster) -> None:
    gc = gateway_cluster
    endpoints = {i.target for i in gc.cluster.instances}
    status, ok = gc.get("/v1/stores/counts/keys/kafka")
    assert status == 200 and ok["via"] in endpoints
    for path in ("/v1/stores/nope/keys/a", "/v1/stores/nope/all"):
        status, body = gc.get(path)
        assert status == 404 and body["error"]["code"] == "UNKNOWN_STORE", body
        assert body["error"]["via"] in endpoints, body
    status, body = gc.get("/v1/stores/counts/range?limit=nope")  # refused by the gateway itself
    assert status == 400 and "via" not in body["error"], body
