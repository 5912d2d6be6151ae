"""Enum building blocks the reference exposes for code that defines its own enums."""

from __future__ import annotations

import enum
from typing import Any


class EnumWithContains(enum.EnumMeta):
    """Enum metaclass whose ``in`` accepts values as well as members.

    ``"fp16" in MyEnum`` is True when ``MyEnum("fp16")`` would succeed.
    """

    def __contains__(cls, item: Any) -> bool:
        try:
            cls(item)
        except (ValueError, TypeError):
            return False
        return True


class BaseEnum(enum.Enum, metaclass=EnumWithContains):
    """An enum whose ``str()`` is its value and whose ``in`` accepts values.

    Example:
        >>> class Color(BaseEnum):
        ...     RED = "red"
        >>> str(Color.RED), "red" in Color, Color.list()
        ('red', True, ['red'])
    """

    def __str__(self) -> str:
        return str(self.value)

    @classmethod
    def list(cls) -> list[str]:
        """Return ``str()`` of every member, in declaration order."""
        return [str(member) for member in cls]
