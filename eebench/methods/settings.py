"""A method's settings: a pydantic model it declares (`class Settings(MethodSettings)`)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from eebench.io import left_out_at_default


class MethodSettings(BaseModel):
    """Bounds, Literals, finite floats; unknown names and wrong types are refused, not converted."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, frozen=True)
    # Settings added after runs were made with the method: recorded (and so part of a run's name)
    # only when they differ from their default, so the earlier runs keep their names.
    RECORDED_WHEN_CHANGED: ClassVar[tuple[str, ...]] = ()

    # What one exit classifies: a whole text ("sequence"), or each token ("token": sequence
    # labelling, a token head per exit). Every method has it; the runner sets it from the task
    # (a token task trains the method's token model), and a run records it only as "token".
    unit: Literal["sequence", "token"] = "sequence"

    @classmethod
    def checked(cls, method: str, settings: dict[str, Any]) -> MethodSettings:
        """`settings` of method `method`, validated: one line naming what is wrong."""
        try:
            return cls.model_validate(settings)
        except ValidationError as e:
            from eebench.errors import UsageError

            err = e.errors()[0]
            known = ", ".join(f for f in cls.model_fields if f != "unit") or "none"  # the task's
            raise UsageError(
                f"method {method!r}: setting {'.'.join(map(str, err['loc']))}: {err['msg']}",
                hint=f"its settings are: {known}" if err["type"] == "extra_forbidden" else None,
            ) from None

    def recorded(self) -> dict[str, Any]:
        """The settings a run records: all of them, but `unit` and those RECORDED_WHEN_CHANGED at
        their default (eebench.io, the one mechanism that keeps run keys stable)."""
        return left_out_at_default(self.model_dump(), self,
                                   ("unit", *self.RECORDED_WHEN_CHANGED))

