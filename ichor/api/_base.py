"""The one model configuration every API shape shares.

Python names are snake_case and the API's are camelCase; unknown fields are ignored on
read (an object written by a newer Ichor must still load) and ``None`` is never written
(an absent field and an empty one mean different things, for example "no list recorded
yet" against "an empty list").
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class ApiModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        frozen=True,
        extra="ignore",
    )

    def to_api(self) -> dict[str, Any]:
        """The JSON body the API server takes: camelCase, no ``None``."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)
