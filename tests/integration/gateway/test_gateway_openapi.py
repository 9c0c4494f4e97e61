"""Property-based run of the gateway against its own ``/openapi.json`` (schemathesis): for every
documented operation, generated valid and invalid requests; no 5xx, and every answer matches the
document (status codes, content types, bodies). ``/v1/events`` is left out: it streams until the
client leaves (its bounded form, ``max_events``, is checked in test_gateway_api).

The operations are listed from the document in this process (collection happens before the
gateway runs); each test loads the document the running gateway serves. schemathesis'
``pytest.from_fixture`` is not used: it reads ``request.node._nodeid``, which pytest 9 removed.
"""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode

from router.gateway.openapi import document
from tests.integration.gateway.conftest import GatewayCluster

pytestmark = pytest.mark.integration

#: examples per operation and mode: 9 operations, 4 of them with parameters to get wrong, stay well
#: within a minute on two busy cores
EXAMPLES = 20
_OPS = {(p, method): op for p, item in document()["paths"].items() if p != "/v1/events"
        for method, op in item.items()}
#: (path, method, mode): invalid requests only where there are parameters (or a body) to get wrong
CASES = [pytest.param(p, method, m, id=f"{method.upper()} {p}-{m.value}") for p, method in sorted(_OPS)
         for m in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
         if m is GenerationMode.POSITIVE or _OPS[p, method].get("parameters") or _OPS[p, method].get("requestBody")]


@pytest.fixture(scope="module")
def served_schema(gateway_cluster: GatewayCluster) -> Any:
    return schemathesis.openapi.from_url(f"{gateway_cluster.url}/openapi.json")


@pytest.mark.parametrize(("path", "method", "mode"), CASES)
def test_gateway_conforms_to_its_openapi_document(served_schema: Any, path: str, method: str,
                                                  mode: GenerationMode) -> None:
    operation = served_schema[path][method.upper()]

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    def run(case: Any) -> None:
        case.call_and_validate(timeout=30)

    run()
