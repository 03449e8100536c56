"""A method's settings: a pydantic model it declares (`class Settings(MethodSettings)`)."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from eebench.io import left_out_at_default


class MethodSettings(BaseModel):
    """Bounds, Literals, finite floats; unknown names and wrong types are refused, not converted."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, frozen=True)
    # Settings added after runs were made with the method: recorded (and so part of a run's name)
    # only when they differ from their default, so the earlier runs keep their names.
    RECORDED_WHEN_CHANGED: ClassVar[tuple[str, ...]] = ()

    def recorded(self) -> dict[str, Any]:
        """The settings a run records: all of them, but those RECORDED_WHEN_CHANGED at their
        default (eebench.io, the one mechanism that keeps run keys stable)."""
        return left_out_at_default(self.model_dump(), self, self.RECORDED_WHEN_CHANGED)

