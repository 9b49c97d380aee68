"""docs/deploy.md's pool-labelling section: the manifests parse, and the commands it runs use the flags that exist."""

from __future__ import annotations

import pathlib
import re

import pytest

from ncclcheck.cli import build_parser

yaml = pytest.importorskip("yaml")
DOC = pathlib.Path(__file__).parents[2] / "docs" / "deploy.md"
SECTION = "## Kubernetes: label and taint a node pool from preflight"


def _section() -> str:
    text = DOC.read_text()
    assert SECTION in text
    rest = text[text.index(SECTION) + len(SECTION):]
    return rest.split("\n## ")[0]


def test_manifests_parse_and_the_job_is_one_pod_per_node():
    blocks = re.findall(r"```yaml\n(.*?)```", _section(), re.S)
    docs = [d for b in blocks for d in yaml.safe_load_all(b)]
    kinds = [d["kind"] for d in docs]
    assert kinds == ["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Job"]
    job = docs[-1]["spec"]
    assert job["completionMode"] == "Indexed" and job["completions"] == job["parallelism"]
    pod = job["template"]["spec"]
    assert pod["hostNetwork"] is True and pod["serviceAccountName"] == docs[0]["metadata"]["name"]
    assert {"get", "patch"} <= set(docs[1]["rules"][0]["verbs"]) and docs[1]["rules"][0]["resources"] == ["nodes"]


def test_the_commands_in_the_job_parse_with_the_real_cli():
    job = [d for b in re.findall(r"```yaml\n(.*?)```", _section(), re.S) for d in yaml.safe_load_all(b)][-1]
    script = job["spec"]["template"]["spec"]["containers"][0]["args"][0]
    parser = build_parser()
    for line in re.findall(r"ncclcheck (?:preflight|report)[^;]*", script):
        argv = line.replace('"$JOB_COMPLETION_INDEX"', "0").replace('"$MASTER_ADDR"', "h0").split()[1:]
        argv = [a for a in argv if a != ">"]
        if "--format" in argv:
            argv = argv[:argv.index("--format") + 2]
        args = parser.parse_args(argv)
        assert args.command in ("preflight", "report")
        if args.command == "report":
            assert args.format == "labels"
        else:
            assert args.prometheus and args.json
