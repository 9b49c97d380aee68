#!/usr/bin/env python3
"""A fake `scontrol` for tests (tests/slurm_fake.py puts it on PATH as `scontrol`): records its argv, one JSON
line per call, in $FAKE_SCONTROL_LOG, and answers `show node [NAME]` / `update NodeName=X State=DRAIN|RESUME
Reason=...` from the node table in $FAKE_SCONTROL_STATE, laid out as Slurm 22.05 prints it
(tests/data/slurm/show_node_*.txt, captured from the lab's real Slurm). $FAKE_SCONTROL_MODE: ok (default), down
(controller not answering: exits 1 as scontrol does), hang (never answers), deny (updates refused)."""

import json
import os
import sys
import time


def record(node, st):
    reason = f"\n   Reason={st['Reason']} [root@2026-11-23T00:24:04]" if st.get("Reason") else ""
    return (f"NodeName={node} Arch=x86_64 CoresPerSocket=1 \n   CPUAlloc=0 CPUEfctv=2 CPUTot=2 CPULoad=0.10\n"
            f"   Gres={st.get('Gres') or '(null)'}\n   NodeAddr={node} NodeHostName={node} Version=22.05.8\n"
            f"   State={st['State']} ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A\n"
            f"   Partitions=lab {reason}\n")


def main(argv):
    with open(os.environ["FAKE_SCONTROL_LOG"], "a") as f:
        f.write(json.dumps(argv) + "\n")
    mode = os.environ.get("FAKE_SCONTROL_MODE", "ok")
    if mode == "hang":
        time.sleep(3600)
    if mode == "down":
        print("slurm_load_node error: Unable to contact slurm controller (connect failure)", file=sys.stderr)
        return 1
    path = os.environ["FAKE_SCONTROL_STATE"]
    with open(path) as f:
        nodes = json.load(f)
    if argv[:2] == ["show", "node"]:
        names = argv[2:] or sorted(nodes)
        missing = [n for n in names if n not in nodes]
        if missing:
            print(f"Node {missing[0]} not found", file=sys.stderr)
            return 1
        print("\n".join(record(n, nodes[n]) for n in names))
        return 0
    if argv and argv[0] == "update":
        if mode == "deny":
            print("slurm_update error: Invalid user id", file=sys.stderr)
            return 1
        kv = dict(a.split("=", 1) for a in argv[1:])
        st = nodes[kv["NodeName"]]
        base = st["State"].split("+")[0]
        if kv["State"] == "DRAIN":
            st["State"], st["Reason"] = base + "+DRAIN", kv["Reason"]
        elif kv["State"] == "RESUME":
            st["State"], st["Reason"] = base, None
        with open(path, "w") as f:
            json.dump(nodes, f)
        return 0
    print(f"fake scontrol: unsupported {argv}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
