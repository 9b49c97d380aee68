"""links_job with injected faults, for the multi-process tests: the faults live here, not in product code.

    run_world("tests.links_faults:links_job_with_faults", {**payload, "faults": {...}}, ...)

faults (all optional):
  slow_rank / slow_node: N     this rank / node transmits slowly (each data send waits delay_s first)
  slow_link: [A, B]            only A's transmissions to B are slow (a slow path, not a slow node)
  delay_s: 0.05                the extra time per data send
  slow_rounds: [0]             the slow faults above apply only in these rounds (a passing hiccup); default all
  hiccups: K                   only the first K data sends of each slow direction wait (warmup included): a busy
                               CPU's passing stall, which a median of a few short transfers reads as a slow link
  exit_rank: R, exit_round: K  rank R dies (exit code 17) in round K:
  exit_at: "transfer"          ... between the pair's two directions (its partner sees the connection close), or
           "start"             ... right after reading round K's pairs, before meeting its partner (nobody sees a
                               connection close: only its heartbeat stops)
"""

from __future__ import annotations

import dataclasses
import os
import time

from ncclcheck.links import job
from ncclcheck.rendezvous.store import JsonStore


def _me(ctx) -> int:
    return ctx.rank if ctx.nnodes == 1 else ctx.node_rank


def _faulty_channel(ctx, f: dict) -> type:
    me, delay = _me(ctx), float(f.get("delay_s", 0.05))
    slow_everywhere = f.get("slow_rank") == ctx.rank or f.get("slow_node") == me
    dies = f.get("exit_rank") == ctx.rank and f.get("exit_at", "transfer") == "transfer"

    class FaultyChannel(job.Channel):
        first_kind = None
        slow_sends = 0

        def _data_op(self, kind: str, t) -> None:
            if t.numel() <= 1:  # the 4-byte go-on/stop acks are not data
                return
            if dies and self.round_no == int(f.get("exit_round", 0)):
                self.first_kind = self.first_kind or kind
                if kind != self.first_kind:  # the pair's second direction begins
                    os._exit(17)
            in_round = f.get("slow_rounds") is None or self.round_no in f["slow_rounds"]
            slow_here = slow_everywhere or list(f.get("slow_link") or ()) == [me, self.peer_id]
            if kind == "send" and in_round and slow_here:
                self.slow_sends += 1
                if f.get("hiccups") is None or self.slow_sends <= int(f["hiccups"]):
                    time.sleep(delay)

        def send(self, t) -> None:
            self._data_op("send", t)
            super().send(t)

        def recv(self, t) -> None:
            self._data_op("recv", t)
            super().recv(t)

    return FaultyChannel


def _faulty_store(ctx, f: dict) -> type:
    dies = f.get("exit_rank") == ctx.rank and f.get("exit_at") == "start"
    go_key = f"go/{int(f.get('exit_round', 0))}"

    class FaultyStore(JsonStore):
        def wait_alive(self, key, *args, **kwargs):
            value = super().wait_alive(key, *args, **kwargs)
            if dies and key == go_key and not value.get("stop"):
                os._exit(17)
            return value

    return FaultyStore


def links_job_with_faults(ctx, payload: dict) -> dict:
    f = dict(payload.get("faults") or {})
    payload = {k: v for k, v in payload.items() if k != "faults"}
    st = job._job_store(ctx)
    ctx = dataclasses.replace(ctx, store=_faulty_store(ctx, f)(st.raw, st.prefix, st.server, st.guard))
    return job.links_job(ctx, payload, transport=_faulty_channel(ctx, f))


def links_job_one_round_slow_rank_1(ctx, payload: dict) -> dict:
    """links_job in quick mode's single random round (quick_rounds 1, which the CLI does not offer) with rank 1 sending
    0.4 s late: its pair is slow and neither member was measured with anyone else, so both are re-tested against
    nodes that passed. Put in place of ncclcheck.links.job.links_job by a test that runs the CLI (a rank imports a job
    by its name, so this one reaches every rank)."""
    return links_job_with_faults(ctx, {**payload, "quick_rounds": 1, "faults": {"slow_rank": 1, "delay_s": 0.4}})
