"""The sizes grammar never raises anything but UsageError, and what it returns is a sorted list of positive ints."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ncclcheck.errors import UsageError
from ncclcheck.units import parse_sizes

_GRAMMAR = st.text(alphabet="0123456789KMGTBkmgtbi.,-: x", max_size=24)


def _check(text: str) -> None:
    try:
        sizes = parse_sizes(text)
    except UsageError:
        return
    assert isinstance(sizes, list) and sizes
    assert all(isinstance(s, int) and s > 0 for s in sizes)
    assert sizes == sorted(set(sizes))


@settings(max_examples=400, deadline=None)
@given(_GRAMMAR)
def test_grammar_alphabet_gives_sizes_or_usage_error(text):
    _check(text)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=30))
def test_any_text_gives_sizes_or_usage_error(text):
    _check(text)
