"""Every time bound of ncclcheck in one frozen object: `--timeout` (T) and the fixed waits, built once per process.

`--timeout` is a hang bound: each named wait (master probe, join, mesh, collective) may last at most T before its
cause is named; a sweep is not a wait and runs as long as its work needs. The other bounds do not depend on T; each
field says why it is what it is. Derived bounds (T plus a grace, a job step's stall bound...) are properties, so every
seconds literal and every piece of timeout arithmetic of the package lives in this module:
tests/rendezvous/test_budget.py scans the package's syntax trees and fails on one found anywhere else.

    budget = Budget.of(config)          # once, where the command starts (api); then passed down, never rebuilt
    end = budget.deadline(budget.join_s)
    budget.left(end)                    # seconds left before `end`, never below the socket floor
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Optional


@dataclass(frozen=True)
class Budget:
    """T (`timeout_s`) bounds each named wait; the other fields are fixed bounds, each with its reason."""

    timeout_s: float = 60.0  # T, --timeout: each named wait's bound (its default, when the flag is not given)
    max_timeout_s: float = 86400.0  # the largest T accepted (a day): 1e308 never expired and overflowed timedelta
    # --- sockets and the master probe
    connect_attempt_s: float = 2.0  # one TCP connect of a probe; a healthy LAN answers in milliseconds
    probe_retry_s: float = 0.25 # first pause between refused connects to a master that has not started yet
    probe_retry_max_s: float = 2.0  # the pause grows to this: a thousand nodes must not flood node 0 while it starts
    resolve_grace_s: float = 5.0  # a master name that does not resolve after this is a typo, not a slow resolver
    socket_floor_s: float = 0.05  # no socket timeout below this: a zero timeout would make a socket non-blocking
    reply_send_s: float = 0.5  # a mesh listener's one-line reply to a prober on a healthy host
    select_tick_s: float = 0.1  # how often the mesh prober looks at the clock while connects are in flight
    probe_suspect_s: float = 6.0  # a mesh probe that timed out is retried once with this bound before it is named:
    # a loaded host (load average 30 on 2 cores, issue 27) answers within seconds, a dropped SYN never does
    loaded_lag_s: float = 0.5  # a prober whose own loop woke this much later than asked was starved of CPU: loaded
    wait_slice_s: float = 2.0  # one blocking store request at most this long: c10d's wait ignores Ctrl-C
    journal_pending_s: float = 0.2  # a journal record counted but not yet written: look again this soon (its
    # writer is between its two requests; a stranger's counter raise costs one look per this, within the bound)
    # A TCPStore client connect (rendezvous/store.open_store): torch makes a second try of the whole timeout after a
    # backoff that grows with it, so a try of X cost 1.5-3.0 X on a refused port (measured, X = 1, 2, 4 s, 4 runs
    # each), and a member that reached node 0 just after it closed waited 19.6 s under --timeout 8. A try is a
    # quarter of the bound: the backoff's jitter (+-50%) keeps a margin.
    store_tries: float = 4.0
    store_connect_floor_s: float = 6.0  # a member's store connect past its join bound: node 0's port was found open
    # (rendezvous.master_reachable), and a listening store, even a loaded node 0's front, answers within seconds
    # A wait for another node (a master that refuses, a node that has not joined) says what it waits for once it
    # lasted this long (rendezvous/waits.py): a healthy wait ends sooner and adds no line, a stuck node says it
    # within ~2 s of its start (its first wait begins 0.3-1 s after it: Python, the facts)
    wait_notice_s: float = 1.0
    # A master that refuses is said sooner: the wait begins 0.3-1 s after the process (Python, the facts), and a node
    # must say within ~2 s of its start what it waits for; node 0 of a healthy start binds its port within this
    master_notice_s: float = 0.5
    wait_notice_every_s: float = 5.0  # ... then once per this while it lasts: one line per wait and node, at any scale
    # A wait on work other nodes do once the world formed (node 0's decision, the mesh rows, the exit code's acks)
    # says so after this: healthy, well under a second, seconds on a loaded host, where a line would be noise
    work_notice_s: float = 5.0
    thread_join_s: float = 2.0  # a helper thread (listener, progress relay) told to stop has this long to end
    mesh_probe_floor_s: float = 1.0  # the mesh probes get this long even if the peers' endpoints came late
    # --- preflight's rendezvous
    # After every rank joined, node 0 listens this long for a duplicate node rank. A duplicate already waiting when
    # node 0 started connects within one pause of its master probe (probe_retry_max_s) and joins ~0.5 s later: at 0.5
    # (the tests' old value) and 1 s a duplicate that started first missed the window now and then, and one world
    # passed with the other copy of its rank outside it.
    join_grace_s: float = 2.5
    # While joins stream in (the world not yet complete), node 0 reads them at most this often: each look costs it ~5
    # store requests whatever it finds, and reading each of 16,384 joins as it came was 80,000 requests through its
    # front (a fifth of the run's). The last join is read within this of its arrival.
    join_batch_s: float = 0.1
    squat_probe_s: float = 3.0  # node 0 finding its port taken: how long it tries to read who holds it
    # A second node rank 0 (preflight/second_master.py): one not at MASTER_ADDR looks there at its start and then
    # this often while nobody joined it, so it tells the real node 0 before that one's world is decided
    second_master_poll_s: float = 0.5
    second_master_probe_s: float = 0.5  # one connect there: a LAN answers in milliseconds, a wrong address never
    second_master_tell_s: float = 5.0  # connect, read node 0's record, the trust handshake, one join record
    verdict_grace_s: float = 5.0  # beyond T, for node 0's verdict to reach a node that joined late in node 0's window
    final_agreement_s: float = 15.0  # node 0 waits for every member to read the agreed exit code / outcome
    # --- the store's front on the master port (rendezvous/front.py, issue 36)
    front_stall_s: float = 3.0  # a client whose replies stay unread past the front's bound this long is closed
    front_idle_s: float = 30.0  # a connection that never spoke is closed after this (a real client speaks at once)
    front_tick_s: float = 0.25  # how often the front looks at the clock (stalls, idle connections)
    front_start_s: float = 10.0  # the front (a small Python, no torch) has this long to say it listens
    # --- trust without a token (rendezvous/trust.py)
    munge_s: float = 5.0  # one munge / unmunge call: munged answers in milliseconds; a stuck one is named
    munge_max_ttl_s: float = 3600.0  # munged's own default ceiling on a credential's time to live
    # --- an armed rank's evidence (training/arm.py: ncclcheck.arm, guard(postmortem_dir=))
    evidence_dump_s: float = 10.0  # one rank's flight recorder + stacks written: a third of the grace torchrun
    # (30 s) and Slurm's KillWait (30 s default) leave between SIGTERM and SIGKILL; past it the dump is given up, said
    # so in the stacks file, and the rank goes on (or dies) as it would have
    # --- the job runner (bench, links)
    rank_start_s: float = 60.0  # a spawned rank's start (a new Python, torch's import) before it joins; then T
    stall_grace_s: float = 2.0  # beyond a job step's bound (its collectives x T) before a silent world is hung
    kill_grace_s: float = 3.0  # SIGTERM -> SIGKILL for a rank that must be stopped
    reap_s: float = 1.0  # after SIGKILL, the kernel reaps a process in well under this
    collect_s: float = 10.0  # after the local ranks ended, for the results of ranks on other nodes
    standalone_collect_s: float = 0.5  # one node: every rank has ended, so its result is already in the store
    watch_poll_s: float = 0.25  # how often the agent looks at its ranks and the world's progress counter
    relay_poll_s: float = 0.1  # how often rank 0's progress is replayed onto the agent's terminal
    # --- links
    links_grace_s: float = 2.0  # a node whose partner saw its connection close gets this much longer
    links_heartbeat_s: float = 5.0  # a participant whose heartbeat has not moved for this long is dead
    links_beat_s: float = 0.5  # how often a participant bumps its heartbeat
    links_alive_check_s: float = 1.0  # a wait for the coordinator or a partner asks about its heartbeat this often
    links_poll_s: float = 0.02  # how often the coordinator looks for the round's reports (node 0's own store)
    links_round_slack_s: float = 5.0  # one round's bound beyond its transfers: the pair's process group set-up
    links_first_op_floor_s: float = 3.0  # after a direction's first transfer an op may take 20x as long, but at least
    # this; the first transfer of EACH direction is bounded afresh (links_transfer_s): a fast a -> b must not bound
    # a slow b -> a (issue 32: "Timed out waiting 3000ms for recv" on a 100 Mb/s link under --timeout 60)
    links_expect_factor: float = 4.0  # a transfer may take this many times its size at its expected bound: a link
    # at a quarter of its bound is slow and measured so, not timed out
    links_transfer_cap: float = 100.0  # a transfer bound read from the store is believed up to this many T (a peer
    # may be hostile: its number must not make a wait unbounded)
    links_op_factor: float = 20.0  # ... the "20x its first transfer" of the rule above
    links_direction_share: float = 0.25  # a direction stops timing early once it ran this share of its op bound
    links_direction_floor_s: float = 1.0  # ... but never sooner than this
    # Each direction is timed at least this long (--min-time): short transfers are repeated beyond --iters, since a
    # transfer of a few ms is at the mercy of the CPU scheduler and a median of 3 such is noise, not a link.
    links_min_time_s: float = 0.25
    links_min_time_max_s: float = 60.0  # --min-time's upper bound: a quarter of a 4-minute round per direction
    links_facts_wait_s: float = 10.0  # round 0 waits this long for every node's link facts (read in ~0.1 s)
    # --- --shared-dir (preflight/shared_dirs.py): its visibility wait is T (shared_dir_s). NFS may hide another
    # client's new file for its attribute-cache time (acdirmin 30 s by default), so the retries ride it out.
    shared_poll_s: float = 0.05  # first pause between two looks for another node's file or report
    # --- node 0's Lifeline (preflight/probe.py; srun, mpirun, env://): released once its store freed MASTER_PORT
    release_poll_s: float = 0.05  # node 0's pause between two looks whether its closed store freed the port
    lifeline_floor_s: float = 0.05  # a member's connect / read on the Lifeline never waits less than this
    shared_poll_max_s: float = 1.0  # the pause grows to this: a thousand nodes must not flood node 0's store
    shared_poll_growth: float = 1.5  # ... by this factor per look
    shared_grace_s: float = 5.0  # beyond T, for a node's report (or node 0's "done") to reach the store
    shared_io_s: float = 5.0  # one node's writes in one directory (probe file, throughput figure), at most
    # --- Slurm (health/, sweep/): Slurm kills a HealthCheckProgram after 60 s, so a health run (its checks, at most
    # health_max_timeout_s, plus two scontrol calls) fails with its own reason before that kill.
    scontrol_s: float = 8.0  # one scontrol call (show node, update)
    health_timeout_s: float = 20.0  # `health --timeout`'s default: the bound on its own checks (healthy: ~0.2 s)
    health_max_timeout_s: float = 40.0  # + 2 scontrol calls (16 s) stays under Slurm's 60 s kill
    # --- error counters, the fabric's and the GPUs' (facts/counters.py): read twice, at least this far apart, in one
    # window per run of health, preflight or env (their collection usually takes longer: then no wait at all). Long
    # enough for a link that errs tens of times a second to show it (DCGM fails NVLink CRC at 100/s). A counter is
    # judged on what changed in that window, never on its lifetime value; a longer window is --baseline's.
    counter_window_s: float = 0.5
    # --- a node's facts (preflight, env, guard): the whole collection is one wait, T, but never less than this (a
    # healthy node reads them in ~0.3-1 s, torch's import included, ~3 s on a loaded host); each local tool and NVML's
    # init within it has facts/util.py's own bound (5 s), and one that does not answer is named, never waited on
    facts_floor_s: float = 10.0

    # --- live (live/responder.py on each armed rank, live/watch.py in `ncclcheck watch`)
    live_request_s: float = 2.0  # a responder reads one request this long: a real watcher sends it at once
    live_send_s: float = 10.0  # a responder sends one reply this long (a flight recorder of a few MiB over a LAN)
    live_confirm_s: float = 2.0  # watch's second look at every rank's progress, this long after the first
    live_keep_s: float = 10.0  # a responder holds a connection whose request asked to keep it this long after its
    # reply, for the asker's next request: watch asks again live_confirm_s after a rank's first answer, once its
    # clocks are measured and the ranks before it asked
    live_outlast_s: float = 30.0  # ... and at most this long again, at ranks that did not move while their own gaps
    # between calls say they are not late yet (live/outlast.py: a collective of a job stepping every 4 s outlasts 2 s)
    live_register_s: float = 600.0  # a responder tries this long to register in the job's store: under env:// the
    # store is the script's own, bound by init_process_group after the responder started
    live_follow_poll_s: float = 5.0  # watch --follow: one look at every rank's progress this often
    live_reach_s: float = 3.0  # a stalled group: one responder reads its peers' records and connects to each (TCP);
    # a LAN connects in milliseconds and a loaded host within a second or two, a cut link never
    # A responder lives inside a training process (issue 45: a flood cut a pinned training loop's iterations ~60 %):
    live_share_window_s: float = 0.5  # its connection loop's CPU share is looked at over windows this long
    live_work_burst_s: float = 0.05  # CPU seconds its replies may take before their share applies: one reply is
    # always built when the bucket is not empty (a watcher's "all" of a 2,000-entry flight recorder: ~0.13 s), then
    # it refills at the share; meanwhile the last reply built is served (live/loop.py's Spend)
    live_send_cost_s: float = 0.005  # CPU seconds of the sending core per MiB a responder sends, beyond its own
    # thread's: on loopback the receiver's TCP runs there too, and each MiB copied evicts the training loop's cache (a
    # flood of 1 MiB replies cost the loop ~4 % more than the responder's threads' own CPU): counted in its share
    live_queue_s: float = 5.0  # a request not started this long after it was read is answered "busy"
    live_exit_s: float = 2.0  # a responder's process exits: its workers' calls into torch's flight recorder end first
    # (a daemon thread still inside C++ when the interpreter finalizes is unwound by pthread_exit: the rank aborted,
    # "terminate called without an active exception", when a watch's sampling met the job's end)
    live_answer_cache_s: float = 0.25  # one reply built serves every request of its kind this long (a flood of
    # "all" builds a few replies a second, not one each); well under live_confirm_s, so watch's second look is fresh
    live_stale_rebuild_s: float = 1.5  # a reply built longer ago is built again even past the responder's Spend, once
    # per this long at most: watch judges no recorder older than its pause between looks (live_confirm_s)
    live_park_s: float = 2.0  # watch: an ask whose reply has not begun this long after it started stops holding one
    # of the look's slots (it stays open within the bound and the descriptors): a real rank answers in ~0.1-0.2 s, a
    # loaded simulated one within ~1.3 s; 81 silent ranks of 4,096 held 81 of 128 slots for the whole bound and left
    # 366 ranks unread, the late one among them (scripts/bench_live.py --silent)
    live_retry_s: float = 0.05  # watch asks a responder that closed before answering (its slots busy) again after
    # this, growing to probe_retry_max_s, within the same bound
    live_munge_every_s: float = 0.5  # a responder decodes a new munge credential this often past its first few (an
    # unmunge is a process: ~5 ms of CPU; a watcher brings one per run)
    live_munge_ttl_s: float = 600.0  # watch's munge credential lives this long; --follow makes a new one at half of it
    live_rate_s: float = 2.0  # a slow job: one probe download (1 MiB) between two responders: ~10 ms on a LAN,
    # ~1 s on a link shaped to 1 MB/s; past it the rate of what arrived is the figure (live/pace.py)
    live_quiet_ask_s: float = 0.5  # after each probe download, its source is asked ("clock") how long since it last
    # turned a stranger away (live/pace.contended): a few ms on a LAN
    live_guarded_credit_s: float = 0.25  # a reach, rate or blob runs while its responder's Spend is at most this far
    # past empty (live/peers.py): one watcher's look (an "all" of 2,000 entries, ~0.13 s) must not keep its reach or
    # rate probe out for the 13 s the share takes to refill it; a flood of them still costs the share over time
    live_store_poll_s: float = 0.5  # no rank answers: watch reads the job's store this often to tell a job that ended
    # (its launcher closed the store) from one whose ranks stopped answering
    live_phase_every_s: float = 0.002  # a "phase" request samples the rank's progress counters this often (~5 us
    # each): a compute phase of a few ms between two collectives is seen
    live_follow_tick_s: float = 0.5  # --follow reads one rank's progress this often between its looks: the job's last
    # step is dated within it (a slowdown still on when the job ends ends there)
    live_phase_min_s: float = 0.2  # ... and at least this long, a fast job's window (live/straggle.phase_window: 20
    # of its steps): a request's own round trip and first sample are a few ms
    live_phase_max_s: float = 15.0  # seconds one "phase" request samples at most (watch asks for its pause between
    # two looks, or for three of the job's steps when they are longer: a step of up to 5 s measured at each place
    # twice; at 6 s the lab's 2 s job slowed to a 3.5-4.5 s step held one measure of each place, "too few"); a
    # request asking for more is refused as malformed
    live_asker_s: float = 30.0  # a responder remembers whether a connection's address is the rank it names this
    # long (a blob goes only to ranks of the job: live/peers.py): a probe's downloads cost one store read, not one each

    @classmethod
    def of(cls, config: Any) -> Budget:
        """The run's Budget from a config.Config: --timeout is the world's `timeout_s`, stored there once."""
        t = config.world.timeout_s
        return cls() if t is None else cls(timeout_s=float(t))

    # --- the named waits: T each
    @property
    def facts_s(self) -> float:
        return max(self.timeout_s, self.facts_floor_s)

    @property
    def master_probe_s(self) -> float:
        return self.timeout_s

    @property
    def join_s(self) -> float:
        return self.timeout_s

    @property
    def mesh_s(self) -> float:
        return self.timeout_s

    def shared_follower_s(self, deadline_s: float, ndirs: int) -> float:
        """--shared-dir: how long a node waits for node 0's `done` after its report: node 0's own look (deadline_s,
        its writes in every directory) and one grace more than node 0's, so a live node 0 is not taken for dead."""
        return deadline_s + self.shared_io_s * max(1, ndirs) + 2 * self.shared_grace_s

    @property
    def shared_dir_s(self) -> float:
        """--shared-dir: how long a node looks for another node's file (NFS attribute caches): T."""
        return self.timeout_s

    @property
    def collective_s(self) -> float:
        return self.timeout_s

    @property
    def live_fetch_s(self) -> float:
        """watch: the one bound on fetching every rank at once (T); a rank not answered by then is named."""
        return self.timeout_s

    @property
    def live_reach_wait_s(self) -> float:
        """watch's bound on every responder's "reach" answer: their own bound, their request read and reply send."""
        return self.live_reach_s + self.live_request_s + self.live_send_s

    def live_rate_wait_s(self, targets: int) -> float:
        """watch: one "rate" probe, every prober at once, each downloading from `targets` others one after another:
        its store read, the downloads, the request and the reply."""
        return (self.live_reach_s + max(1, targets) * (self.live_rate_s + self.live_quiet_ask_s) + self.live_request_s
                + self.live_send_s)

    @property
    def live_stall_s(self) -> float:
        """watch --follow: progress frozen this long (T) is a hang, and watch names its culprit."""
        return self.timeout_s

    # --- derived bounds
    def store_try_s(self, connect_s: float) -> float:
        """The timeout of one TCPStore connect try, so torch's two tries and its backoff fit in connect_s."""
        return max(self.socket_floor_s, connect_s / self.store_tries)

    def member_connect_s(self, end: float) -> float:
        """A member's store connect: what is left of its join bound (`end`), at least the floor."""
        return self.left(end, self.store_connect_floor_s)

    @property
    def verdict_wait_s(self) -> float:
        """A node that joined waits for node 0's verdict: node 0's join bound (T) plus the fixed grace."""
        return self.timeout_s + self.verdict_grace_s

    @property
    def verdict_notice_s(self) -> float:
        """A member waiting for node 0's verdict says so after this: node 0 listens join_grace_s for a duplicate
        once every node joined, so a healthy world's verdict comes that much later than other work's."""
        return self.join_grace_s + self.work_notice_s

    @property
    def munge_ttl_s(self) -> int:
        """How long node 0's munge credential stays decodable: a member may connect as late as node 0's join bound
        (T) after it, plus the verdict's grace; at least munge's 60 s, at most munged's ceiling."""
        return int(min(self.munge_max_ttl_s, max(60.0, self.timeout_s + self.verdict_grace_s + self.timeout_s)))

    @property
    def sealer_s(self) -> float:
        """Node 0 answers members' challenges at most this long (it stops sooner, when the run ends): a member's
        challenge comes before it reads the verdict, and every member reads the verdict, the result and the exit
        code within the join, mesh and result bounds and the final agreement."""
        return self.verdict_wait_s + self.mesh_s + self.final_agreement_s + self.timeout_s + self.final_agreement_s

    @property
    def rank_start_bound_s(self) -> float:
        """A spawned rank may take this long to start and join its process group."""
        return self.rank_start_s + self.timeout_s

    def result_deadline(self, mesh_end: float) -> float:
        """When a node stops waiting for node 0's cross-node result: node 0 collects rows until mesh_end, then
        decides (bounded by T), then publishes."""
        return mesh_end + self.final_agreement_s + self.timeout_s

    def stall_s(self, step_ops: int) -> float:
        """How long a world may go without emitting before it is hung: one job step's collectives, each bounded by
        T, plus a fixed grace."""
        return max(1, step_ops) * self.collective_s + self.stall_grace_s

    def links_op_s(self, override: Optional[float] = None) -> float:
        """One links pair operation's bound: T (or a payload's explicit value)."""
        return float(override) if override is not None else self.collective_s

    def links_direction_s(self, op_s: float) -> float:
        """Per direction, a very slow link stops being timed after this share of its op bound."""
        return max(self.links_direction_floor_s, op_s * self.links_direction_share)

    def links_round_s(self, op_s: float, direction_s: float) -> float:
        """Worst case for one round: pair setup, then each direction runs past its budget by one send+ack."""
        return 3 * op_s + 2 * direction_s + self.links_round_slack_s

    def links_first_wait_s(self, op_s: float) -> float:
        """A participant's wait for the first round's go: the coordinator's first op plus the slack."""
        return op_s + self.links_round_slack_s

    def links_next_wait_s(self, round_s: float, grace_s: float) -> float:
        """A participant's wait for the next round's go: one round, the grace, the slack."""
        return round_s + grace_s + self.links_round_slack_s

    def links_transfer_s(self, nbytes: int, bound_gbps: Optional[float], op_s: float) -> float:
        """A direction's first transfer (and the limit of its later ones): T, or `links_expect_factor` x the time
        its size takes at the direction's bound when that is longer (a large --size on a known-slow link is work, not
        a hang). An unknown bound: T."""
        if not bound_gbps or bound_gbps <= 0:
            return op_s
        return max(op_s, self.links_expect_factor * nbytes / (bound_gbps * 1e9))

    def links_transfer_cap_s(self, op_s: float) -> float:
        """The largest transfer bound a participant accepts from the coordinator's go message."""
        return op_s * self.links_transfer_cap

    def links_tightened_s(self, first_s: float, limit_s: float) -> float:
        """An op's bound after the first transfer: 20x its time, at least the floor, at most limit_s."""
        return min(limit_s, max(self.links_first_op_floor_s, self.links_op_factor * first_s))

    # --- the clock: deadlines are time.monotonic() values
    @staticmethod
    def now() -> float:
        return time.monotonic()

    def deadline(self, seconds: float, since: Optional[float] = None) -> float:
        """time.monotonic() by which a wait of `seconds`, begun at `since` (default: now), must end."""
        return (time.monotonic() if since is None else since) + seconds

    def left(self, end: float, floor: Optional[float] = None) -> float:
        """Seconds left before `end`, never below `floor` (default: the socket floor)."""
        return max(self.socket_floor_s if floor is None else floor, end - time.monotonic())

    @staticmethod
    def remaining(end: float) -> float:
        """Seconds left before `end`, 0 once it passed (a select() or sleep() bound)."""
        return max(0.0, end - time.monotonic())

    def pause(self, end: float, step_s: float) -> None:
        """Sleep step_s, or what is left before `end` if that is less (a poll's pause between two looks)."""
        time.sleep(min(step_s, self.remaining(end)))

    def watch_slice_s(self, nprocs: int) -> float:
        """How long the agent waits on each of its nprocs ranks per look, so one look takes watch_poll_s."""
        return self.watch_poll_s / max(1, nprocs)

    @staticmethod
    def passed(end: float) -> bool:
        return time.monotonic() >= end

    @staticmethod
    def since(start: float) -> float:
        """Seconds since `start` (a time.monotonic() value)."""
        return time.monotonic() - start

    @staticmethod
    def next_retry(interval_s: float, max_interval_s: float) -> float:
        """The pause after interval_s between two connect tries: growing by half, up to max_interval_s."""
        return min(max_interval_s, interval_s * 1.5)

    def within(self, start: float, seconds: float) -> bool:
        """Is it still less than `seconds` since `start`?"""
        return time.monotonic() - start < seconds


# The fixed bounds alone, for code that runs without a --timeout (unit tests, probes called on their own).
FIXED = Budget()
