"""Warnings about prompt sets and load settings that make acceptance numbers misleading.

Copy tasks ("repeat the following ...") make any draft model look excellent; ``ignore_eos`` makes
the model generate past its natural end, where text degenerates into easy-to-draft loops; sampling
(temperature > 0, top_p < 1) makes acceptance depend on the random draw, so cells stop being
comparable; duplicate prompts weigh one prompt more than the others.
"""

from __future__ import annotations

import re
from collections import Counter

from specbench.load.driver import LoadPlan
from specbench.load.prompt_sets import Prompt

_COPY = re.compile(
    r"\b(repeat (the|this|after|back|exactly)|copy (the|this|it|exactly)|echo (the|this)|"
    r"say (it |this )?again|verbatim|word for word|rewrite .{0,20}exactly)\b",
    re.IGNORECASE,
)


def lint(prompts: list[Prompt], load_spec: LoadPlan | None = None) -> list[str]:
    """One warning string per problem found; empty when all is well."""
    warnings: list[str] = []
    copies = [p.id for p in prompts if _COPY.search(p.text)]
    if copies:
        warnings.append(
            f"{len(copies)} prompt(s) ask the model to copy text ({_ids(copies)}); copy tasks inflate "
            "acceptance for any draft, keep them out of the default set or report them apart"
        )
    counts = Counter(" ".join(p.text.split()).lower() for p in prompts)
    dup_ids = [p.id for p in prompts if counts[" ".join(p.text.split()).lower()] > 1]
    if dup_ids:
        warnings.append(f"duplicate prompts ({_ids(dup_ids)}); each duplicate counts twice in the acceptance")
    if load_spec is not None:
        if load_spec.ignore_eos:
            warnings.append(
                "ignore_eos is on: generation runs past the natural end into repetitive text that is easy "
                "to draft, which inflates acceptance"
            )
        if load_spec.temperature > 0:
            warnings.append(
                f"temperature {load_spec.temperature} > 0: acceptance depends on the random draw and cells "
                "are not comparable token for token; use 0 unless sampling is the point of the study"
            )
        if load_spec.top_p < 1:
            warnings.append(
                f"top_p {load_spec.top_p} < 1: truncated sampling changes acceptance and breaks "
                "comparability across cells; use 1.0"
            )
        for key in ("temperature", "top_p", "ignore_eos"):
            if key in load_spec.extra_body:
                warnings.append(f"extra_body sets {key!r}, which overrides the load setting of the same name")
    return warnings


def _ids(ids: list[str], limit: int = 5) -> str:
    shown = ", ".join(ids[:limit])
    return shown + (f" and {len(ids) - limit} more" if len(ids) > limit else "")
