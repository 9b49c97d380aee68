"""Many nodes read as Slurm host ranges and a count (python-hostlist collects, expand takes it back)."""

import pytest

from ncclcheck import hostranges
from ncclcheck.render.common import name_nodes


def test_many_nodes_read_as_ranges_with_a_count_and_every_rank():
    ranks = list(range(1, 129)) + [131]
    text = hostranges.who((r, f"gpu{r:04d}") for r in ranks)
    assert text == "129 nodes gpu[0001-0128,0131] (node ranks 1-128,131)"
    assert hostranges.expand(text.split()[2]) == [f"gpu{r:04d}" for r in ranks]


def test_a_few_nodes_are_named_one_by_one():
    assert hostranges.who([(9, "b"), (3, "a")]) == "node 3 (a), node 9 (b)"
    assert name_nodes([3, 9], {3: "a", 9: "b"}) == "node 3 (a), node 9 (b)"


def test_name_nodes_past_its_limit_keeps_every_node_as_ranges():
    hosts = {r: f"n{r}" for r in range(8192)}
    text = name_nodes(list(range(8192)), hosts, limit=5)
    assert text == "8,192 nodes n[0-8191] (node ranks 0-8191)" and "more" not in text


@pytest.mark.parametrize("bad", ["a,,b", "gpu[]", "x[1-[2]]", "gpu[04-01]", "gpu[1-"])
def test_malformed_lists_are_one_line_value_errors(bad):
    with pytest.raises(ValueError):
        hostranges.expand(bad)


def test_rank_ranges():
    assert hostranges.rank_ranges([7, 1, 2, 3, 4, 9, 10]) == "1-4,7,9-10"
    assert hostranges.rank_ranges([]) == ""
