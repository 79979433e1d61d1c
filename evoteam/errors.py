"""Errors shared by every part of evoteam. Kept free of heavy imports: hooks load it."""


class DomainError(Exception):
    """An anticipated failure in a server's core; its text is shown to the agent as is."""


class Missing(DomainError):
    """What the caller named does not exist (a kit, a candidate file): `evoteam` exits 3."""


def first_leaf(exc: BaseException) -> BaseException:
    """The first plain exception inside (possibly nested) exception groups: anyio-based
    clients wrap transport errors in groups, and a user needs the cause, not the wrapper."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc
