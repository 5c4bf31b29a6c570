"""Exceptions raised by the pool engine.

Every error carries the location inside the document being processed so
that API responses and admin forms can point at the offending field.
"""


class EngineError(ValueError):
    def __init__(self, message: str, path: str = "") -> None:
        self.message = message
        self.path = path
        super().__init__(message)

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class QuantityError(EngineError):
    pass


class TimeoutFormatError(EngineError):
    pass


class RenderError(EngineError):
    pass


class RuleError(EngineError):
    pass
