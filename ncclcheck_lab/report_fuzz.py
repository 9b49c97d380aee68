"""Every field of every example report set to each of a few wrong-typed values, loaded as `ncclcheck report` loads a
file and rendered by every renderer: prints each crash site (exception, file:line, count, an example), or nothing.

    python3 scripts/report_fuzz.py [text|html] [--bench]    # html: the HTML renderer; --bench: its plots too (slow)
    python3 scripts/report_fuzz.py --only preflight-fail --paths 40      # one example, its first 40 fields (seconds)

Last line: `N reports rendered (text), K crashed, S s`; exit 1 when any crashed.

The hypothesis test tests/render/test_report_validation.py samples the same space in the fast tier; this sweeps it.
"""

from __future__ import annotations

import argparse
import collections
import io
import json
import pathlib
import sys
import time
import traceback

from ncclcheck.model import Report, tree_problem
from ncclcheck.render.validate import schema_problem

ROOT = pathlib.Path(__file__).resolve().parents[1]

VALUES = [True, "x", [1], {"a": 1}, None, -1, 1e308]


def paths(v, p=()):
    yield p
    if isinstance(v, dict):
        for k, x in v.items():
            yield from paths(x, p + (k,))
    elif isinstance(v, list):
        for i, x in enumerate(v[:3]):
            yield from paths(x, p + (i,))


def render_all(r: Report, which: str) -> None:
    if which == "html":
        from ncclcheck.render.html import render_html

        render_html(r)
        return
    from ncclcheck.render.console import make_console, render_report
    from ncclcheck.render.envfile import render_envfile
    from ncclcheck.render.junit import render_junit
    from ncclcheck.render.labels import render_labels
    from ncclcheck.render.markdown import render_markdown
    from ncclcheck.render.prometheus import render_prometheus

    c = make_console(io.StringIO(), {}, width=100)
    for part in render_report(r):
        c.print(part)
    for fn in (render_envfile, render_junit, render_labels, render_markdown, render_prometheus):
        fn(r)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("which", nargs="?", default="text", choices=["text", "html"])
    ap.add_argument("--bench", action="store_true", help="also the examples with bench plots (slow)")
    ap.add_argument("--only", help="only the examples whose file name contains this")
    ap.add_argument("--paths", type=int, default=0, help="only each example's first N field paths (0: all)")
    args = ap.parse_args(argv)
    which = args.which
    examples = sorted((ROOT / "tests" / "render" / "examples").glob("*.json"))
    examples = [e for e in examples if (args.bench or "bench" not in e.name) and (not args.only or args.only in e.name)]
    if not examples:
        ap.error(f"no example matches --only {args.only!r}")
    crashes: collections.Counter = collections.Counter()
    first: dict = {}
    t0, tried = time.monotonic(), 0
    for f in examples:
        base = json.loads(f.read_text())
        for p in [p for p in paths(base) if p][:args.paths or None]:
            for v in VALUES:
                d = json.loads(json.dumps(base))
                parent = d
                for k in p[:-1]:
                    parent = parent[k]
                parent[p[-1]] = v
                if tree_problem(d) or schema_problem(d):
                    continue
                try:
                    r = Report.from_json(d)
                except (ValueError, KeyError, TypeError):
                    continue
                tried += 1
                try:
                    render_all(r, which)
                except Exception as exc:  # noqa: BLE001 - what this script looks for
                    tb = traceback.extract_tb(exc.__traceback__)[-1]
                    key = (type(exc).__name__, f"{pathlib.Path(tb.filename).name}:{tb.lineno}")
                    crashes[key] += 1
                    first.setdefault(key, (f.name, p, v, str(exc)[:100]))
    for key, n in crashes.most_common():
        print(n, key, first[key])
    print(f"{tried} reports rendered ({which}), {sum(crashes.values())} crashed, {time.monotonic() - t0:.0f} s")
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
