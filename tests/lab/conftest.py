"""pytest fixtures for lab tests: `lab(n, scenario=...)` makes a lab of n namespace hosts, torn down after the test."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Callable

import pytest

from ncclcheck_lab.netlab.harness import Lab, nl


def _why_not() -> str:
    why = nl.missing_requirements()
    return f"lab tests need root and {', '.join(nl.REQUIRED_TOOLS)} (apt-get install -y iproute2 nftables): " \
        + ", ".join(why) if why else ""


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("lab") and (why := _why_not()):
        pytest.skip(why)


@pytest.fixture(scope="session")
def _lab_gc() -> None:
    """Once per session: remove labs left behind by test sessions that were killed before their teardown."""
    if not _why_not():
        nl.reap_orphans()


@pytest.fixture
def lab(_lab_gc: None) -> Iterator[Callable[..., Lab]]:
    """Factory: lab(n=2, scenario=None) -> Lab with hosts h1..hN; every lab made is torn down after the test.

    scenario: None, one spec ("docker-decoy", "blocked-port h1 29500") or a list of specs (strings or token
    tuples such as ("slow-link", "h2", "50mbit")).
    """
    if why := _why_not():
        pytest.skip(why)
    made: list[Lab] = []

    def make(n: int = 2, scenario=None) -> Lab:
        made.append(Lab(n, scenario))  # a Lab that fails half-way through up() removes itself
        return made[-1]

    yield make
    errors = []
    for lab_ in reversed(made):
        try:
            lab_.down()
        except Exception as e:  # tear the others down too, then report
            errors.append(e)
    if errors:
        raise errors[0]
