"""Base classes shared by the contract models."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class RequestModel(BaseModel):
    """A body the connector sends: strict types, unknown members rejected.

    Strict mode keeps a mapping honest: a guest count of ``"2"`` or a price of ``"12.5"`` is a
    mapping error to fix, not something to coerce silently on the way out.
    """

    # NaN and infinities are no JSON numbers: refused rather than stored and echoed as NaN.
    model_config = ConfigDict(
        extra="forbid", strict=True, populate_by_name=True, allow_inf_nan=False
    )

    def to_json_dict(self) -> dict[str, Any]:
        """The JSON object as sent on the wire: optional members left out when unset."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class ResponseModel(BaseModel):
    """A body the service returns: tolerant, because a service may add members at any time."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
