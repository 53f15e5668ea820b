"""Ingestion: read knowledge-base files and normalise their text (see readers, clean, units)."""
from rag_core.ingest.clean import Heading, Normalised, normalise, normalise_fragment
from rag_core.ingest.readers import SUPPORTED_SUFFIXES, IngestError, RawDocument, decode_bytes, read_file
from rag_core.ingest.units import canonicalise_units

__all__ = [
    "SUPPORTED_SUFFIXES",
    "Heading",
    "IngestError",
    "Normalised",
    "RawDocument",
    "canonicalise_units",
    "decode_bytes",
    "normalise",
    "normalise_fragment",
    "read_file",
]
