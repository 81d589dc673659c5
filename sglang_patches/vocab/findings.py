"""A check's result: a stable code, the severity, the message with the numbers, and the exact fix."""
from __future__ import annotations

from dataclasses import asdict, dataclass

ERROR, WARNING = "error", "warning"


@dataclass(frozen=True)
class Finding:
    code: str
    severity: str  # "error" | "warning"
    message: str
    fix: str

    def to_dict(self) -> dict:
        return asdict(self)
