"""Scheduling: where and when an evaluation runs (here, or on a shared bench service).

It calls the evaluation room below it; nothing below imports it.
"""
