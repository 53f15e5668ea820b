"""Footnotes, splitting and escaping for Telegram and WeChat."""
from __future__ import annotations

import html
import re

import pytest

from bot.formatting import (
    CITATION_RE,
    Footnote,
    footnote,
    escape_html,
    split_text,
    telegram_html,
    wechat_text,
)

LABELS = {"e76faa05#3": "第八章 主要病害识别与防治 › 咖啡锈病", "e76faa05#4": "药剂 <铜> & 用法"}
TAG_RE = re.compile(r"</?[a-z]+(?: [^<>]*)?>")
ATOM_RE = re.compile(r"\[[0-9a-f]{8}#\d+\]|\[\d+\]|&(?:#\d+|[a-z]+);|</?[a-z]+(?: [^<>]*)?>")
SAFE_TEXT_RE = re.compile(r"[^\[\]&<>]*")


def utf8(s: str) -> int:
    return len(s.encode("utf-8"))


def assert_covers(pieces: list[str], text: str) -> None:
    """The pieces are `text` in order, cut only at points where nothing but whitespace was dropped."""
    pos = 0
    for piece in pieces:
        assert piece and piece == piece.strip(), repr(piece)
        while pos < len(text) and text[pos].isspace():
            pos += 1
        assert text.startswith(piece, pos), f"piece {piece!r} not found at {pos}: {text[pos:pos + 40]!r}"
        pos += len(piece)
    assert text[pos:].strip() == ""


def assert_atoms_whole(piece: str) -> None:
    """Every '[', ']', '&', '<' and '>' in the piece belongs to a whole tag, marker or entity."""
    assert SAFE_TEXT_RE.fullmatch(ATOM_RE.sub("", piece)), f"cut atom in {piece!r}"


def assert_balanced(piece: str) -> None:
    stack: list[str] = []
    for m in re.finditer(r"<(/?)([a-z]+)", piece):
        if m.group(1):
            assert stack and stack.pop() == m.group(2), f"unbalanced {piece!r}"
        else:
            stack.append(m.group(2))
    assert not stack, f"unclosed {stack} in {piece!r}"


def test_citation_re_matches_canonical_tags_only():
    assert CITATION_RE.findall("a[e76faa05#3]b[E76FAA05#3][e76faa0#3][12]") == ["e76faa05#3"]


def test_footnote_numbers_by_first_appearance_and_collapses_repeats():
    f = footnote("锈病[e76faa05#3][e76faa05#3]。铜剂[e76faa05#4][e76faa05#3]，再说[e76faa05#4]。", LABELS)
    assert f.text == "锈病[1]。铜剂[2][1]，再说[2]。"
    assert f.footnotes == (
        Footnote(1, "e76faa05#3", LABELS["e76faa05#3"]),
        Footnote(2, "e76faa05#4", LABELS["e76faa05#4"]),
    )


def test_footnote_groups_and_spaced_runs():
    f = footnote("甲[e76faa05#3] [a1b2c3d4#0] 乙[e76faa05#3, a1b2c3d4#0]", LABELS)
    assert f.text == "甲[1][2] 乙[1][2]"


def test_footnote_unknown_id_is_its_own_label_and_plain_text_untouched():
    f = footnote("未知[ffffffff#9]", {})
    assert f.text == "未知[1]" and f.footnotes == (Footnote(1, "ffffffff#9", "ffffffff#9"),)
    assert footnote("没有引用 [注] [12]", LABELS).text == "没有引用 [注] [12]"


def test_escape_html():
    assert escape_html('a<b>&"c"') == 'a&lt;b&gt;&amp;"c"'
    assert escape_html('"x"', quote=True) == "&quot;x&quot;"


SAMPLE = (
    "<b>咖啡锈病</b>是由真菌引起的病害[e76faa05#3]，叶背出现橙黄色粉状孢子堆&amp;病斑。"
    "防治用<a href=\"https://example.org/a?b=1&amp;c=2\">波尔多液</a>或铜制剂[e76faa05#4][a1b2c3d4#0]！\n\n"
    "第二段：<b>注意安全间隔期[1][2]；雨季前喷施&lt;效果更好&gt;，每次间隔十五天，连续三次。</b>"
    "Use copper, not <i>too much</i>. 完[3]"
)


def test_split_plain_never_cuts_tags_markers_or_entities_for_any_limit():
    plain = TAG_RE.sub("", SAMPLE)
    for limit in range(20, 200):
        pieces = split_text(plain, limit, size=utf8)
        assert all(0 < utf8(p) <= limit for p in pieces)
        for piece in pieces:
            assert_atoms_whole(piece)
        assert_covers(pieces, plain)


def test_split_html_never_cuts_tags_and_keeps_elements_balanced_for_any_limit():
    for limit in range(60, 200):  # the <a href=…> tag is 44 characters, reopened in the next piece
        pieces = split_text(SAMPLE, limit, html=True)
        for piece in pieces:
            assert 0 < len(piece) <= limit
            assert_atoms_whole(piece)
            assert_balanced(piece)
        texts = [TAG_RE.sub("", p).strip() for p in pieces]
        assert_covers([t for t in texts if t], TAG_RE.sub("", SAMPLE))


def test_split_reopens_elements_across_pieces():
    pieces = split_text("<b>" + "很长的粗体文字，" * 10 + "</b>结束。", 40, html=True)
    assert len(pieces) > 2
    assert all(p.startswith("<b>") for p in pieces[:-1]) and all(p.count("</b>") == 1 for p in pieces)


def test_split_prefers_paragraphs_then_sentences_then_commas():
    text = "第一段第一句。第一段第二句。\n\n第二段，很长的一句话没有句号" + "啊" * 10
    assert split_text(text, 30) == ["第一段第一句。第一段第二句。", "第二段，很长的一句话没有句号" + "啊" * 10]
    assert split_text("甲乙丙丁。戊己庚辛，壬癸子丑寅卯", 12) == ["甲乙丙丁。戊己庚辛，", "壬癸子丑寅卯"]
    # A citation stays with its sentence, and a piece never starts with closing punctuation.
    assert split_text("锈病是真菌病害[1]。防治用铜剂[2]。", 12) == ["锈病是真菌病害[1]。", "防治用铜剂[2]。"]


def test_split_edge_cases():
    assert split_text("", 10) == [] and split_text("  \n ", 10) == []
    assert split_text("短", 10) == ["短"]
    with pytest.raises(ValueError):
        split_text("[e76faa05#3]", 5)


def long_answer(target: int, size=len) -> str:
    """A cited answer whose footnoted text (tags become "[n]") is at least `target` long."""
    sentences = [
        "咖啡锈病是云南小粒咖啡最重要的叶部病害，高温高湿季节容易流行[e76faa05#3]。",
        "发病初期叶片背面出现淡黄色小斑点，后扩大为橙黄色粉状孢子堆[e76faa05#4]。",
        "建议选用抗病品种，并在雨季来临前喷施波尔多液或铜制剂保护[a1b2c3d4#0]。",
    ]
    parts, total, i = [], 0, 0
    while total < target:
        s = sentences[i % 3] + ("\n\n" if i % 4 == 3 else "")
        parts.append(s)
        total, i = total + size(CITATION_RE.sub("[1]", s)), i + 1
    return "".join(parts)


def test_telegram_long_chinese_answer_makes_two_messages_with_sources_last():
    f = footnote(long_answer(6000), LABELS)
    assert 6000 <= len(f.text) <= 6100
    messages = telegram_html(f)
    assert len(messages) == 2
    assert all(len(m.encode("utf-16-le")) // 2 <= 4096 for m in messages)
    assert "<b>来源</b>" not in messages[0]
    assert messages[1].endswith("<b>来源</b>\n[1] 第八章 主要病害识别与防治 › 咖啡锈病\n"
                                "[2] 药剂 &lt;铜&gt; &amp; 用法\n[3] a1b2c3d4#0")
    assert messages[0].endswith("。")


def test_telegram_escapes_and_round_trips():
    text = "".join(f"第{i}条：a<b && c>d *粗* _斜_ `码` [e76faa05#3]。\n" for i in range(400))
    f = footnote(text, LABELS)
    messages = telegram_html(f, limit=1000)
    assert len(messages) > 3
    body, sources = messages[-1].split("\n\n<b>来源</b>\n")
    pieces = messages[:-1] + [body]
    for piece in pieces:
        assert len(piece) <= 1000 and "<" not in piece and ">" not in piece
        assert_atoms_whole(piece)
    assert_covers([html.unescape(p) for p in pieces], f.text)
    assert sources == "[1] 第八章 主要病害识别与防治 › 咖啡锈病"


def test_telegram_counts_utf16_units():
    f = footnote("☕🌱" * 3000, {})  # each emoji is 2 UTF-16 code units
    messages = telegram_html(f, limit=4096)
    assert all(len(m.encode("utf-16-le")) // 2 <= 4096 for m in messages)
    assert "".join(messages) == f.text


def test_telegram_sources_too_long_for_last_message_go_alone():
    f = footnote("答" * 4000 + "[e76faa05#3]", {"e76faa05#3": "章节" * 100})
    messages = telegram_html(f)
    assert len(messages) == 2 and messages[1].startswith("<b>来源</b>")


def test_wechat_splits_by_bytes_without_cutting_tags_or_characters():
    f = footnote(long_answer(5000, utf8), LABELS)
    assert 5000 <= utf8(f.text) <= 5300
    pieces = wechat_text(f)
    assert all(utf8(p) <= 2048 for p in pieces) and len(pieces) >= 3
    body, tail = pieces[-1].split("\n\n来源：\n")
    for piece in pieces[:-1] + [body]:
        assert_atoms_whole(piece)
        assert "\ufffd" not in piece.encode("utf-8").decode("utf-8", errors="replace")
    assert_covers(pieces[:-1] + [body], f.text)
    assert tail.endswith("[3] a1b2c3d4#0\n回复“原文1”查看第1条原文")


def test_wechat_without_footnotes_has_no_sources_or_hint():
    assert wechat_text(footnote("抱歉，知识库没有覆盖这个问题。", {})) == ["抱歉，知识库没有覆盖这个问题。"]
