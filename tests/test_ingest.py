"""Readers, cleaner and units: real files built in the test (PDF with a Chinese text layer, DOCX) and the sample KB."""
from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from rag_core.ingest import (
    IngestError,
    RawDocument,
    canonicalise_units,
    decode_bytes,
    normalise,
    normalise_fragment,
    read_file,
)
from rag_core.ingest.clean import ends_sentence

ROOT = Path(__file__).resolve().parents[1]
KB = ROOT / "kb"
EVAL = ROOT.parent / "shared" / "eval"
NOISY = sorted(KB.glob("*_pdfnoisy.txt"))
HEADER = "云南咖啡栽培技术手册"
CJK = re.compile(r"[\u4e00-\u9fff]")
FURNITURE = re.compile(r"^(?:[-—–]\s*\d+\s*[-—–]|第\s*\d+\s*页.*|\d{1,4}|page\s*\d+)$", re.IGNORECASE)


def _clean(text: str, kind: str = "txt") -> str:
    return normalise(RawDocument(pages=(text,), kind=kind)).text


def _no_ws(text: str) -> str:
    return re.sub(r"\s+", "", text)


# ---------------------------------------------------------------- decoding and reading
SAMPLE = "云南小粒咖啡，海拔1200米。\n第二段：锈病防治。\n"


@pytest.mark.parametrize(
    ("data", "encoding"),
    [
        (SAMPLE.encode("utf-8"), "utf-8"),
        (b"\xef\xbb\xbf" + SAMPLE.encode("utf-8"), "utf-8-sig"),
        (b"\xff\xfe" + SAMPLE.encode("utf-16-le"), "utf-16-le"),
        (b"\xfe\xff" + SAMPLE.encode("utf-16-be"), "utf-16-be"),
        (SAMPLE.encode("utf-16-le"), "utf-16-le"),  # no BOM: found by the NUL pattern
        (SAMPLE.encode("gbk"), "gbk"),
        (("𠮷" + SAMPLE).encode("gb18030"), "gb18030"),  # a 4-byte GB18030 character GBK lacks
    ],
)
def test_decode_bytes_detects_encoding(data: bytes, encoding: str) -> None:
    text, found = decode_bytes(data)
    assert found == encoding
    assert text.endswith(SAMPLE) and not text.startswith("\ufeff")


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "empty file"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x01\x00", "binary file"),
        (bytes(range(1, 32)) * 20, "binary file"),
        (b"\xff\xff\xfe\x80\x80abc", "undecodable text (tried utf-8, utf-16, gb18030)"),
    ],
)
def test_decode_bytes_rejects(data: bytes, reason: str) -> None:
    with pytest.raises(IngestError) as info:
        decode_bytes(data)
    assert info.value.reason == reason


def test_read_text_files_in_several_encodings(tmp_path: Path) -> None:
    for name, data in {
        "gbk.txt": SAMPLE.encode("gbk"),
        "bom.md": b"\xef\xbb\xbf" + ("# 标题\n\n" + SAMPLE).encode("utf-8"),
        "u16.txt": b"\xff\xfe" + SAMPLE.replace("\n", "\r\n").encode("utf-16-le"),
    }.items():
        (tmp_path / name).write_bytes(data)
        doc = read_file(tmp_path / name)
        assert doc.kind == name.rsplit(".", 1)[1] and len(doc.pages) == 1
        assert "云南小粒咖啡" in doc.pages[0] and "\r" not in doc.pages[0]
    assert read_file(tmp_path / "gbk.txt").encoding == "gbk"
    assert normalise(read_file(tmp_path / "bom.md")).title == "标题"


def test_form_feeds_split_pages(tmp_path: Path) -> None:
    (tmp_path / "paged.txt").write_text("第一页内容。\f第二页内容。", encoding="utf-8")
    assert read_file(tmp_path / "paged.txt").pages == ("第一页内容。", "第二页内容。")


@pytest.mark.parametrize(
    ("name", "data", "reason"),
    [
        ("empty.txt", b"", "empty file"),
        ("blank.md", b" \n\t\r\n  ", "empty file"),
        ("bom-only.txt", b"\xef\xbb\xbf\n", "empty file"),
        ("binary.txt", bytes(range(256)) * 4, "binary file"),
        ("empty.pdf", b"", "empty file"),
        ("notes.rtf", b"{\\rtf1 hello}", "unsupported file type '.rtf'"),
    ],
)
def test_read_file_rejects(tmp_path: Path, name: str, data: bytes, reason: str) -> None:
    (tmp_path / name).write_bytes(data)
    with pytest.raises(IngestError) as info:
        read_file(tmp_path / name)
    assert info.value.reason == reason
    assert info.value.path == tmp_path / name


def test_corrupt_pdf_and_docx(tmp_path: Path) -> None:
    (tmp_path / "bad.pdf").write_bytes(b"%PDF-1.4\nthis is not really a pdf\n")
    (tmp_path / "bad.docx").write_bytes(b"PK\x03\x04 not a zip")
    with pytest.raises(IngestError) as info:
        read_file(tmp_path / "bad.pdf")
    assert info.value.reason.startswith("PDF parse error: ")
    with pytest.raises(IngestError) as info:
        read_file(tmp_path / "bad.docx")
    assert info.value.reason.startswith("DOCX parse error")


# ---------------------------------------------------------------- PDF with a real Chinese text layer
def _pdf(pages: list[list[str]], header: str | None = None, footer: str | None = None) -> bytes:
    """A PDF drawn with reportlab's built-in CID font STSong-Light (pypdf extracts its text as Unicode)."""
    pytest.importorskip("reportlab")
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.cidfonts import UnicodeCIDFont
    from reportlab.pdfgen import canvas

    pdfmetrics.registerFont(UnicodeCIDFont("STSong-Light"))
    buf = io.BytesIO()
    pdf = canvas.Canvas(buf)
    for number, lines in enumerate(pages, 1):
        pdf.setFont("STSong-Light", 11)
        if header:
            pdf.drawString(72, 800, header)
        for row, line in enumerate(lines):
            pdf.drawString(72, 740 - 18 * row, line)
        if footer:
            pdf.drawString(280, 40, footer.format(n=number, total=len(pages)))
        if not lines and not header:
            pdf.rect(100, 100, 300, 400, fill=1)  # a page with only a drawing, like a scan
        pdf.showPage()
    pdf.save()
    return buf.getvalue()


def test_pdf_text_layer_pages_and_furniture(tmp_path: Path) -> None:
    path = tmp_path / "manual.pdf"
    path.write_bytes(_pdf(
        [
            ["云南小粒咖啡栽培要点", "一、园地选择", "咖啡园宜选在海拔１０００～1600米的坡地，年平均气温19～21℃，", "土层深厚、排水良好的地块。"],
            ["二、施肥", "每株每年施纯氮40–50克，分三次施用；施肥时应开", "沟深约15厘米，施后覆土。"],
            ["三、病虫害防治", "锈病在9–12月发病最重，应在6–7月喷铜制剂保护。"],
        ],
        header="咖啡技术手册",
        footer="第 {n} 页 共 {total} 页",
    ))
    raw = read_file(path)
    assert raw.kind == "pdf" and len(raw.pages) == 3
    assert "咖啡园宜选在海拔" in raw.pages[0] and "第 1 页" in raw.pages[0]
    doc = normalise(raw)
    assert "咖啡技术手册" not in doc.text and "页" not in doc.text
    assert doc.title == "云南小粒咖啡栽培要点"
    assert "海拔1000～1600m的坡地，年平均气温19～21°C，土层深厚" in doc.text  # joined inside a page
    assert "施肥时应开沟深约15cm，施后覆土。" in doc.text  # joined across the page break
    assert [(h.level, h.text) for h in doc.headings] == [(3, "一、园地选择"), (3, "二、施肥"), (3, "三、病虫害防治")]
    assert {(u.canonical, u.original) for u in doc.units} >= {("m", "米"), ("°C", "℃"), ("g", "克"), ("cm", "厘米")}


def test_pdf_without_text_layer_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "scan.pdf"
    path.write_bytes(_pdf([[]]))
    with pytest.raises(IngestError) as info:
        read_file(path)
    assert info.value.reason == "no text layer (probably a scanned PDF)"


def test_encrypted_pdf_is_rejected(tmp_path: Path) -> None:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    writer.append(PdfReader(io.BytesIO(_pdf([["加密文件内容。"]]))))
    writer.encrypt(user_password="secret", algorithm="RC4-128")
    path = tmp_path / "locked.pdf"
    with path.open("wb") as fh:
        writer.write(fh)
    with pytest.raises(IngestError, match="encrypted PDF"):
        read_file(path)


# ---------------------------------------------------------------- DOCX
def test_docx_headings_paragraphs_and_tables(tmp_path: Path) -> None:
    import docx

    document = docx.Document()
    document.add_heading("第七章 荫蔽栽培", level=1)
    document.add_paragraph("荫蔽树可降低叶温，减轻结果过多")  # no final punctuation: must not swallow the next
    document.add_paragraph("适宜荫蔽度为30%–40%。")
    document.add_heading("第一节 荫蔽树选择", level=2)
    table = document.add_table(rows=2, cols=2)
    for row, cells in zip(table.rows, [("树种", "行距"), ("澳洲坚果", "8–12米")]):
        for cell, value in zip(row.cells, cells):
            cell.text = value
    document.add_paragraph("表后的说明。")
    path = tmp_path / "shade.docx"
    document.save(path)

    raw = read_file(path)
    assert raw.kind == "docx" and raw.pages[0].startswith("# 第七章 荫蔽栽培")
    doc = normalise(raw)
    assert doc.title == "第七章 荫蔽栽培"
    assert doc.text.split("\n") == [
        "第七章 荫蔽栽培",
        "荫蔽树可降低叶温，减轻结果过多",
        "适宜荫蔽度为30%–40%。",
        "第一节 荫蔽树选择",
        "| 树种 | 行距 |",
        "| 澳洲坚果 | 8–12m |",
        "表后的说明。",
    ]
    assert [(h.level, doc.text[h.start : h.end]) for h in doc.headings] == [(1, "第七章 荫蔽栽培"), (2, "第一节 荫蔽树选择")]


# ---------------------------------------------------------------- units
def test_units_canonical_with_originals_and_offsets() -> None:
    source = "海拔1000～1600米，年均温19～21摄氏度，施尿素 10 克、农家肥5公斤；沟深30公分，灌水20毫米，面积2公顷，容量3升。"
    text, spans = canonicalise_units(source)
    assert text == "海拔1000～1600m，年均温19～21°C，施尿素 10 g、农家肥5kg；沟深30cm，灌水20mm，面积2hm²，容量3L。"
    assert [(u.canonical, u.original) for u in spans] == [
        ("m", "米"), ("°C", "摄氏度"), ("g", "克"), ("kg", "公斤"), ("cm", "公分"), ("mm", "毫米"), ("hm²", "公顷"), ("L", "升"),
    ]
    for unit in spans:
        assert text[unit.start : unit.end] == unit.canonical


def test_units_leave_words_alone() -> None:
    for text in ["玉米和米粒", "克服困难", "气温回升", "每公顷产量", "30 度以上", "约150万亩", "1斤", "6 小时", "3米粒"]:
        assert canonicalise_units(text) == (text, ())
    assert canonicalise_units("21–25 ℃")[0] == "21–25 °C"
    assert canonicalise_units("15-15-15 复合肥 30 千克")[0] == "15-15-15 复合肥 30 kg"


def test_document_units_point_into_the_text() -> None:
    doc = normalise(RawDocument(pages=("# 标题\n\n海拔 1000–1600 米，株距 1.2 米。\n\n积温 21–25 ℃。",), kind="md"))
    assert doc.text == "标题\n海拔 1000–1600 m，株距 1.2 m。\n积温 21–25 °C。"
    assert [(doc.text[u.start : u.end], u.original) for u in doc.units] == [("m", "米"), ("m", "米"), ("°C", "℃")]


# ---------------------------------------------------------------- characters and whitespace
def test_fullwidth_forms_and_chinese_punctuation() -> None:
    text = _clean("年降水量１２００～１５００毫米，ｐＨ　５.５；荫蔽度３０％！（见表１）：“适地适种”「注意」？")
    assert text == "年降水量1200～1500mm，pH 5.5；荫蔽度30%！（见表1）：“适地适种”「注意」？"
    assert normalise_fragment("ｐＨ　５.５，　咖啡　树") == "pH 5.5，咖啡树"


def test_whitespace_rules() -> None:
    assert _clean("  咖啡  树\t的 叶片 ， pH  5.5 和 SCA  精品级  ") == "咖啡树的叶片，pH 5.5 和 SCA 精品级"
    assert _clean("第八章   主要病害") == "第八章 主要病害"
    # columns aligned with runs of spaces (a plain-text table) become a table row
    assert _clean("时间                主要作业\n4 月～5 月          挖定植穴，回填基肥") == (
        "| 时间 | 主要作业 |\n| 4 月～5 月 | 挖定植穴，回填基肥 |"
    )


# ---------------------------------------------------------------- the cleaner on synthetic noise
NOISY_TEXT = """云南咖啡栽培手册选编

一、种植规模

云南咖啡面积约15-
0万亩，主要分布在海拔10-
00～1600米的山区，常用 15-15-15 复合肥。
  坡地种植要
修梯田，防止冲刷。

— 7 —
云南咖啡栽培技术手册

（一）主要产区
普洱、临沧、保山是主产区，其中普洱面积最
大，临沧次之。
问：咖啡叶子发黄怎么办？
答：先查根系，再看
是否缺肥。
1. 开沟排水
2. 增施有机肥

第12页 共30页
云南咖啡栽培技术手册

二、品种
| 品种 | 特点 |
|---|---|
| 卡蒂姆 | 抗锈 |

- 8 -
云南咖啡栽培技术手册
1 范围
2.1 母树：用于采集育苗种子的品种纯正、生长健壮的结果树。
4.2 沙床准备

第八章 病害
第二节 锈病
Page 3
"""


def test_cleaner_on_synthetic_noise() -> None:
    doc = normalise(RawDocument(pages=(NOISY_TEXT,), kind="txt"))
    assert doc.text.split("\n") == [
        "云南咖啡栽培手册选编",
        "一、种植规模",
        "云南咖啡面积约150万亩，主要分布在海拔1000～1600m的山区，常用 15-15-15 复合肥。",
        "坡地种植要修梯田，防止冲刷。",
        "（一）主要产区",
        "普洱、临沧、保山是主产区，其中普洱面积最大，临沧次之。",
        "问：咖啡叶子发黄怎么办？",
        "答：先查根系，再看是否缺肥。",
        "1. 开沟排水",
        "2. 增施有机肥",
        "二、品种",
        "| 品种 | 特点 |",
        "| 卡蒂姆 | 抗锈 |",
        "1 范围",
        "2.1 母树：用于采集育苗种子的品种纯正、生长健壮的结果树。",
        "4.2 沙床准备",
        "第八章 病害",
        "第二节 锈病",
    ]
    assert doc.title == "云南咖啡栽培手册选编"
    assert [(h.level, h.text) for h in doc.headings] == [
        (3, "一、种植规模"), (4, "（一）主要产区"), (3, "二、品种"), (1, "1 范围"), (2, "4.2 沙床准备"),
        (1, "第八章 病害"), (2, "第二节 锈病"),
    ]
    for heading in doc.headings:
        assert doc.text[heading.start : heading.end] == heading.text


@pytest.mark.parametrize("footer", ["第 12 页", "第12页 共30页", "— 12 —", "- 12 -", "12", "Page 3", "3 / 30"])
def test_page_number_lines_are_removed(footer: str) -> None:
    text = _clean(f"咖啡园应开沟排水，雨季\n\n{footer}\n\n前疏通一次。")
    assert text == "咖啡园应开沟排水，雨季前疏通一次。"


def test_running_header_without_page_numbers() -> None:
    body = "\n".join(f"第{i}段正文内容，说明咖啡园管理的一个要点。" for i in range(12))
    pages = "\n栽培技术手册\n".join([body] * 5)
    assert "栽培技术手册" not in _clean(pages)
    # the same short line only twice, far apart: kept (it could be real content)
    assert _clean("\n栽培技术手册\n".join([body] * 2)).count("栽培技术手册") == 1


def test_paragraphs_are_kept_apart_and_output_is_deterministic() -> None:
    raw = RawDocument(pages=("第一段没有句号\n\n第二段也没有句号\n\n第三段。",), kind="md")
    assert normalise(raw).text == "第一段没有句号\n第二段也没有句号\n第三段。"
    assert normalise(raw) == normalise(raw)


# ---------------------------------------------------------------- the sample knowledge base
@pytest.fixture(scope="module")
def kb_docs() -> dict[str, object]:
    return {path.name: normalise(read_file(path)) for path in sorted(KB.iterdir()) if path.is_file()}


def test_every_kb_file_reads_and_normalises(kb_docs: dict) -> None:
    assert len(kb_docs) == 22
    for name, doc in kb_docs.items():
        assert doc.title, name
        assert "\n\n" not in doc.text and doc.text == doc.text.strip(), name
        for unit in doc.units:
            assert doc.text[unit.start : unit.end] == unit.canonical, name
        for heading in doc.headings:
            assert doc.text[heading.start : heading.end] == heading.text, name


@pytest.mark.parametrize("path", NOISY, ids=lambda p: p.name)
def test_pdfnoisy_files_come_out_clean(kb_docs: dict, path: Path) -> None:
    doc = kb_docs[path.name]
    lines = doc.text.split("\n")
    assert HEADER not in doc.text
    assert not [line for line in lines if FURNITURE.match(line)]
    assert not re.search(r"[０-９Ａ-Ｚａ-ｚ\u3000]", doc.text)
    heading_starts = {h.start for h in doc.headings}
    offset, broken = 0, []
    for line, following in zip(lines, lines[1:]):
        is_heading = offset in heading_starts or line == doc.title
        offset += len(line) + 1
        if is_heading or offset in heading_starts or following.startswith(("问：", "答：", "|")):
            continue
        if re.match(r"^(?:\d+[.、]|（\d+）)", following):
            continue
        if (CJK.match(line[-1]) or line[-1] in "，、") and not ends_sentence(line):
            broken.append(f"{line[-12:]} ⏎ {following[:12]}")
    assert not broken, broken


def _gold_quotes() -> list[tuple[str, str, str]]:
    quotes = []
    for name in ("dev.jsonl", "dev-multiturn.jsonl"):
        for line in (EVAL / name).read_text(encoding="utf-8").splitlines():
            item = json.loads(line)
            quotes += [(item["id"], e["doc"], e["quote"]) for e in item.get("evidence", [])]
    return quotes


@pytest.mark.skipif(not EVAL.is_dir(), reason="shared eval set not present")
def test_every_gold_quote_is_found_in_its_normalised_document(kb_docs: dict) -> None:
    quotes = _gold_quotes()
    assert len(quotes) > 100
    flat = {name: _no_ws(doc.text) for name, doc in kb_docs.items()}
    missing = [(qid, doc, q) for qid, doc, q in quotes if _no_ws(normalise_fragment(q)) not in flat[doc]]
    assert not missing, "\n".join(f"{qid} {doc}: {q}" for qid, doc, q in missing)
