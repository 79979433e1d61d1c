"""Confinement: what holds a worker in (jail: identities, cgroups and the stop; seccomp; the
Landlock sandbox and audit hook; tree limits; the worker's environment; the code watch). It
imports nothing of the bench above it.
"""
