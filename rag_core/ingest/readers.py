"""Read knowledge-base files (txt, md, pdf, docx) into raw page texts.

Readers only decode and extract; all cleaning happens in `rag_core.ingest.clean`.
Every failure is an `IngestError` whose `.reason` is short, precise English an admin can act on.
"""
from __future__ import annotations

import codecs
import io
import logging
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from docx.table import Table
    from docx.text.paragraph import Paragraph

log = logging.getLogger(__name__)

SUPPORTED_SUFFIXES = (".txt", ".md", ".pdf", ".docx")

_TEXT_KINDS = {".txt": "txt", ".md": "md"}
_ALLOWED_CONTROLS = set("\t\n\r\f\v")
_MAX_CONTROL_RATIO = 0.05
_HEADING_STYLE = re.compile(r"^(?:heading|标题)\s*([1-9])$", re.IGNORECASE)


class IngestError(Exception):
    """A file that cannot be ingested; `.reason` says why."""

    def __init__(self, reason: str, path: Path | None = None) -> None:
        self.reason = reason
        self.path = path
        super().__init__(f"{path}: {reason}" if path else reason)


@dataclass(frozen=True)
class RawDocument:
    """Extracted text before cleaning: one entry per page for PDFs (or per form-feed page for text files)."""

    pages: tuple[str, ...]
    kind: str  # "txt" | "md" | "pdf" | "docx"
    encoding: str | None = None  # detected encoding, for text files


def read_file(path: Path) -> RawDocument:
    """Read one knowledge-base file; raise `IngestError` with a precise reason when it cannot be used."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        raise IngestError(f"unsupported file type '{suffix or path.name}'", path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise IngestError(f"cannot read file: {exc.strerror or exc}", path) from exc
    return read_data(data, path)


def read_data(data: bytes, path: Path) -> RawDocument:
    """Extract a file's text from bytes already read (its `path` gives the type and the error messages)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        raise IngestError(f"unsupported file type '{suffix or path.name}'", path)
    if not data.strip():
        raise IngestError("empty file", path)
    try:
        if suffix == ".pdf":
            doc = RawDocument(pages=_read_pdf(data), kind="pdf")
        elif suffix == ".docx":
            doc = RawDocument(pages=(_read_docx(data),), kind="docx")
        else:
            text, encoding = decode_bytes(data)
            text = text.replace("\r\n", "\n").replace("\r", "\n")
            pages = tuple(text.split("\f")) if "\f" in text else (text,)
            doc = RawDocument(pages=pages, kind=_TEXT_KINDS[suffix], encoding=encoding)
    except IngestError as exc:
        raise IngestError(exc.reason, path) from exc
    if not any(page.strip() for page in doc.pages):
        raise IngestError("empty file", path)
    log.debug("read %s: kind=%s pages=%d encoding=%s", path, doc.kind, len(doc.pages), doc.encoding)
    return doc


def decode_bytes(data: bytes) -> tuple[str, str]:
    """Decode text bytes: UTF-8 (with or without BOM), UTF-16 (BOM or NUL pattern), GBK, GB18030.

    Returns `(text, encoding)`; raises `IngestError` ("binary file", "empty file", "undecodable text …").
    """
    if not data:
        raise IngestError("empty file")
    if data.startswith(codecs.BOM_UTF8):
        return _checked(data[len(codecs.BOM_UTF8) :].decode("utf-8", errors="strict"), "utf-8-sig")
    for bom, encoding in ((codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be")):
        if data.startswith(bom):
            try:
                return _checked(data[len(bom) :].decode(encoding), encoding)
            except UnicodeDecodeError as exc:
                raise IngestError(f"invalid {encoding} text after byte-order mark") from exc
    if b"\x00" in data:
        encoding = _utf16_by_nul_pattern(data)
        if encoding is None:
            raise IngestError("binary file")
        try:
            return _checked(data.decode(encoding), encoding)
        except UnicodeDecodeError as exc:
            raise IngestError("binary file") from exc
    for encoding in ("utf-8", "gbk", "gb18030"):
        try:
            text = data.decode(encoding)
        except UnicodeDecodeError:
            continue
        return _checked(text, encoding)
    raise IngestError("undecodable text (tried utf-8, utf-16, gb18030)")


def _utf16_by_nul_pattern(data: bytes) -> str | None:
    """UTF-16 without a BOM puts the NUL bytes of ASCII characters all on odd (LE) or even (BE) offsets."""
    if len(data) % 2:
        return None
    sample = data[:8192]
    even = sample[0::2].count(0)
    odd = sample[1::2].count(0)
    if odd and even <= odd * 0.05:
        return "utf-16-le"
    if even and odd <= even * 0.05:
        return "utf-16-be"
    return None


def _checked(text: str, encoding: str) -> tuple[str, str]:
    """Reject decoded text that is mostly control characters (a binary file that happened to decode)."""
    if not text.strip():
        raise IngestError("empty file")
    controls = sum(1 for ch in text if ch not in _ALLOWED_CONTROLS and unicodedata.category(ch) == "Cc")
    if controls > _MAX_CONTROL_RATIO * len(text):
        raise IngestError("binary file")
    return text, encoding


def _read_pdf(data: bytes) -> tuple[str, ...]:
    """One string per page from the PDF's text layer."""
    import pypdf  # imported here: only PDF ingestion needs it

    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            try:
                decrypted = reader.decrypt("")
            except Exception as exc:  # noqa: BLE001 - pypdf raises several types for unsupported crypto
                raise IngestError(f"encrypted PDF (cannot decrypt: {exc})") from exc
            if not decrypted:
                raise IngestError("encrypted PDF (password required)")
        pages = tuple((page.extract_text() or "") for page in reader.pages)
    except IngestError:
        raise
    except Exception as exc:  # noqa: BLE001 - pypdf signals corrupt files with many exception types
        raise IngestError(f"PDF parse error: {exc}") from exc
    if not pages:
        raise IngestError("PDF parse error: no pages")
    if not any(page.strip() for page in pages):
        raise IngestError("no text layer (probably a scanned PDF)")
    return pages


def _read_docx(data: bytes) -> str:
    """Body paragraphs and tables in document order; Title/Heading N become markdown headings."""
    import docx  # python-docx: imported here, only DOCX ingestion needs it
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    try:
        document = docx.Document(io.BytesIO(data))
        blocks: list[str] = []
        for child in document.element.body.iterchildren():
            tag = child.tag.rsplit("}", 1)[-1]
            if tag == "p":
                blocks.append(_docx_paragraph(Paragraph(child, document)))
            elif tag == "tbl":
                blocks.append(_docx_table(Table(child, document)))
    except Exception as exc:  # noqa: BLE001 - python-docx/zipfile/lxml raise many types for corrupt files
        raise IngestError(f"DOCX parse error: {exc}") from exc
    return "\n\n".join(block for block in blocks if block.strip())


def _docx_paragraph(paragraph: Paragraph) -> str:
    text = paragraph.text
    style = paragraph.style
    name = (style.name or "") if style is not None else ""
    if not text.strip():
        return ""
    if name.lower() == "title":
        return "# " + " ".join(text.split())
    heading = _HEADING_STYLE.match(name.strip())
    if heading:
        return "#" * int(heading.group(1)) + " " + " ".join(text.split())
    if name.lower().startswith("list"):
        return "- " + text
    return text


def _docx_table(table: Table) -> str:
    """Each row as a markdown table row; merged cells (the same cell repeated) appear once."""
    rows: list[str] = []
    for row in table.rows:
        cells: list[str] = []
        seen: list[object] = []  # the cells' XML elements; a merged cell repeats the same element
        for cell in row.cells:
            if any(cell._tc is tc for tc in seen):
                continue
            seen.append(cell._tc)
            cells.append(" ".join(cell.text.split()))
        if any(cells):
            rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)
