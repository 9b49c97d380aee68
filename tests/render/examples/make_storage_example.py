"""Makes preflight-storage-3node.json (as root): node 0's report of a real 3-host lab run where h3 has a tmpfs over
the shared directory (a share that did not come up there) and h2 a read-only bind mount of it.

    sudo python3 -m tests.render.examples.make_storage_example      # from the checkout's root
"""

from __future__ import annotations

import json
import pathlib

from ncclcheck_lab.netlab.harness import Lab
from tests.lab.test_storage_lab import T, _run, _share

HERE = pathlib.Path(__file__).parent


def main() -> None:
    lab = Lab(3, name="sdex")
    try:
        share = _share(lab)
        lab.mount("h3", f"mount -t tmpfs -o size=16m ncclcheck-lab-local {share}")
        lab.mount("h2", f"mount --bind {share} {share}", f"mount -o remount,bind,ro {share}")
        runs = _run(lab, share, T, "--need", "1M")
        report = runs["h1"].report
        assert report is not None, runs["h1"].stderr
        (HERE / "preflight-storage-3node.json").write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    finally:
        lab.down()


if __name__ == "__main__":
    main()
