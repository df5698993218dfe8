"""The base of every typed record (:class:`Record`) and the field types records share.

Strict types (a count is an integer, never ``true`` or ``"3"``); unknown keys (a newer writer's)
kept and written back; ``dump()`` gives the keys the writer set, in declaration order, which is the
order specbench has always written them. A damaged file is refused naming the file and the field
(InputError, exit 2).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Optional, TypeVar, Union

from annotated_types import Len
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
)

from specbench.errors import InputError
from specbench.records.counts import MAX_POSITIONS


def _fits_float(value: int) -> int:
    # every statistic is computed in floats: a whole number past their range (10^400) is refused
    # where it is read, naming its field, instead of surfacing later as an OverflowError
    if value.bit_length() > 1023:
        raise ValueError(f"a {value.bit_length()}-bit whole number is past any float")
    return value


Whole = Annotated[StrictInt, AfterValidator(_fits_float)]
Num = Union[Whole, StrictFloat]
Scalar = Union[StrictStr, StrictInt, StrictFloat, StrictBool]
Interval = Annotated[list[Optional[Num]], Len(2, 2)]
Positions = Annotated[list[StrictInt], Len(0, MAX_POSITIONS)]
Fractions = Annotated[list[Optional[Num]], Len(0, MAX_POSITIONS)]
K = Annotated[StrictInt, Field(ge=0, le=MAX_POSITIONS)]

R = TypeVar("R", bound="Record")


class Record(BaseModel):
    """Base of every record: unknown keys kept, strict types, dump = what was set."""

    model_config = ConfigDict(extra="allow", strict=True, validate_assignment=True)

    # Checked by specbench.io.load_json (refuses other versions) and written first by save_json.
    schema_version: Optional[StrictInt] = None

    def dump(self) -> dict[str, Any]:
        """The JSON object to write (keys set by the writer or read from the file, in field order)."""
        return self.model_dump(exclude_unset=True, by_alias=True)

    @classmethod
    def parse(cls: type[R], data: Any, file: Path | str, fix: str = "re-run the cell") -> R:
        """Validate ``data`` read from ``file``; InputError naming the file and the first bad field."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise InputError(f"{file}: {first_problem(exc)}; {fix}") from None


def first_problem(exc: ValidationError) -> str:
    """``field.path[i]: message`` of the first error, as a user reads it."""
    err = exc.errors(include_url=False)[0]
    # Pydantic puts the union member it tried into the path ("int", "list[int]", "function-after[...]"):
    # only the field path and the message mean something to a user.
    parts = [p for p in err["loc"] if not (isinstance(p, str) and _UNION_TAG.match(p))]
    where = "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else str(p)) for i, p in enumerate(parts))
    return f"{where or 'top level'}: {err['msg'].lower()}"


_UNION_TAG = re.compile(r"^(int|float|str|bool|list|dict|none|[a-z-]+\[.*\])$")
