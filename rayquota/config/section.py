"""The base of every section of the configuration file (frozen; an unknown key is refused), and
the types the modules of sections share."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=False, frozen=True)


Port = Annotated[int, Field(ge=0, le=65535)]
