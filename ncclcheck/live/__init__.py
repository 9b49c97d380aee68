"""While a job runs or hangs: each armed rank's responder (responder.py), the protocol (wire.py) and `ncclcheck watch`
(watch.py), which names a hang's culprit from what the ranks say live (docs/live.md)."""
