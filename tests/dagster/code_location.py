"""The Definitions a Dagster test runs: built the way the code location builds them."""

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import TypeAdapter

from pms_sync.component import PmsSyncComponent, folder_definitions


def code_location(folder: Path, resources: Mapping[str, object]) -> dg.Definitions:
    """One ``PmsSyncComponent`` per mapping file of ``folder``, resolved from its attributes by
    ``folder_definitions`` as in ``assets/definitions.py`` and ``make demo``, with the test's
    resources (its sandbox and snapshot) in place of the state folder's defaults."""
    return folder_definitions(folder, folder.parent, resources)


def component(attributes: dict[str, Any]) -> PmsSyncComponent:
    """The component of these ``defs.yaml`` attributes, validated and resolved as ``dg`` does."""
    model = TypeAdapter(PmsSyncComponent.model()).validate_python(attributes)
    return PmsSyncComponent.resolve_from_model(dg.ResolutionContext.default(), model)
