"""The worker: ``simulate(model, worker, policy, requests)`` runs a workload to its end.

See reference/worker/engine.py for the loop and the map of the modules it is made of.
"""
from reference.worker.decisions import PolicyError
from reference.worker.engine import simulate

__all__ = ["PolicyError", "simulate"]
