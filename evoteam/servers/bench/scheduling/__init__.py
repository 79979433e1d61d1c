"""The bench's scheduling room: which device, which host, in what order.

Everything here decides *where and when* one evaluation runs; nothing here measures. Measuring is
``core.evaluate_candidate(..., store=None)`` run by the slot runner (slot.py) in its own process,
on this host (pool.py) or on a Ray node (ray_backend.py); the caller records the Evaluation it gets
back (dispatch.py), so a worker never holds the store's credentials. Imports go down only: this
room uses the bench's core; the core never imports this room.
"""
