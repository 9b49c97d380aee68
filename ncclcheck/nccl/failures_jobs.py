"""What launchers, schedulers and the kernel print when they end a job's process, as rows of the failure table
(nccl/failclass.py): torchrun's agent (torch/distributed/elastic/multiprocessing/api.py: "failed (exitcode: %d)
local_rank: %d (pid: %d) of binary: %s", its death-signal handling), DeepSpeed's launcher (launcher/launch.py:
"exits with return code = %d"), accelerate (subprocess.CalledProcessError "died with <Signals.SIGKILL: 9>"), Slurm's
slurmstepd and srun, the kernel's OOM killer, Kubernetes' container states, Ray's worker deaths.

An exit code is a signal when negative (Python's subprocess: -9) or above 128 (a shell's, Kubernetes': 137 = 128 + 9).
SIGKILL with no error of the rank's own is most often the host's out-of-memory killer; SIGSEGV / SIGBUS a crash in
native code. The launcher's own stop (its SIGTERM to the survivors) is a consequence.
"""

from __future__ import annotations

from .failclass import CONSEQUENCE, GENERIC, SPECIFIC, cause, consequence, num, rx

ROWS = (
    # the OOM killer said by name: slurmstepd ("Detected %lu oom-kill event(s) in %ps. Some of your processes may
    # have been killed by the cgroup out-of-memory handler."), the kernel, Kubernetes, Ray's memory monitor
    # Slurm < 23.02 "Detected %u oom-kill event(s) in %s", 23.02+ "Detected %u oom_kill event in StepId=%s"; srun's
    # own "task %d: Out Of Memory"
    # ENOSPC with no path of shared memory on the line (Python's "OSError: [Errno 28] No space left on device", a
    # write's strerror): some filesystem is full, the line does not say which
    cause("no_space", rx(r"No space left on device|Errno " + num("28") + r"\b|ENOSPC"),
          "a write failed because a filesystem is full (ENOSPC); the line does not say which: in a container most "
          "often /dev/shm (64 MB by default: the DataLoader's workers, NCCL's SHM transport), else the disk a "
          "checkpoint, a cache or /tmp is written to",
          "`df -h /dev/shm /tmp .` where it failed (inside the container); /dev/shm: docker --shm-size=1g or "
          "--ipc=host (Kubernetes: an emptyDir of medium Memory); a disk: free it or write elsewhere",
          source="the kernel (ENOSPC); Python's OSError"),
    cause("oom_killed", rx(r"Detected \d{1,9} oom[-_]kill event|Out of memory: Killed process|"
                           r"Memory cgroup out of memory|tasks? [\d,\-]{1,64}: Out Of Memory|"
                           r"oom-kill:|OOMKilled|killed by the cgroup out-of-memory handler|"
                           r"node running low on memory|possibly killed by the OOM killer|"
                           r"killed due to memory pressure \(OOM\)|The node was low on resource: memory|"
                           r"Killed process \d{1,10} \(\S{1,64}\) total-vm"),
          "the out-of-memory killer killed a process (host memory of the job or its cgroup, not GPU memory; the "
          "kernel's, the cgroup's, Ray's memory monitor or the kubelet's eviction)",
          "give the job more host memory (--mem, the container's limit) or use less: fewer data-loader workers, "
          "smaller pinned buffers, a model loaded once per node; `dmesg -T | grep -i oom` on the host names the "
          "process", level=SPECIFIC, source="slurmstepd; the kernel's oom_kill.c; kubelet; ray memory monitor"),
    # SIGKILL as an exit code, the process's own end with no error of its own: the OOM killer first, else an operator
    # or the scheduler (torchrun's own SIGKILL past its grace is its stop, read from its "forcefully exiting" line)
    # bash's report of a child a signal ended: "%s: line %d: " then the job's "%5ld %-22s %s" (pid, strsignal, command)
    cause("killed", rx(r"\(exitcode: -" + num("9") + r"\)|(?:exit|exited with(?: error)?)[ _]code:? " + num("137")
                       + r"|line \d{1,9}:\s{1,12}\d{1,10} Killed\s{1,40}\S|exits with return code = -"
                       + num("9") + r"|died with <Signals\.SIGKILL: " + num("9") + r">|signal " + num("9")
                       + r" \(Killed\)|Signals\.SIGKILL|is killed by signal: Killed|return code -" + num("9")
                       + r"|exited on signal " + num("9") + r"|task \d{1,7}: Killed|"
                       # torch.multiprocessing.spawn's ProcessExitedException: "process %d terminated with signal %s"
                       r"terminated with signal SIGKILL\b|Killed\s{1,8}(?:python|torchrun|\S{0,200}\.py)"),
          "a process was killed by SIGKILL with no error of its own: most often the host's out-of-memory killer (or "
          "an operator, the scheduler, a watchdog of the cluster)",
          "on its host `dmesg -T | grep -i -e oom -e killed` (the OOM killer names the process), the scheduler's log "
          "(preemption, time limit); if it is memory: fewer data-loader workers, smaller buffers, more --mem",
          source="torchrun agent; DeepSpeed launch.py; accelerate; srun; Kubernetes"),
    # C++'s std::terminate with no exception in flight ("terminate called without an active exception"): a thread
    # still running as the process exits, the teardown of some torch/gloo builds (seen on torch 2.13 CPU, about 1 run
    # in 8 of a healthy gloo job, and after a rank's own sys.exit): what made it exit, if anything, is the cause
    consequence("shutdown_crash", rx(r"terminate called without an active exception"),
                "a process aborted as it exited (std::terminate with no exception in flight: a thread still running "
                "at exit)",
                "what made it exit is the cause; if its work had finished (its last lines), the results stand",
                level=SPECIFIC, source="libstdc++ std::terminate"),
    # glibc's malloc_printerr ("free(): corrupted unsorted chunks", "double free or corruption (out)", "malloc():
    # corrupted top size", "corrupted size vs. prev_size"; before 2.26 inside "*** Error in `python': ... ***"), then
    # abort(); Open MPI's handler reports it ("[host:pid] Signal: Aborted (6)"): a native library wrote past its memory,
    # which one the text does not say (NVIDIA/nccl#1611: an NCCL too old for the GPU)
    consequence("native_abort", rx(r"\b(?:free|malloc|realloc|munmap_chunk|malloc_consolidate|_int_free|_int_malloc)"
                                   r"\(\): (?:corrupted|invalid|unaligned)|double free or corruption|"
                                   r"corrupted size vs\. prev_size|\] Signal: Aborted \(" + num("6") + r"\)"),
                "a process aborted in native code (glibc found its heap corrupted, or abort() was called): a native "
                "library (NCCL, CUDA, an extension) went wrong; the text does not say which",
                "get its native stack: rerun with `python -X faulthandler` and `ulimit -c unlimited` (a core), or "
                "under `gdb -ex run --args`; check that the NCCL, CUDA and driver versions support this GPU "
                "(`ncclcheck preflight` compares them across nodes)", level=GENERIC,
                source="glibc malloc_printerr; Open MPI opal stacktrace"),
    cause("segfault", rx(r"Segmentation fault|SIGSEGV|\(exitcode: -" + num("11") + r"\)|exit code:? " + num("139")
                         + r"|exits with return code = -" + num("11") + r"|died with <Signals\.SIGSEGV: " + num("11")
                         + r">|signal " + num("11") + r"|Fatal Python error: (?:Segmentation fault|Bus error|Aborted)|"
                         r"SIGBUS|Bus error"),
          "a process crashed in native code (SIGSEGV/SIGBUS: a fault in a C/C++/CUDA library or an extension)",
          "get the native stack: rerun with `python -X faulthandler` (or TORCH_SHOW_CPP_STACKTRACES=1) and "
          "`ulimit -c unlimited` for a core; check library versions across nodes (`ncclcheck preflight` compares "
          "packages); a DataLoader's bus error is /dev/shm", source="the kernel's signals; launchers' exit codes"),
    # slurmstepd's "*** %s ON %s CANCELLED AT %s DUE TO TIME LIMIT ***" (also PREEMPTION, NODE FAILURE, JOB REQUEUE);
    # a JOB cancelled with no reason is scancel's; a STEP with none is srun ending it after a task failed (below)
    # srun names the node Slurm lost ("srun: error: Node failure on %s"); slurmstepd's "DUE TO NODE FAILURE" names
    # only the node it runs on
    cause("node_failure", rx(r"Node failure on \S{1,64}"),
          "Slurm lost a node of the job (the node stopped answering its controller: a crash, a reboot, its network)",
          "`sinfo -R` and `scontrol show node NAME` say why (slurmctld's log too); drain the node and check its "
          "console and kernel log (`ncclcheck health` on it before it rejoins)", level=SPECIFIC, source="srun"),
    cause("scheduler_cancelled", rx(r"CANCELLED AT \S{1,40} DUE TO|DUE TO TIME LIMIT|DUE TO PREEMPTION|"
                                    r"DUE TO NODE FAILURE|"
                                    r"\*\*\* JOB \S{1,64} ON \S{1,255} CANCELLED AT \S{1,40} \*\*\*"),
          "the scheduler ended the job (its time limit, a preemption, a node failure, a requeue or scancel: the line "
          "says which)",
          "a time limit: raise --time or checkpoint more often; a preemption or requeue: run in a partition or QOS "
          "that is not preempted; a node failure: `sinfo -R` names the node, drain it", source="slurmstepd"),
    # the signal torchrun's agent itself received says who stopped the job (torch/distributed/elastic/multiprocessing/
    # api.py: SignalException "Process %d got signal: %d"; agent/server/api.py "Received %s death signal, shutting
    # down workers", the signal as a number or as Signals.SIGHUP): SIGHUP is the terminal or ssh session that started
    # it going away (nohup without setsid, a closed laptop); SIGTERM a scheduler (time limit, preemption, scancel) or
    # an operator (kill, kubectl delete); SIGINT Ctrl-C (the interrupted row)
    # torchrun's agent passes the signal it received on to its workers ("Sending process %s closing signal %s"): SIGHUP
    # there is the one it got
    cause("hangup", rx(r"got signal: " + num("1") + r"(?!\d)|Received " + num("1") + r" death signal|"
                       r"Received Signals\.SIGHUP death signal|signal=Signals\.SIGHUP|SIGHUP received|"
                       r"closing signal SIGHUP\b"),
          "the launcher was sent SIGHUP: the terminal or ssh session that started it went away, and the job went "
          "with it (nothing failed in the job itself)",
          "run the launcher where a closed terminal cannot stop it: tmux or screen, `sbatch`, or `setsid nohup ... &` "
          "(plain nohup is not enough when the shell sends SIGHUP to its job group)", level=SPECIFIC,
          source="torch/distributed/elastic/multiprocessing/api.py _terminate_process_handler"),
    consequence("stopped_from_outside", rx(r"got signal: " + num("15") + r"(?!\d)|Received " + num("15")
                                           + r" death signal|Received Signals\.SIGTERM death signal|"
                                           r"signal=Signals\.SIGTERM|Main process received SIGTERM"),
                "the launcher itself was sent SIGTERM: a scheduler (a time limit, a preemption, scancel) or an "
                "operator (kill, kubectl delete) stopped the job",
                "ask who sent it: `sacct -j JOB -o JobID,State,ExitCode,Elapsed,Timelimit` (TIMEOUT, PREEMPTED, "
                "CANCELLED by a user id), the pod's events (`kubectl describe pod`); if the job was hung when it was "
                "stopped, its last lines say where", level=SPECIFIC,
                source="torch/distributed/elastic; DeepSpeed's launcher"),
    # torchrun's agent told to stop ("Received %s death signal, shutting down workers", SignalException "Process %d
    # got signal: %d"), which reaches a rank's children too (the DataLoader's "killed by signal: Terminated");
    # DeepSpeed's "Main process received SIGTERM"; srun's job-step abort after another task failed
    consequence("launcher_stopped", rx(r"Received \d{1,3} death signal, shutting down workers|"
                                       r"Received Signals\.SIG\w{2,8} death signal|"
                                       r"SignalException: Process \d{1,10} got signal: \d{1,3}|"
                                       r"is killed by signal: Terminated|Main process received SIGTERM|"
                                       r"Job step aborted: Waiting up to|Sending process \d{1,10} closing signal|"
                                       r"\*\*\* STEP \S{1,64} ON \S{1,255} CANCELLED AT \S{1,40} \*\*\*|"
                                       r"tasks? [\d,\-]{1,64}: Terminated|\(exitcode: -"
                                       + num("15") + r"\)"),
                "the launcher stopped its workers (after a failure elsewhere, or told to stop by the scheduler or an "
                "operator)",
                "find what happened before: the first rank that failed (the launcher's first observed failure), a hang "
                "(NCCL's watchdog lines) or a time limit (the scheduler's log names who sent the signal)",
                source="torch/distributed/elastic; DeepSpeed; srun"),
    # Ray's worker death, with its list of what it may have been ("There are some potential root causes. (1) The
    # process is killed by SIGKILL by OOM killer ... (3) The worker is crashed unexpectedly due to SIGSEGV"):
    # possibilities, never evidence of one
    consequence("worker_died", rx(r"A worker died or was killed while executing a task|"
                                  r"Worker unexpectedly exits with a connection error code|"
                                  r"There are some potential root causes"),
                "a Ray worker process died; Ray lists what it may have been (the out-of-memory killer, a crash), this "
                "text does not say which",
                "`ray logs` of the dead worker (raylet.out, worker-*.err on its node) and `dmesg -T | grep -i -e oom "
                "-e segfault` on that node name it", level=SPECIFIC, source="ray/_private/worker.py; raylet"),
    # a process that ended badly and said nothing more here: torchrun's one-line report of a worker, DeepSpeed's,
    # accelerate's, srun's, mpirun's, a container's exit
    consequence("rank_failed", rx(r"failed \(exitcode: -?\d{1,4}\) local_rank: \d{1,7} \(pid: \d{1,10}\)|"
                                  r"exits with return code = -?\d{1,4}|returned non-zero exit status \d{1,4}|"
                                  r"Exited with exit code \d{1,4}|exited with non-zero status|"
                                  r"process returned a non-zero exit code|"
                                  r"BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES|"
                                  r"The actor died unexpectedly|worker process has died|RayTaskError|"
                                  r"Worker exit type: \w{1,32}|TrainingFailedError|WorkerGroupError|"
                                  # Ray Tune's summary of a failed trial (ray/tune: TuneError("Trials did not
                                  # complete", ...), "Trial %s errored after %d iterations"): its error file says why
                                  r"Trials did not complete|Trial \S{1,200} errored after \d{1,10} iterations|"
                                  r"Number of errored trials: [1-9]"),
                "a rank's process ended with an error (the launcher's report: it says that, not why)",
                "read that rank's own output before it ended (torchrun --redirects 3 --log-dir DIR keeps each rank's "
                "apart); arm the next run so it leaves what names the cause: ncclcheck recommend --postmortem DIR "
                "--format env", level=GENERIC, source="torchrun agent; DeepSpeed; accelerate; srun; mpirun; Ray"),
)

ROUTINE: tuple = ()

__all__ = ["ROWS", "ROUTINE", "CONSEQUENCE", "SPECIFIC"]
