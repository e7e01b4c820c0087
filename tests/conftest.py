"""Session fixtures shared by every test directory: the real Kafka broker the project runs (see logstore/broker.py).

Tests that use `kafka_bootstrap` are marked `@pytest.mark.kafka`."""
from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import hang_watchdog
import pytest

from logstore import broker
from logstore.errors import BrokerToolMissingError


@pytest.fixture(autouse=True)
def _hang_watchdog(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test still running after `hang_watchdog.watchdog_seconds()` prints every stack it hangs on."""
    capture = request.config.pluginmanager.get_plugin("capturemanager")

    def report(text: str) -> None:   # to the real stderr: a run ended by pytest-timeout shows no captured output
        with capture.global_and_fixture_disabled():
            sys.stderr.write(text)
            sys.stderr.flush()

    disarm = hang_watchdog.start(request.node.nodeid, report)
    yield
    disarm()


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """Bootstrap address of the project's broker: reuses a running one, else starts it and stops it at the end."""
    running = broker.status()
    if running is not None:
        yield running
        return
    try:
        address = broker.start()
    except BrokerToolMissingError as exc:
        if os.environ.get("CI"):
            raise  # CI must run the Kafka tests: a machine without java/mvn is a broken CI machine
        pytest.skip(f"cannot run the Kafka broker here: {exc}")
    try:
        yield address
    finally:
        broker.stop()
