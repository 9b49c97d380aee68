"""Join records that carry only what differs from node 0's own.

At 16,384 nodes every node uploaded its whole facts and node-local checks (12.6 KB) and node 0 decoded, cleaned and
type-checked 458,752 checks it already had: on healthy nodes of one image nearly all of them are node 0's own, word for
word. So the node that decides publishes a reference (`world/ref`: a digest per facts group and per check, without
the node rank) before anyone can read the join journal, and a member sends in full only the groups and checks whose
digest differs; for the rest it names the group or the check id. Node 0 puts its own value back in their place:
what it decides from is exactly what the full record would have given it.

A record is compacted against one reference, named by that reference's digest. A record naming another reference (a
stranger's forged `world/ref` in a job without a token) or a group or check the reference lacks cannot be put back:
it is refused and named, like any malformed record. A member that found no reference sends everything.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
from typing import Any, Optional

from ..model import CheckResult

DIGEST_CHARS = 16  # hex characters of a digest: 64 bits, where a collision needs a chosen pair, not chance
MAX_ITEMS = 4096  # groups or checks one reference may name (ncclcheck has a few dozen of each)


def digest(v: Any) -> str:
    text = json.dumps(v, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_CHARS]


def _check_digest(c: dict) -> str:
    return digest({k: v for k, v in c.items() if k != "node"})


@dataclasses.dataclass
class Reference:
    """Node 0's own facts and checks, as the record it publishes and as the values it puts back."""

    facts: dict  # group -> value, as a member's record would carry it after JSON
    checks: dict  # check id -> CheckResult, as decoding a member's record would make it (node rank replaced)
    record: dict  # what `world/ref` holds

    @classmethod
    def of(cls, facts: dict, checks: list) -> Reference:
        wire_facts = json.loads(json.dumps(facts, default=str))
        ids = collections.Counter(c.id for c in checks)  # a check id reported twice on one node is sent in full
        wire_checks = {c.id: json.loads(json.dumps(c.to_json(), default=str)) for c in checks if ids[c.id] == 1}
        body = {"facts": {k: digest(v) for k, v in wire_facts.items()},
                "checks": {k: _check_digest(v) for k, v in wire_checks.items()}}
        return cls(facts=wire_facts, checks={k: CheckResult.from_json(v) for k, v in wire_checks.items()},
                   record={**body, "id": digest(body)})

    def expand(self, rec: dict) -> Optional[str]:
        """Put node 0's own values back into a compacted join record, in place; why it cannot be, or None. The
        record's checks then hold CheckResults for what was named (see checks_of)."""
        same = rec.pop("same", None)
        if same is None:
            return None
        if not isinstance(same, dict) or same.get("ref") != self.record["id"]:
            return "a join record compacted against a reference node 0 did not publish"
        groups = same.get("facts")
        if not isinstance(groups, list) or any(g not in self.facts for g in groups):
            return "a join record naming facts groups node 0's reference lacks"
        if any(isinstance(c, str) and c not in self.checks for c in rec["checks"]):
            return "a join record naming checks node 0's reference lacks"
        rec["facts"] = {**{g: self.facts[g] for g in groups}, **rec["facts"]}
        r = rec["node_rank"]
        rec["checks"] = [dataclasses.replace(self.checks[c], node=r) if isinstance(c, str) else c
                         for c in rec["checks"]]
        return None


def read_reference(v: Any) -> Optional[str]:
    """Why a `world/ref` value is not a reference, or None."""
    if not isinstance(v, dict) or not isinstance(v.get("id"), str):
        return "not a join reference"
    for k in ("facts", "checks"):
        d = v.get(k)
        if not isinstance(d, dict) or len(d) > MAX_ITEMS or not all(isinstance(x, str) for x in d.values()):
            return f"a join reference whose {k} is not a table of digests"
    return None


def compact(rec: dict, ref: Optional[dict]) -> dict:
    """A member's join record with every facts group and check the reference holds word for word replaced by its
    name; the record unchanged when there is no reference."""
    if ref is None:
        return rec
    facts, checks = ref["facts"], ref["checks"]
    wire_facts = json.loads(json.dumps(rec["facts"], default=str))
    same = [g for g, v in wire_facts.items() if facts.get(g) == digest(v)]
    out_checks = []
    for c in rec["checks"]:
        out_checks.append(c["id"] if checks.get(c["id"]) == _check_digest(c) else c)
    return {**rec, "facts": {g: v for g, v in wire_facts.items() if g not in same}, "checks": out_checks,
            "same": {"ref": ref["id"], "facts": same}}


def checks_of(rec: dict) -> list:
    """A (validated, expanded) join record's node-local checks as CheckResults."""
    return [c if isinstance(c, CheckResult) else CheckResult.from_json(c) for c in rec.get("checks") or []]
