"""`ncclcheck report RUN.json` on a file that is not what it claims: deep nesting, NaN/Infinity, wrong types anywhere.

A saved report may come from another machine or another tool: the outcome is either a one-line usage error (exit 2)
naming the field, or a rendered report, never a traceback (exit 3)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ncclcheck.errors import UsageError
from ncclcheck.model import load_saved_report
from ncclcheck.render.console import make_console, render_report
from ncclcheck.render.envfile import render_envfile
from ncclcheck.render.html import render_html
from ncclcheck.render.junit import render_junit
from ncclcheck.render.labels import render_labels
from ncclcheck.render.markdown import render_markdown
from ncclcheck.render.prometheus import render_prometheus
from ncclcheck.render.validate import schema_problem
from tests.conftest import run_cli

from .conftest import EXAMPLES, HERE


def _load(tmp_path, doc, name="run.json", raw=None):
    path = tmp_path / name
    path.write_text(raw if raw is not None else json.dumps(doc))
    return load_saved_report(str(path), str(path), schema_problem)


def _example(name="preflight-fail-3node") -> dict:
    return json.loads((HERE / "examples" / f"{name}.json").read_text())


def test_deep_nesting_is_a_usage_error_naming_where(tmp_path):
    doc = _example()
    doc["checks"][0]["evidence"]["x"] = json.loads("[" * 100 + "]" * 100)
    with pytest.raises(UsageError, match=r"checks\[0\]\.evidence\.x.*nested more than 64 levels"):
        _load(tmp_path, doc)


def test_nesting_deeper_than_the_json_reader_is_a_usage_error(tmp_path):
    raw = json.dumps(_example())[:-1] + ', "x": ' + "[" * 200_000 + "]" * 200_000 + "}"
    with pytest.raises(UsageError, match="nested deeper"):
        _load(tmp_path, None, raw=raw)


@pytest.mark.parametrize("where,set_", [
    ("duration_s", lambda d, v: d.__setitem__("duration_s", v)),
    ("bench[0].busbw_gbps", lambda d, v: d["bench"][0].__setitem__("busbw_gbps", v)),
])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_nan_and_infinity_are_usage_errors_naming_the_field(tmp_path, where, set_, value):
    doc = _example("bench-gate-fail")
    set_(doc, value)
    with pytest.raises(UsageError) as err:
        _load(tmp_path, doc)
    assert where in str(err.value) and "\n" not in str(err.value)


def test_wrong_types_name_the_field(tmp_path):
    doc = _example()
    doc["checks"][1]["status"] = "bogus"
    with pytest.raises(UsageError, match=r"checks\[1\]\.status"):
        _load(tmp_path, doc)
    doc = _example()
    doc["nodes"][1]["hostname"] = ["h2"]
    with pytest.raises(UsageError, match=r"nodes\[1\]\.hostname"):
        _load(tmp_path, doc)


def test_through_the_cli_the_exit_code_is_2_not_3(tmp_path):
    doc = _example("bench-gate-fail")
    doc["bench"][0]["time_us"] = float("nan")
    (tmp_path / "nan.json").write_text(json.dumps(doc))
    (tmp_path / "deep.json").write_text(json.dumps(_example())[:-1] + ', "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    for name in ("nan.json", "deep.json"):
        p = run_cli("report", str(tmp_path / name), "--html", str(tmp_path / "out.html"),
                    env={"NCCLCHECK_LOG_DIR": str(tmp_path / "logs")})
        assert p.returncode == 2, (name, p.stderr)
        assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr


def _paths(value, path=()):
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, path + (i,))


_JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**63, 2**63) | st.floats(allow_nan=False,
                     allow_infinity=False) | st.text(max_size=20),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                                  max_size=3), max_leaves=6)
_DOCS = [json.loads(p.read_text()) for p in EXAMPLES]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_field_of_any_type_renders_or_is_a_usage_error(tmp_path, data):
    doc = json.loads(json.dumps(data.draw(st.sampled_from(_DOCS))))
    paths = [p for p in _paths(doc) if p]
    path = data.draw(st.sampled_from(paths))
    value = data.draw(_JSON)
    parent = doc
    for k in path[:-1]:
        parent = parent[k]
    parent[path[-1]] = value
    try:
        report = _load(tmp_path, doc)
    except UsageError as exc:
        assert "\n" not in str(exc)
        return
    import io

    console = make_console(io.StringIO(), {}, width=100)
    for part in render_report(report):
        console.print(part)
    for render in (render_envfile, render_junit, render_labels, render_markdown, render_prometheus):
        render(report)
    if report.bench is None:  # the plots take seconds a report: scripts/report_fuzz.py sweeps them
        render_html(report)
