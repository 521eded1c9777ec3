"""The one exception type for user mistakes; scripts turn it into one sentence and exit status 2."""


class BadInput(Exception):
    """A problem with what the user asked for (flags, paths, data), not a bug."""
