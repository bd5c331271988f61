"""Oracles that compute a lesson's answer (instructor side: left out of the learner edition).

A lesson's judges ask these through grader.engine.oracle.figures, so in the learner edition
the answers to the public cases come from the record and the code that computes any
answer does not ship.
"""
