"""Errors shared by every part of evoteam. Kept free of heavy imports: hooks load it."""


class DomainError(Exception):
    """An anticipated failure in a server's core; its text is shown to the agent as is."""
