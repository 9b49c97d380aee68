"""What a job's text says of where the job got to, beside what failed (nccl/failures.py): the lines that show a job
ENDED well (each from the program that prints it), the phase each line shows a rank reached (launched, rendezvous,
NCCL init, init complete, steps, teardown), and whether a line comes from torch, NCCL, gloo, CUDA, a launcher or a
scheduler at all (a text with none is not a job's log: a pip log mentions torch and NCCL only as package names).

A text earns "nothing wrong" only with an end sign and no failure: a log that stops with neither says where each
rank was when it stops (a hang there, or a paste cut short). Pure data: patterns run on one line at a time, linear
(nccl/linear.py), each holding a literal the log reader's prefilter finds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from .linear import Either, Prefilter, Then, fold

# -- phases, in the order a job goes through them (a rank's phase is the latest one its lines show) -----------------
LAUNCHED, RENDEZVOUS, NCCL_INIT, INIT_COMPLETE, STEPS, TEARDOWN = range(6)
PHASE_IDS = ("launched", "rendezvous", "nccl_init", "init_complete", "steps", "teardown")
PHASE_NAMES = ("launched", "rendezvous", "NCCL init", "init complete", "steps", "teardown")


@dataclass(frozen=True)
class Sign:
    id: str
    pattern: object
    phase: int
    what: str  # what the line shows, for a person ("torchrun's agent: the worker group finished")
    end: bool = False  # the job (or this rank) ended well: nothing after it is needed for "nothing wrong"


def _rx(text: str) -> re.Pattern:
    return re.compile(text)


# Each row: the program's own words (the source that prints them in a comment). An end sign is a success only: a
# results line printed on failure too ("# Avg bus bandwidth" after wrong values) is an end only with its OK line.
SIGNS = (
    # torch/distributed/elastic/agent/server/api.py: "[%s] worker group successfully finished. Waiting %s seconds for
    # other agents to finish." and the exit barrier's "Done waiting for other agents. Elapsed: %s seconds"
    # torchelastic's event records (events/__init__.py: {"name": "torchelastic.worker.status.SUCCEEDED", ...})
    Sign("torchrun_succeeded", _rx(r"worker group successfully finished|Done waiting for other agents|"
                                   r"WorkerState\.SUCCEEDED|torchelastic\.worker\.status\.SUCCEEDED"), TEARDOWN,
         "torchrun's agent: the worker group finished",
         end=True),
    # nccl-tests' common.cu: "# Out of bounds values : %d %s" (OK when 0) closes a run
    Sign("nccl_tests_ok", _rx(r"Out of bounds values : 0 OK"), TEARDOWN, "nccl-tests: its run ended, no wrong value",
         end=True),
    # DeepSpeed's launcher/launch.py: "Process %d exits successfully."
    Sign("deepspeed_ok", _rx(r"Process \d{1,10} exits successfully"), TEARDOWN, "DeepSpeed's launcher: a rank exited 0",
         end=True),
    # Lightning's fit loop: "`Trainer.fit` stopped: `max_epochs=%d` reached." (max_steps, max_time alike)
    Sign("lightning_done", _rx(r"`Trainer\.fit` stopped: `max_\w{1,8}=[^`\n]{1,40}` reached"), TEARDOWN,
         "Lightning: Trainer.fit reached its end", end=True),
    # transformers' Trainer: "Training completed. Do not forget to share your model on huggingface.co/models =)"
    Sign("hf_trainer_done", _rx(r"Training completed\. Do not forget to share your model"), TEARDOWN,
         "the Hugging Face Trainer: training completed", end=True),
    # Ray Train (2.x): "Training completed after %d iterations at %s. Total running time: %s"
    Sign("ray_done", _rx(r"Training completed after \d{1,10} iterations|Training finished iteration \d{1,10} at"),
         TEARDOWN, "Ray Train: training completed", end=True),
    # uvicorn (vLLM's and SGLang's HTTP servers): "Application startup complete."; SGLang: "The server is fired up and
    # ready to roll!": a server that came up has passed every collective set-up it needs
    Sign("server_up", _rx(r"Application startup complete\.|The server is fired up and ready to roll"), TEARDOWN,
         "the server came up and serves", end=True),
    # the job's own last words, as training scripts print them ("training done", "Training finished.", "Done!"): the
    # weakest end (WORDS_ONLY), never one a failure line before it is survived by
    Sign("done", Either(_rx(r"\b(?i:training|train|job|run|benchmark|fine-tuning|finetuning|test)\s{1,3}(?i:is\s)?"
                            r"(?i:done|finished|complete|completed)\b"
                            r"(?![^\n]{0,40}\b(?i:errors?|fail|failed|failure|aborted|cancell?ed|killed|timeout|"
                            r"timed out|exception)\b)"),
                        # a rank's own "rank 0 done"; a bare "Done!" is any step's (torchvision's download prints it)
                        _rx(r"^\s{0,8}\[?(?i:rank)\s?\d{1,7}\]?:?\s{1,3}(?i:all done|done|finished)[.!]{0,3}\s{0,8}$"),
                        _rx(r"\b(?i:finished|completed)\s{1,3}(?i:training|fine-tuning|finetuning)\b"),
                        _rx(r"destroy_process_group\(\)\s{0,3}(?i:done|finished|complete|returned)")), TEARDOWN,
         "the job's own last words", end=True),
    # a bare "done" / "Done!": a rank's own last words only on a line its launcher prefixed ("0: done"); unprefixed,
    # any step prints it (torchvision's dataset download: "Processing... Done!")
    Sign(RANK_ONLY := "rank_done", _rx(r"^\s{0,8}(?i:all done|done|finished)[.!]{0,3}\s{0,8}$"), TEARDOWN,
         "a rank's own last words", end=True),
    # a process's own exit status, as shells, IDEs, launchers and schedulers print it
    Sign("exit_zero", Either(_rx(r"(?i:exit(?:ed)?(?: with)? (?:code|status)|exitcode|return code|exit_code)"
                                 r"\s{0,2}[:=]?\s{0,2}0(?![\d.])(?!\s{0,2}\((?:pid|local_rank))"),
                             _rx(r"Process finished with exit code 0\b")), TEARDOWN,
         "the launcher reports exit code 0", end=True),
    # torch's ProcessGroupNCCL destructor at exit: "WARNING: process group has NOT been destroyed before we destruct
    # ProcessGroupNCCL" (torch 2.4+): printed by a process that reached its normal exit
    Sign("pg_not_destroyed", _rx(r"process group has NOT been destroyed before"), TEARDOWN,
         "torch: a process reached its exit (its process group not destroyed first)", end=True),
    # NCCL's comm teardown: "comm %p rank %d nranks %d cudaDev %d busId %lx - Destroy COMPLETE"
    Sign("nccl_destroyed", _rx(r"- Destroy COMPLETE|destroy_process_group"), TEARDOWN,
         "a communicator was destroyed"),
    # a training loop's own lines: a step with its loss, a tqdm bar's rate, nccl-tests' rows are read apart
    Sign("step", Either(Then(r"\b(?i:step|iter|iteration|epoch)\b", r"\b(?i:loss)\b"),
                        _rx(r"\b(?i:loss)\s{0,2}[=:]\s{0,2}-?\d"), _rx(r"\d(?:it/s|s/it)\]"),
                        _rx(r"\b(?i:step|iter|iteration)\s{0,2}#?\d{1,9}\b")), STEPS,
         "a training step"),
    # NCCL's "rank %d nranks %d ... Init COMPLETE"; torch's store barrier; Lightning's "All distributed processes
    # registered. Starting with %d processes"
    Sign("init_complete", _rx(r"Init COMPLETE|Completed store-based barrier for key|"
                              r"All distributed processes registered"), INIT_COMPLETE, "init complete"),
    # NCCL's first lines of a communicator; torch's ProcessGroupNCCL options
    Sign("nccl_init", _rx(r"NCCL version \d|NCCL INFO Bootstrap|ProcessGroupNCCL initialization options|"
                          r"NCCL INFO comm 0x"), NCCL_INIT, "NCCL init"),
    # torch's rendezvous and store; Lightning's "Initializing distributed: GLOBAL_RANK: %d, MEMBER: %d/%d" (1.x's
    # DDP plugin: "initializing ddp: GLOBAL_RANK: ...")
    Sign("rendezvous", _rx(r"Rendezvous'ing worker group|rendezvous|Waiting in store based barrier|"
                           r"Added key: store_based_barrier_key|(?i:initializing (?:distributed|ddp)): GLOBAL_RANK"),
         RENDEZVOUS,
         "rendezvous"),
)
BY_ID = {s.id: s for s in SIGNS}
STEP = BY_ID["step"]
WORDS_ONLY = ("done", RANK_ONLY)  # the signs whose words any program (or person) may print
_PREFILTER = Prefilter([s.pattern for s in SIGNS])
LITERALS = tuple(sorted(set(_PREFILTER.literals)))
# a training loop prints a step line thousands of times: once a source is past its first, only the other signs matter
STEP_LITERALS = tuple(sorted(set(Prefilter([STEP.pattern]).literals)))
OTHER_LITERALS = tuple(sorted(set(Prefilter([x.pattern for x in SIGNS if x is not STEP]).literals)))


def sign(line: str, steps: bool = True) -> Optional[Sign]:
    """The first sign the line shows (an end before a phase), or None. steps=False: not a training step's."""
    low = fold(line)
    for i in _PREFILTER.candidates(line, low):
        if (steps or SIGNS[i] is not STEP) and SIGNS[i].pattern.search(line):
            return SIGNS[i]
    return None


# -- a line from a program a job's log is made of, in that program's own shape -------------------------------------
# Not a package name in an installer's log ("torch-2.3.0-cp310...whl", "nvidia-nccl-cu12"), not a Java heap error:
# NCCL's header or its words, torch's rank prefix, module paths and C++ sources, gloo's, CUDA's error strings, the
# launchers' and the schedulers' own lines.
PROGRAM = Either(
    _rx(r"\bNCCL (?:INFO|WARN|version|error)\b|\bnccl(?:Unhandled|System|Internal|Invalid|Remote)\w{0,20}Error"),
    # (a Windows traceback's paths hold "\\": site-packages\\torch\\distributed)
    _rx(r"\[rank\d{1,7}\]:|torch\.distributed|torch[/\\]distributed|torch[/\\]csrc|ProcessGroup(?:NCCL|Gloo|MPI)|\bc10d\b|"
        r"site-packages[/\\]torch[/\\]|dist-packages[/\\]torch[/\\]|torch\.(?:cuda\.)?OutOfMemoryError|\bc10::|torch\._C\b|"
        r"torch\.multiprocessing|torchrun\b|\bDistBackendError|\bDistNetworkError|ChildFailedError"),
    _rx(r"\bgloo::|third_party/gloo|\[Gloo\]|Gloo connectFullMesh"),
    _rx(r"\bCUDA (?:error|out of memory|driver|runtime|kernel errors)|\bcuda(?:Error|Malloc)\w{0,40}|"
        r"CUBLAS_STATUS_|CUDNN_STATUS_|\bNVRM: Xid\b|\bnvidia-smi\b|NVIDIA-SMI"),
    # Open MPI's signal handler (opal/util/stacktrace.c: "[%s:%05d] *** Process received signal ***")
    _rx(r"^srun: |\bslurmstepd\b|\bsbatch: |\bsalloc: |\bmpirun\b|\bprterun\b|\bORTE\b|\bPMIx?\b|\bpdsh@|"
        r"\*\*\* Process received signal \*\*\*|"
        r"\[launch\.py:\d|deepspeed\b|DeepSpeed|\baccelerate\b|\bRayTrainWorker\b|\bray\.exceptions\b|"
        r"\(raylet\)|\bTrainer\.fit\b|\blightning\b|\bLightning\b|\bkubelet\b|torch_xla|\bhorovod\b|"
        # torchrun's own warning; Lightning's and Fabric's set-up lines (the Trainer's "GPU available: %s, used: %s",
        # 2.x adding the accelerator: "GPU available: True (cuda), used: True"); the RDMA stack's libraries
        r"Setting OMP_NUM_THREADS environment variable for each process|"
        r"(?i:initializing (?:distributed|ddp)): GLOBAL_RANK|^GPU available: (?:True|False)(?: \(\w{1,8}\))?, used:|"
        r"All distributed processes registered|\bdistributed_backend=|^libibverbs: |^mlx5: |\bNVSHMEM\b"),
    _rx(r"Traceback \(most recent call last\)"),
    # nccl-tests' own output (common.cu: "# nThread %d nGpus %d ...", "#  Rank %2d Group %2d Pid %6d on %10s device",
    # NCCL 1.x's "Rank %d uses device", the table's algbw/busbw header, its closing lines); a script announcing its
    # distributed backend ("Using distributed PyTorch with nccl backend", "backend=nccl")
    _rx(r"^# nThread \d|^#?\s{0,8}Rank\s{1,4}\d{1,7} (?:Group|Pid|uses device)|"
        r"\balgbw\s{1,8}busbw\b|^#?\s{0,4}Avg bus bandwidth|^#?\s{0,4}Out of bounds values|"
        r"\btorchelastic\.(?:worker|agent)\.status\.|\b(?:NCCL|nccl|Gloo|gloo) backend\b|"
        r"\bbackend[=: ]{1,3}['\"]?(?:nccl|gloo)\b"),
)
_PROGRAM_FILTER = Prefilter([PROGRAM])


def from_a_program(line: str) -> bool:
    """Does the line come from torch, NCCL, gloo, CUDA, a launcher, a scheduler (or a Python traceback)?"""
    low = fold(line)
    return bool(_PROGRAM_FILTER.candidates(line, low)) and PROGRAM.search(line) is not None
