"""Sizes grammar: what --sizes accepts, and that nothing else gets past it as anything but a usage error."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ncclcheck.errors import UsageError
from ncclcheck.units import parse_sizes


@pytest.mark.parametrize("text, sizes", [
    ("1M-4M", [1 << 20, 2 << 20, 4 << 20]),
    ("1M-1G:4", [1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30]),
    ("1K,64K,1M", [1024, 65536, 1 << 20]),
    ("8M", [8 << 20]),
    ("1M-3M", [1 << 20, 2 << 20, 3 << 20]),  # both ends included even when doubling overshoots
    ("100", [100]),
    ("2K-1K,4K", None),
])
def test_grammar(text, sizes):
    if sizes is None:
        with pytest.raises(UsageError):
            parse_sizes(text)
    else:
        assert parse_sizes(text) == sizes


@pytest.mark.parametrize("bad", ["", "1X", "0", "-1M", "1G-1M", "1M-1G:1", "1M:4", "1.5B", "1,,2", "1M-2M:¹", "¹M"])
def test_bad_grammar_is_a_usage_error(bad):
    with pytest.raises(UsageError):
        parse_sizes(bad)


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("0123456789KMGBkmgb-,:. ¹٣xi")), max_size=14) | st.text(max_size=10))
def test_any_string_gives_sizes_or_usage_error(text):
    try:
        sizes = parse_sizes(text)
    except UsageError:
        return
    assert sizes == sorted(set(sizes)) and all(isinstance(s, int) and s > 0 for s in sizes)
