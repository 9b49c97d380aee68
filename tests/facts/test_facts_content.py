"""Code, paths, environment, packages and versions: the facts compared across nodes."""

from __future__ import annotations

import os
import subprocess

import pytest

from ncclcheck.facts import code, envvars, packages, paths, versions


def git(cwd, *args):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env=dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
                            GIT_COMMITTER_EMAIL="t@t"))


@pytest.fixture
def repo(tmp_path):
    r = tmp_path / "repo"
    r.mkdir()
    git(r, "init", "-q")
    (r / "train.py").write_text("print('hi')\n")
    git(r, "add", "train.py")
    git(r, "commit", "-qm", "init")
    return r


def test_clean_git_repo(repo):
    c = code.collect(str(repo))
    assert (c["kind"], c["dirty"], c["untracked"], c["path"]) == ("git", False, [], str(repo))
    assert len(c["git_head"]) == 40 and c["hash"].startswith("sha256:")


def test_code_differing_on_one_node_changes_the_hash(repo):
    clean = code.collect(str(repo))["hash"]
    (repo / "train.py").write_text("print('bye')\n")
    edited = code.collect(str(repo))
    assert edited["dirty"] is True and edited["hash"] != clean
    (repo / "train.py").write_text("print('hi')\n")
    assert code.collect(str(repo / "."))["hash"] == clean


def test_untracked_file_content_counts(repo):
    (repo / "new.py").write_text("a = 1\n")
    one = code.collect(str(repo))
    (repo / "new.py").write_text("a = 2\n")  # same size, different content
    two = code.collect(str(repo))
    assert one["untracked"] == ["new.py"] and one["dirty"] is True
    assert one["hash"] != two["hash"]


def test_tree_hash_ignores_mtime_and_skips_caches(tmp_path):
    for name in ("a", "b"):
        d = tmp_path / name
        (d / "pkg" / "__pycache__").mkdir(parents=True)
        (d / "pkg" / "m.py").write_text("x = 1\n")
        (d / "pkg" / "__pycache__" / "m.pyc").write_bytes(os.urandom(16))
    os.utime(tmp_path / "b" / "pkg" / "m.py", (0, 0))
    a, b = code.collect(str(tmp_path / "a")), code.collect(str(tmp_path / "b"))
    assert (a["kind"], a["files"], a["bytes"], a["truncated"]) == ("tree", 1, 6, False)
    assert a["hash"] == b["hash"]


@pytest.mark.parametrize("kind", ["git", "tree"])
def test_a_jobs_growing_output_beside_the_code_is_not_code(repo, tmp_path, kind):
    # sbatch writes slurm-%j.out into the submit directory while every node hashes it: on a shared working directory
    # each node read a different length, and code.consistent failed on a healthy job (64-host lab)
    root = repo if kind == "git" else tmp_path / "plain"
    if kind == "tree":
        root.mkdir()
        (root / "train.py").write_text("print('hi')\n")
    before = code.collect(str(root))
    for name in ("slurm-4242.out", "train.err", "logs/rank0.log"):
        (root / name).parent.mkdir(exist_ok=True)
        (root / name).write_text("step 1 loss 2.3\n" * 7)
    after = code.collect(str(root))
    assert (after["kind"], after["hash"]) == (kind, before["hash"])
    (root / "extra.py").write_text("a = 1\n")  # a new source file still counts
    assert code.collect(str(root))["hash"] != before["hash"]


def test_tree_hash_is_capped_and_says_truncated(tmp_path, monkeypatch):
    for i in range(5):
        (tmp_path / f"f{i}").write_text("x")
    monkeypatch.setattr(code, "MAX_FILES", 3)
    c = code.collect(str(tmp_path))
    assert (c["files"], c["truncated"], c["reason"]) == (3, True, "stopped after 3 files")


def test_code_file_and_missing(tmp_path):
    f = tmp_path / "job.py"
    f.write_text("x")
    assert code.collect(str(f))["kind"] == "file"
    m = code.collect(str(tmp_path / "nope"))
    assert (m["kind"], m["hash"], m["reason"]) == ("missing", None, "does not exist")


def test_identical_copies_with_different_mtimes_share_a_fingerprint(tmp_path):
    for name in ("n1", "n2"):
        (tmp_path / name / "shards").mkdir(parents=True)
        (tmp_path / name / "shards" / "0.bin").write_bytes(b"\0" * 100)
        (tmp_path / name / "meta.json").write_text("{}")
    os.utime(tmp_path / "n2" / "meta.json", (0, 0))
    a, b = paths.collect([str(tmp_path / "n1"), str(tmp_path / "n2")])
    assert (a["exists"], a["readable"], a["kind"], a["files"], a["bytes"], a["truncated"]) == (
        True, True, "dir", 2, 102, False)
    assert a["fingerprint"] == b["fingerprint"]
    (tmp_path / "n2" / "meta.json").write_text("{ }")
    assert paths.fingerprint(str(tmp_path / "n2"))["fingerprint"] != a["fingerprint"]


def test_missing_path(tmp_path):
    p = paths.fingerprint(str(tmp_path / "data"))
    assert (p["exists"], p["readable"], p["kind"], p["fingerprint"]) == (False, False, "missing", None)


def test_env_keeps_nccl_settings_and_never_keeps_secret_values():
    env = {"NCCL_DEBUG": "INFO", "NCCL_IB_PKEY": "0", "NCCL_SECRET_TOKEN": "hunter2", "MASTER_ADDR": "h1",
           "GLOO_SOCKET_IFNAME": "eth0", "FI_PROVIDER": "efa", "UCX_AUTH_KEY": "x", "HOME": "/root",
           "CUDA_VISIBLE_DEVICES": "0,1", "TORCH_NCCL_BLOCKING_WAIT": "1"}
    e = envvars.collect(env)
    assert e["vars"] == {"CUDA_VISIBLE_DEVICES": "0,1", "FI_PROVIDER": "efa", "GLOO_SOCKET_IFNAME": "eth0",
                         "MASTER_ADDR": "h1", "NCCL_DEBUG": "INFO", "NCCL_IB_PKEY": "0",
                         "TORCH_NCCL_BLOCKING_WAIT": "1"}
    assert e["redacted"] == ["NCCL_SECRET_TOKEN", "UCX_AUTH_KEY"]
    assert "hunter2" not in repr(e)


def test_packages_hash_is_over_normalized_name_and_version():
    p = packages.collect()
    assert p["count"] == len(p["items"]) > 0
    assert "psutil" in p["items"] and all(n == packages.normalize(n) for n in p["items"])
    assert p["hash"] == packages.collect()["hash"]
    assert packages.normalize("Foo_Bar.baz") == "foo-bar-baz"


def test_packages_read_name_and_version_as_the_metadata_parser_does():
    from importlib import metadata

    # the headers end at the first blank line: a description that says "Version: 9" is not the version
    text = "Metadata-Version: 2.1\nName: torch\nVersion: 2.13.0\nSummary: x\n\nVersion: 9\nName: other\n"
    assert packages.name_version(text) == ("torch", "2.13.0")
    assert packages.name_version("Name: a\n") == ("a", None) and packages.name_version("") == (None, None)
    for dist in list(metadata.distributions())[:40]:  # what importlib's full parse says, on this machine's own
        want = (dist.metadata["Name"], dist.version)
        assert packages.name_version(dist.read_text("METADATA") or dist.read_text("PKG-INFO") or "") == want


def test_versions_take_cuda_nccl_driver_from_gpu_facts():
    # the api hands ncclcheck's version down (a source checkout on PYTHONPATH has no installed metadata)
    v = versions.collect({"cuda": "12.4", "nccl": "2.21.5", "driver": "560.35.03"}, tool_version="0.1.0")
    assert (v["cuda"], v["nccl"], v["driver"], v["ncclcheck"]) == ("12.4", "2.21.5", "560.35.03", "0.1.0")
    assert versions.collect({"unavailable": "x"})["cuda"] is None
    assert v["python"].count(".") == 2
