"""One publish / adopt / acknowledge: the decider publishes a value, every member adopts it and says so, and the
decider keeps the store up (bounded) until every member has read it. Used for the exit code and for any decision
(a job's outcome, preflight's verdict).

Adopting is never trusting: the exit code a member leaves with is max(its own, the agreed one), and only the exit
codes ncclcheck uses count, so what a stranger writes into the store can make a run fail, never pass.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from .budget import Budget
from .store import JsonStore

EXIT_CODES = (0, 1, 2, 3, 130)


def publish(st: JsonStore, key: str, value: Any) -> None:
    st.set(key, value)


def adopt(st: JsonStore, key: str, deadline: float, budget: Budget,
          check: Optional[Callable[[Any], Optional[str]]] = None) -> Any:
    """The decider's value once it exists (None at the deadline, or when it is bad), acknowledged."""
    v = st.wait_get(key, deadline, budget, check)
    acknowledge(st, key)
    return v


def acknowledge(st: JsonStore, key: str) -> None:
    """Say this member has read `key`: one ack record each, so the decider can block on them instead of polling."""
    i = st.add(f"{key}/acks", 1)
    st.set(f"{key}/ack/{i}", True)


def await_acks(st: JsonStore, key: str, members: int, deadline: float, budget: Budget) -> bool:
    """The decider: block (bounded) until `members` members acknowledged `key`."""
    if members <= 0:
        return True
    return st.wait([f"{key}/ack/{i}" for i in range(1, members + 1)], deadline, budget)


def _exit_record(v: Any) -> Optional[str]:
    if not isinstance(v, dict) or type(v.get("exit_code")) is not int or v["exit_code"] not in EXIT_CODES:
        return f"not an exit code of ncclcheck's ({', '.join(map(str, EXIT_CODES))})"
    return None


def exit_code(st: JsonStore, key: str, own: int, decider: bool, members: int, budget: Budget,
              outlast: bool = False) -> int:
    """Every process of a formed world leaves with one code: the decider publishes its own and waits (bounded)
    for every other member to read it; a member leaves with max(its own, the agreed one).

    The decider then says it is done with the store (`key/closing`); a member with `outlast` waits (bounded) for
    that before it leaves: one whose next step connects a new client to the same port (the training script's env://
    init after ncclcheck.guard) must not reach the decider's store while it still waits for the others' acks."""
    end = budget.deadline(budget.final_agreement_s)
    if decider:
        publish(st, key, {"exit_code": own})
        await_acks(st, key, members - 1, end, budget)
        publish(st, f"{key}/closing", True)
        return own
    v = adopt(st, key, end, budget, _exit_record)
    if outlast:
        st.wait([f"{key}/closing"], end, budget)
    return max(own, v["exit_code"]) if isinstance(v, dict) else own

