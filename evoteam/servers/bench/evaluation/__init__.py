"""Evaluation: evaluate one candidate here and record it in the knowledge store; list and
describe kits; compare two candidates. Built on measurement, formats and confinement below it.
"""
