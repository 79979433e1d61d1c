"""Measurement: run a candidate and its baseline in worker processes and time them honestly
(harness, worker, frame protocol, sessions, timing statistics, output checks, the program runner
kit evaluators call). It reads kits through formats and confines workers through confinement.
"""
