"""links_job: measure node-to-node bandwidth in rounds of disjoint pairs on a formed world, and name the slow ones.

Runs on every rank of a world formed by agent/runner.py. One process per node carries the traffic (local rank 0; with
`by="rank"` every rank counts as a "node", which is what a single-machine run and the tests use). Coordination goes
through the world's store as JSON, data through a private two-rank process group per pair, so:
- nothing here is a collective over the whole world: a dead node cannot hang a barrier;
- a timeout poisons only that pair's group (a gloo timeout closes every connection of its context);
- every blocking wait has a bound (pair ops: `timeout_s`; store waits: one round's worst case).

Node 0's participant coordinates: it publishes each round's pairs (`go/<r>`), collects every participant's report
(`done/<r>/<node>`), declares nodes that never report dead, plans quick-mode re-tests, and publishes the analysis
(`final`) that every rank returns.
"""

from __future__ import annotations

import statistics
import threading
import time
from datetime import timedelta
from typing import Any, Optional

from ..agent.context import WorkerContext, show_row
from ..config import LinksConfig
from ..facts import hostname
from ..model import sig
from ..rendezvous.store import JsonStore
from . import efficiency, schedule
from .analyze import analyze
from .plan import RoundPlan

_CFG = LinksConfig()  # the user-facing defaults live in config.LinksConfig; the rest are the job's own
DEFAULTS: dict[str, Any] = {
    "size": _CFG.size,  # bytes per transfer
    "iters": _CFG.iters,  # timed transfers per direction
    "warmup": 1,
    "rounds": _CFG.rounds,  # auto | full | quick | scale (links/schedule.auto_mode)
    "quick_rounds": 3,
    "seed": _CFG.seed,
    "relative": _CFG.relative,
    "min_gbps": _CFG.min_gbps,
    "min_efficiency": _CFG.min_efficiency,  # gate: each direction's GB/s / its two ends' bound (links/efficiency.py)
    "timeout_s": None,  # one pair operation; None: the world's timeout
    "budget_s": None,  # per direction: stop timing early on a very slow link; None: timeout_s / 4
    "grace_s": None,  # how long to wait for a node whose partner saw its connection close; None: the Budget's
    "heartbeat_s": None,  # a participant whose heartbeat has not moved for this long is dead; None: the Budget's
    "by": "auto",  # node | rank | auto (node when the world has several nodes)
    "stat": "median",  # median | best: which iteration time makes the GB/s (best resists a noisy, shared CPU)
    "min_time_s": None,  # time each direction at least this long (0: exactly `iters`); None: the Budget's
}
# Transfers per direction at most when short ones are repeated to fill min_time_s (`iters` above it is kept as is).
MAX_TRANSFERS = 256
ROW_KIND = "links_row"


def payload_from_config(cfg: Any, timeout_s: Optional[float] = None) -> dict:
    """The job payload for a config.LinksConfig (what links/pipeline.py passes to agent.runner.run_job)."""
    return {
        "size": cfg.size,
        "iters": cfg.iters,
        "rounds": cfg.rounds,
        "min_gbps": cfg.min_gbps,
        "min_efficiency": getattr(cfg, "min_efficiency", None),
        "relative": cfg.relative,
        "seed": getattr(cfg, "seed", 0),
        "min_time_s": getattr(cfg, "min_time_s", None),
        "timeout_s": timeout_s,
    }


class _Opts:
    def __init__(self, payload: dict, ctx: WorkerContext):
        p = {**DEFAULTS, **{k: v for k, v in (payload or {}).items() if v is not None}}
        self.size = max(1, int(p["size"]))
        self.iters = max(1, int(p["iters"]))
        self.warmup = max(0, int(p["warmup"]))
        self.mode = p["rounds"] if p["rounds"] in ("quick", "scale", "auto") else "full"  # auto: decided per n
        self.quick_rounds = max(1, int(p["quick_rounds"]))
        self.seed = int(p["seed"])
        self.relative = float(p["relative"])
        self.min_gbps = None if p["min_gbps"] is None else float(p["min_gbps"])
        self.min_efficiency = None if p["min_efficiency"] is None else float(p["min_efficiency"])
        # One pair operation's bound: --timeout (a dead peer is normally caught much sooner: heartbeat, 20x rule).
        b = self.budget = ctx.budget
        self.timeout_s = b.links_op_s(p["timeout_s"])
        self.budget_s = float(p["budget_s"]) if p["budget_s"] is not None else b.links_direction_s(self.timeout_s)
        self.grace_s = float(p["grace_s"]) if p["grace_s"] is not None else b.links_grace_s
        self.heartbeat_s = float(p["heartbeat_s"]) if p["heartbeat_s"] is not None else b.links_heartbeat_s
        self.stat = min if p["stat"] == "best" else statistics.median
        self.min_time_s = b.links_min_time_s if p["min_time_s"] is None else float(p["min_time_s"])
        # The receiver says when to stop (_recv_side), at the latest after max_transfers; the sender goes on until
        # told, up to the most any receiver of the same --iters could ask (whatever that node's --min-time).
        self.max_transfers = self.warmup + (max(self.iters, MAX_TRANSFERS) if self.min_time_s > 0 else self.iters)
        self.send_cap = self.warmup + max(self.iters, MAX_TRANSFERS)
        by = p["by"]
        self.by = ("node" if ctx.nnodes > 1 else "rank") if by == "auto" else by
        self.round_bound_s = b.links_round_s(self.timeout_s, self.budget_s)


class _Heartbeat:
    """Each participant bumps a counter in the store; a counter that stops moving means a dead process or host.

    A node can die where no partner notices (a bye round, between rounds, before its pair connects); without
    this, only the one-round bound would catch it."""

    def __init__(self, kv: JsonStore, me: Optional[int], beat_s: float):
        self.kv, self.me, self.beat_s = kv, me, beat_s
        self.seen: dict[int, tuple[int, float]] = {}  # node -> (counter, when it last moved)
        self._stop = threading.Event()
        self._thread = None
        if me is not None:
            self.kv.add(f"hb/{me}", 1)
            self._thread = threading.Thread(target=self._run, name="ncclcheck-links-heartbeat", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.beat_s):
            try:
                self.kv.add(f"hb/{self.me}", 1)
            except Exception:
                return  # the store is gone: the waits will say so

    def stale_s(self, node: int) -> float:
        """Seconds since node's heartbeat last moved (0 the first time we look)."""
        now = time.monotonic()
        try:
            count = self.kv.add(f"hb/{node}", 0)
        except Exception:
            return 0.0
        last = self.seen.get(node)
        if last is None or last[0] != count:
            self.seen[node] = (count, now)
            return 0.0
        return now - last[1]

    def stop(self) -> None:
        self._stop.set()


def _job_store(ctx: WorkerContext) -> JsonStore:
    """The world's store as JSON. The runner hands jobs a JsonStore; a bare c10d store (or none: the default
    process group's) is wrapped."""
    st = ctx.store
    if isinstance(st, JsonStore):
        return st
    if st is None:
        from torch.distributed.distributed_c10d import _get_default_store

        st = _get_default_store()
    return JsonStore(st)


# ------------------------------------------------------------------------------------------- one pair's channel
class Channel:
    """A private two-rank process group between the members of one pair, with bounded send/recv and a timer.

    The transport of links_job: `round_no` and `peer_id` name the pair (tests substitute a subclass that injects
    faults). On NCCL, TORCH_NCCL_ASYNC_ERROR_HANDLING comes from the worker's environment, which the runner sets
    before torch initialises (agent/runner.py: a failed pair aborts its communicator, not the process)."""

    def __init__(self, ctx: WorkerContext, store: Any, pair_rank: int, timeout_s: float, round_no: int = 0,
                 peer_id: int = -1):
        import torch
        import torch.distributed as dist

        self.torch = torch
        self.round_no, self.peer_id = round_no, peer_id
        self.td = timedelta(seconds=timeout_s)
        self.limit_s = timeout_s
        self.budget = ctx.budget
        self.peer = 1 - pair_rank
        self.cuda = ctx.backend == "nccl" and str(ctx.device).startswith("cuda")
        self.device = torch.device(ctx.device if self.cuda else "cpu")
        if self.cuda:
            opts = dist.ProcessGroupNCCL.Options()
            opts._timeout = self.td
            self.pg = dist.ProcessGroupNCCL(store, pair_rank, 2, opts)
        else:
            self.pg = dist.ProcessGroupGloo(store, pair_rank, 2, self.td)

    def send(self, t: Any) -> None:
        self.pg.send([t], self.peer, 0).wait(self.td)

    def recv(self, t: Any) -> None:
        self.pg.recv([t], self.peer, 0).wait(self.td)

    def begin(self, limit_s: float) -> None:
        """A new direction: its first transfer gets its own bound (Budget.links_transfer_s), whatever the other
        direction's transfers took; the tightened bound of a fast direction would time a slow one out."""
        self.limit_s = limit_s
        self.td = timedelta(seconds=limit_s)

    def tighten(self, first_s: float, limit_s: Optional[float] = None) -> None:
        """After a direction's first transfer, bound each op by 20x its time (3 s at least, this direction's limit
        at most): a peer that died without closing its connection cleanly is then noticed in seconds."""
        self.td = timedelta(seconds=self.budget.links_tightened_s(first_s, self.limit_s if limit_s is None
                                                                    else limit_s))

    def start(self) -> Any:
        if self.cuda:
            ev = self.torch.cuda.Event(enable_timing=True)
            ev.record()
            return ev
        return time.perf_counter()

    def elapsed_s(self, start: Any) -> float:
        if self.cuda:
            end = self.torch.cuda.Event(enable_timing=True)
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3
        return time.perf_counter() - start

    def close(self, failed: bool) -> None:
        closer = getattr(self.pg, "abort" if failed else "shutdown", None)
        if self.cuda and closer is not None:
            try:
                closer()
            except Exception:
                pass
        self.pg = None


def _short(e: BaseException) -> str:
    text = " ".join(str(e).split())
    # gloo prefixes its messages with the C++ source location; the user needs the reason.
    if text.startswith("[") and "] " in text:
        text = text.split("] ", 1)[1]
    return (text[:200] + "...") if len(text) > 200 else (text or type(e).__name__)


def _send_side(ch: Channel, o: _Opts, limit_s: Optional[float] = None) -> list[float]:
    """Sender's clock: send `size` bytes, then wait for the receiver's 4-byte ack (continue=1 / stop=0). limit_s:
    this direction's transfer bound (Budget.links_transfer_s; None: the op bound)."""
    torch = ch.torch
    ch.begin(o.timeout_s if limit_s is None else limit_s)
    buf = torch.empty(o.size, dtype=torch.uint8, device=ch.device)
    ack = torch.zeros(1, dtype=torch.int32, device=ch.device)
    times = []
    for i in range(o.send_cap):
        t0 = ch.start()
        ch.send(buf)
        ch.recv(ack)
        dt = ch.elapsed_s(t0)
        if i == 0:
            ch.tighten(dt)
        if i >= o.warmup:
            times.append(dt)
        if int(ack.item()) == 0:
            break
    return times


def _recv_side(ch: Channel, o: _Opts, limit_s: Optional[float] = None) -> None:
    """Receiver: after each transfer, tell the sender whether to go on (stops early once past the budget)."""
    torch = ch.torch
    ch.begin(o.timeout_s if limit_s is None else limit_s)
    buf = torch.empty(o.size, dtype=torch.uint8, device=ch.device)
    go_on = torch.ones(1, dtype=torch.int32, device=ch.device)
    stop = torch.zeros(1, dtype=torch.int32, device=ch.device)
    t0 = time.monotonic()
    timed_from = t0  # when the first timed (post-warmup) transfer began
    enough = o.warmup + o.iters  # transfers that are always made; more while the timed ones total < min_time_s
    for i in range(o.max_transfers):
        t_i = time.monotonic()
        if i == o.warmup:
            timed_from = t_i
        ch.recv(buf)
        now = time.monotonic()
        if i == 0:
            ch.tighten(now - t_i)
        last = (i == o.max_transfers - 1 or (i >= enough - 1 and now - timed_from >= o.min_time_s)
                or (i >= o.warmup and now - t0 > o.budget_s))
        ch.send(stop if last else go_on)
        if last:
            break


def _measure_pair(ctx: WorkerContext, o: _Opts, kv: JsonStore, hb: _Heartbeat, r: int, me: int, peer: int,
                  unit: str, transport: type, limits: Optional[list] = None) -> dict:
    """Both directions of one pair; returns this side's transmit measurement (a->b is timed by a). limits: the
    [a->b, b->a] transfer bounds the coordinator derived from each direction's bound (None: the op bound)."""
    res: dict = {"peer": peer, "tx_gbps": None, "tx_us": [], "error": None}
    a, b = min(me, peer), max(me, peer)
    pair_kv = kv.scoped(f"pg/{r}/{a}-{b}/")
    ch = None
    try:
        # Meet in the store first, with our own bound: gloo's connect waits on the store's (long) default timeout.
        pair_kv.set(f"hello/{me}", 1)
        pair_kv.wait_alive(f"hello/{peer}", o.budget.deadline(o.timeout_s), o.budget,
                           alive=lambda: _gone(hb, o, peer, unit), slice_s=o.budget.links_alive_check_s)
        ch = transport(ctx, _store_prefixed(pair_kv), 0 if me == a else 1, o.timeout_s, round_no=r, peer_id=peer)
        for k, (src, _dst) in enumerate(((a, b), (b, a))):
            limit = _limit(limits, k, o)
            if me == src:
                times = _send_side(ch, o, limit)
                res["tx_us"] = [sig(t * 1e6) for t in times]
                res["tx_gbps"] = o.size / o.stat(times) / 1e9
            else:
                _recv_side(ch, o, limit)
    except Exception as e:
        res["error"] = _short(e)
    finally:
        if ch is not None:
            ch.close(failed=res["error"] is not None)
    return res


def _limit(limits: Any, k: int, o: _Opts) -> float:
    """Direction k's transfer bound from the go message (a peer's value: a number within [T, 100 T]), else T."""
    v = limits[k] if isinstance(limits, list) and len(limits) == 2 else None
    if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v:
        return min(max(float(v), o.timeout_s), o.budget.links_transfer_cap_s(o.timeout_s))
    return o.timeout_s


def _store_prefixed(kv: JsonStore) -> Any:
    import torch.distributed as dist

    return dist.PrefixStore(kv.prefix + "c10d/", kv.raw)


# ----------------------------------------------------------------------------------------------------- the job
def links_job(ctx: WorkerContext, payload: dict, transport: type = Channel) -> dict:
    """Run the links schedule. Every rank returns the same analysed result (when the coordinator survives):
    {"links": <report section>, "checks": [CheckResult JSON], "role", "unit", "id", "error"?}.

    transport: the pair channel class (Channel; tests pass a subclass that injects slow or dying peers)."""
    o = _Opts(payload, ctx)
    if o.by == "rank":
        unit, me, n = "rank", ctx.rank, ctx.world_size
    else:
        unit, me, n = "node", (ctx.node_rank if ctx.local_rank == 0 else None), ctx.nnodes
    base = {"unit": unit, "id": me}
    if n < 2:
        a = analyze([[None]] * n if n else [], size=o.size, relative=o.relative, min_gbps=o.min_gbps, unit=unit,
                    extra={"mode": schedule.auto_mode(n, o.mode), "iters": o.iters,
                           "min_time_s": o.min_time_s, "rounds": []})
        return {**base, "role": "coordinator" if me == 0 else "idle", "links": a.section,
                "checks": [c.to_json() for c in a.checks]}
    store = _job_store(ctx)
    # Every rank calls every job the same number of times, so its own call count names this run on all ranks
    # without a collective.
    seq = store.add(f"ncclcheck/links/calls/{ctx.rank}", 1)
    kv = store.scoped(f"ncclcheck/links/{seq}/")
    if me is not None:
        kv.set(f"host/{me}", hostname())
        if unit == "node":  # what this node's links can carry: the bound of every pair it is in
            kv.set(f"links/{me}", _my_links(ctx))
    hb = _Heartbeat(kv, me, ctx.budget.links_beat_s)
    try:
        if me == 0:
            return {**base, "role": "coordinator", **_Coordinator(ctx, o, kv, hb, n, unit, transport).run()}
        return {**base, "role": "participant" if me is not None else "idle",
                **_follow(ctx, o, kv, hb, me, unit, transport)}
    finally:
        hb.stop()


def _my_links(ctx: WorkerContext) -> dict:
    """This node's link facts (facts/links.py); never raises: without them the bound is unknown and says why."""
    from ..facts.links import collect_for_job, store_host

    try:
        return collect_for_job(with_gpus=ctx.device.startswith("cuda"), peer=store_host(ctx.store))
    except Exception as e:  # noqa: BLE001
        return {"unavailable": f"{type(e).__name__}: {e}"}


def _go_record(v: Any) -> Optional[str]:
    if not isinstance(v, dict) or not isinstance(v.get("pairs", []), list) or not isinstance(v.get("dead", []), list):
        return "not a round's go message"
    return None


def _final_record(v: Any) -> Optional[str]:
    return None if isinstance(v, dict) else "not the links run's final result"


def _text(v: Any) -> Optional[str]:
    return None if isinstance(v, str) else "not a host name"


def _done_record(v: Any) -> Optional[str]:
    return None if isinstance(v, dict) else "not a round's report"


def _gone(hb: _Heartbeat, o: _Opts, node: int, unit: str) -> Optional[str]:
    stale = hb.stale_s(node)
    return f"{unit} {node} stopped answering (no heartbeat for {stale:.0f} s)" if stale > o.heartbeat_s else None


def _follow(ctx: WorkerContext, o: _Opts, kv: JsonStore, hb: _Heartbeat, me: Optional[int], unit: str,
            transport: type) -> dict:
    """A non-coordinating rank: take part in each round it is in until the coordinator says stop."""
    r = 0
    round_s = o.round_bound_s
    try:
        while True:
            b = o.budget
            bound = b.links_first_wait_s(o.timeout_s) if r == 0 else b.links_next_wait_s(round_s, o.grace_s)
            msg = kv.wait_alive(f"go/{r}", b.deadline(bound), b, alive=lambda: _gone(hb, o, 0, unit),
                                slice_s=b.links_alive_check_s, check=_go_record)
            if msg.get("stop") or (me is not None and me in msg.get("dead", ())):
                break
            round_s = _round_s(msg, o)
            if me is not None:
                peer = next((b if a == me else a for a, b in msg["pairs"] if me in (a, b)), None)
                res = (_measure_pair(ctx, o, kv, hb, r, me, peer, unit, transport,
                                     _pair_limits(msg, me, peer)) if peer is not None else {"peer": None})
                kv.set(f"done/{r}/{me}", res)
            r += 1
        return kv.wait_alive("final", o.budget.deadline(o.timeout_s), o.budget, alive=lambda: None,
                             slice_s=o.timeout_s, check=_final_record)
    except Exception as e:
        why = _short(e)
        return {"links": None, "checks": [{
            "id": "links.dead", "status": "fail", "node": 0,
            "summary": f"the coordinating {unit} (0) stopped answering during the links run: {why}",
            "detail": f"{unit} {me} gave up waiting after round {r}.", "fix": f"read {unit} 0's log",
            "evidence": {"round": r}}], "error": why}


def _pair_limits(msg: dict, me: int, peer: int) -> Optional[list]:
    lim = msg.get("limits")
    return lim.get(f"{min(me, peer)}-{max(me, peer)}") if isinstance(lim, dict) else None


def _round_s(msg: dict, o: _Opts) -> float:
    """One round's bound for the round `msg` starts: from its longest transfer bound (the coordinator's own rule)."""
    lim = msg.get("limits") if isinstance(msg.get("limits"), dict) else {}
    ops = [_limit(v, k, o) for v in lim.values() for k in (0, 1)]
    return o.budget.links_round_s(max(ops, default=o.timeout_s), o.budget_s)


class _Coordinator:
    def __init__(self, ctx: WorkerContext, o: _Opts, kv: JsonStore, hb: _Heartbeat, n: int, unit: str,
                 transport: type):
        self.ctx, self.o, self.kv, self.hb, self.n, self.unit = ctx, o, kv, hb, n, unit
        self.transport = transport
        self.matrix: list[list[Optional[float]]] = [[None] * n for _ in range(n)]
        self.tx_us: dict = {}
        self.dead: dict[int, int] = {}  # node -> round it died in
        self.errors: dict[tuple, str] = {}
        self.rounds_run: list = []
        self.unmeasured: list = []
        self.limits: dict = {}  # (a, b) -> that direction's transfer bound (Budget.links_transfer_s)
        self.bounds: Optional[efficiency.Bounds] = None  # each node's egress/ingress bound (unit "node" only)

    def run(self) -> dict:
        o, ctx = self.o, self.ctx
        plan = RoundPlan(self.n, o.mode, self.unit, o.quick_rounds, o.seed, o.relative, o.min_gbps)
        o.mode = plan.mode
        if self.unit == "node":
            self._await_link_facts()
            self._plan_limits()
        # A phase counts rounds against the rounds it knows of: the schedule first, then each stage of re-tests
        # the plan adds once it has read the matrix (a phase of its own; one total for both said "5 of 3").
        planned = len(plan.rounds)
        ctx.observer.start(planned, "links")
        t_start = time.monotonic()
        r = 0
        try:
            while (pairs := plan.next_round(self.matrix, self.dead, self._floors())) is not None:
                if len(plan.rounds) > planned:
                    ctx.observer.start(len(plan.rounds) - planned, "links re-test")  # ends the phase before it
                    planned = len(plan.rounds)
                self._round(r, pairs)
                ctx.observer.advance(f"round {r + 1}")
                r += 1
        finally:
            ctx.observer.stop()
        hosts = [self.kv.get_now(f"host/{x}", _text) or "" for x in range(self.n)]
        result = analyze(
            self.matrix, size=o.size, relative=o.relative, min_gbps=o.min_gbps, hosts=hosts,
            dead=sorted(self.dead), unit=self.unit,
            errors=[{"a": a, "b": b, "error": e} for (a, b), e in sorted(self.errors.items())
                    if a not in self.dead and b not in self.dead],
            unmeasured=self.unmeasured, floors=self._floors(),
            limits=efficiency.limits(self.matrix, self.bounds) if self.bounds is not None else None,
            extra={"mode": o.mode, "iters": o.iters, "min_time_s": o.min_time_s, "rounds": self.rounds_run,
                   "seed": o.seed,
                   "dead_round": {str(k): v for k, v in sorted(self.dead.items())},
                   "wall_s": round(time.monotonic() - t_start, 3), "tx_us": self.tx_us},
        )
        checks = list(result.checks)
        by_node = {x: f for x in range(self.n) if self.unit == "node" and isinstance(f := self.kv.get_now(
            f"links/{x}"), dict)}
        fields, eff_checks = efficiency.evaluate(self.matrix, by_node, ctx.backend, self.unit, hosts,
                                                 o.min_efficiency, result.section.get("slow_nodes") or [])
        result.section.update(fields)  # every pair carries its bound; ranks on one host: "crosses no link"
        if self.unit == "node" or o.min_efficiency is not None:
            checks += eff_checks
        final = {"links": result.section, "checks": [c.to_json() for c in checks]}
        self.kv.set("final", final)
        self.kv.set(f"go/{r}", {"stop": True, "dead": sorted(self.dead)})
        return final

    def _await_link_facts(self) -> None:
        """Round 0 starts once every node has read its links (or after a short bound): a node still forking `tc`
        would slow the first round's transfers on a small machine and be re-tested as a suspect."""
        b = self.o.budget
        end = b.deadline(min(b.links_facts_wait_s, self.o.timeout_s))
        todo = set(range(self.n))
        while todo and time.monotonic() < end:
            todo = {x for x in todo if self.kv.get_now(f"links/{x}") is None and not self.hb.stale_s(x) >
                    self.o.heartbeat_s}
            if todo:
                time.sleep(b.links_poll_s)

    def _plan_limits(self) -> None:
        """Each direction's transfer bound from its expected bound (links/efficiency.py: a's egress, b's ingress),
        so a slow-but-working link is measured slow rather than timed out."""
        by_node = {x: f for x in range(self.n) if isinstance(f := self.kv.get_now(f"links/{x}"), dict)}
        nb = self.bounds = efficiency.Bounds.read(by_node, self.n, self.ctx.backend)
        for a in range(self.n):
            for b in range(self.n):
                if a != b:
                    self.limits[(a, b)] = self.o.budget.links_transfer_s(self.o.size, nb.of(a, b).gbps,
                                                                         self.o.timeout_s)

    def _floors(self) -> Optional[list]:
        """Each direction's floor from its trusted bound (links/efficiency.floors) for the matrix so far; None
        between ranks of one host (nothing crosses a link) or before the bounds are read."""
        if self.bounds is None:
            return None
        return efficiency.floors(self.matrix, self.bounds, self.o.relative)

    def _round(self, r: int, pairs: list) -> None:
        kv, o = self.kv, self.o
        live = [list(p) for p in pairs if p[0] not in self.dead and p[1] not in self.dead]
        for a, b in pairs:
            if [a, b] not in live:
                self.ctx.emit(ROW_KIND, {"round": r, "a": a, "b": b, "gbps_ab": None, "gbps_ba": None,
                                         "error": f"skipped: {self.unit} {a if a in self.dead else b} is dead"})
        limits = {f"{a}-{b}": [sig(self.limits.get((a, b), o.timeout_s)), sig(self.limits.get((b, a), o.timeout_s))]
                  for a, b in (sorted(p) for p in live)}
        msg = {"pairs": live, "dead": sorted(self.dead), "limits": limits}
        kv.set(f"go/{r}", msg)
        self.rounds_run.append(live)
        t0 = time.monotonic()
        peer = next((b if a == 0 else a for a, b in live if 0 in (a, b)), None)
        mine = (_measure_pair(self.ctx, o, kv, self.hb, r, 0, peer, self.unit, self.transport,
                              _pair_limits(msg, 0, peer)) if peer is not None else {"peer": None})
        round_s = _round_s(msg, o)
        kv.set(f"done/{r}/0", mine)
        alive = [x for x in range(self.n) if x not in self.dead]
        got, missing = self._collect(r, alive, t0, round_s)
        for x in missing:
            self.dead[x] = r
        for x, res in got.items():
            p = res.get("peer")
            if p is None:
                continue
            if res.get("tx_gbps") is not None:
                # A re-test keeps the better of the two: a hiccup only ever slows a transfer down.
                old = self.matrix[x][p]
                self.matrix[x][p] = res["tx_gbps"] if old is None else max(old, res["tx_gbps"])
                self.tx_us[f"{x}->{p}"] = res.get("tx_us", [])
            if res.get("error"):
                self.errors.setdefault((min(x, p), max(x, p)), res["error"])
        for a, b in live:
            err = self.errors.get((a, b))
            if a in self.dead or b in self.dead:
                err = f"{self.unit} {a if a in self.dead else b} died: {err or 'no report'}"
            row = {"round": r, "a": a, "b": b, "gbps_ab": self.matrix[a][b], "gbps_ba": self.matrix[b][a],
                   "error": err}
            self.ctx.emit(ROW_KIND, row)
            show_row(self.ctx.observer, ROW_KIND, row)

    def _collect(self, r: int, alive: list, t0: float, round_s: Optional[float] = None) -> tuple[dict, list]:
        """Every alive participant's report for round r, within one round's bound. A node whose heartbeat stopped
        is dead at once; one whose partner saw the connection close gets only `grace_s` more."""
        kv, o = self.kv, self.o
        end = o.budget.deadline(o.round_bound_s if round_s is None else round_s, since=t0)
        got: dict[int, dict] = {}
        suspects_since: Optional[float] = None
        while True:
            for x in alive:
                if x not in got and (done := kv.get_now(f"done/{r}/{x}", _done_record)) is not None:
                    got[x] = done
            missing = [x for x in alive if x not in got]
            if not missing:
                return got, []
            now = time.monotonic()
            stale = {x for x in missing if self.hb.stale_s(x) > o.heartbeat_s}
            if set(missing) <= stale:
                return got, missing
            accused = {res.get("peer") for res in got.values() if res.get("error")} | stale
            if set(missing) <= accused:
                suspects_since = suspects_since or now
                if not o.budget.within(suspects_since, o.grace_s):
                    return got, missing
            else:
                suspects_since = None
            if o.budget.passed(end):
                return got, missing
            time.sleep(o.budget.links_poll_s)
