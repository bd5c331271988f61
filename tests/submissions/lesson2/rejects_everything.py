"""Degenerate: rejects every request, so it never promises anything."""
from reference.shapes import Admission


def admit(request, ledger):
    return Admission("reject", 0, "closed")
