"""Declarative mapping files: from PMS exports to validated accommodation and reservation records.

>>> mapping = load_mapping("mappings/hotel/mapping.yaml")
>>> batches = map_records(mapping)          # {Entity: MappedRecords}
"""

from connector.mapping.engine import PreparedMapping, map_records, prepare, run_prepared
from connector.mapping.expressions import Condition, Expression
from connector.mapping.loader import load_mapping
from connector.mapping.model import (
    AccommodationMapping,
    DagsterSettings,
    Entities,
    Mapping,
    ReservationMapping,
    SafetySettings,
)

__all__ = [
    "AccommodationMapping",
    "Condition",
    "DagsterSettings",
    "Entities",
    "Expression",
    "Mapping",
    "PreparedMapping",
    "ReservationMapping",
    "SafetySettings",
    "load_mapping",
    "map_records",
    "prepare",
    "run_prepared",
]
