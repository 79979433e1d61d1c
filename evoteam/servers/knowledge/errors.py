"""Store errors. Their text is shown to agents as tool errors, so each says what to do."""


class StoreError(Exception):
    """Base class: a request the store refused, with a message meant for the caller."""


class NotFound(StoreError):
    pass


class Invalid(StoreError):
    pass


class Forbidden(StoreError):
    pass


class TooLarge(StoreError):
    pass


class Unavailable(StoreError):
    """The shared knowledge server could not be reached."""


class StoreFailure(StoreError):
    """The store file itself failed: read-only, damaged, locked, or its disk is full."""
