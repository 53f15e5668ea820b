"""Growers' pinyin-keyboard slips, read against the knowledge base's own words (rag_core/homophones.py)."""
from __future__ import annotations

import pytest

from rag_core.homophones import Homophones


@pytest.fixture(scope="module")
def homophones(sample_engine) -> Homophones:
    return sample_engine.homophones


@pytest.mark.parametrize("typed, meant", [
    ("打绣病的药咋个喷才对？", "打锈病的药咋个喷才对？"),
    ("小苗啥时候节顶？", "小苗啥时候截顶？"),
    ("想在地头上修个续水池，要修好大？", "想在地头上修个蓄水池，要修好大？"),
    ("坡地想种香跟草挡泥巴", "坡地想种香根草挡泥巴"),
    # jieba cuts 挖定/值穴; 挖定 stands in the text of 挖定植穴 but is no word of it
    ("下个月要挖定值穴了，穴要挖好大好深？", "下个月要挖定植穴了，穴要挖好大好深？"),
    # three characters or more are read without tones (a keyboard offers 废 for fei, 干 for gan), against everyday
    # words of the passages too (气象站)
    ("壮果废要不要先施下去？", "壮果肥要不要先施下去？"),
    ("草干膦打着咖啡叶子会咋个样？", "草甘膦打着咖啡叶子会咋个样？"),
    ("镇上气像站说一年平均20度，我家那点大概好多度？", "镇上气象站说一年平均20度，我家那点大概好多度？"),
])
def test_a_slip_of_a_kb_word_is_read_as_that_word(homophones, sample_engine, typed, meant):
    corrected, corrections = homophones.correct(typed, sample_engine.tokenizer)
    assert corrected == meant
    assert len(corrections) == 1 and corrections[0].meant in meant and corrections[0].typed in typed


@pytest.mark.parametrize("question", [
    "今年打霜冻了一片，要不要剪？",  # 今年 is a word, no slip for 近年
    "红土地咋个会越种越酸？",  # 越种 cuts no KB word: 越重 is 越/重
    "送土样去化验，好久化验一回？",  # 送土 would cut 土样, a word of the KB
    "开花那阵又热又干，花开得像星星一样",  # 花开 is a word
    "咖啡锈病咋个防？",  # nothing to put right
    "接穗要从哪种枝上剪？",  # 种 is typed zhong: its rare reading chong makes no slip for 虫枝
    "养得有鸡，鸡屎沤好了拿给咖啡，一棵放好多合适？",  # two characters keep tones: 有鸡 (you3 ji1) is no 有机 (ji1)
    "才种一年的小咖啡树，行间能不能套种玉米？",  # nor 才种 (cai2) a 采种 (cai3)
])
def test_words_and_right_spellings_are_left_alone(homophones, sample_engine, question):
    assert homophones.correct(question, sample_engine.tokenizer) == (question, ())


def test_the_answer_says_how_a_slip_was_read(sample_engine):
    """节顶 is no word of the KB: retrieval and the coverage test read 截顶, and the answer says so first."""
    answer = sample_engine.answer("小苗子想养成几个杆杆的，啥时候节顶？")
    assert answer.text.startswith("（“节顶”按“截顶”理解）")
    assert answer.covered and answer.citations
    assert answer.query == "小苗子想养成几个杆杆的，啥时候截顶？"


def test_refresh_prepares_the_builds_vocabulary_before_the_first_question(sample_cfg):
    from tests.conftest import engine_for

    engine = engine_for(sample_cfg)
    engine.refresh()
    build, homophones = engine._homophones
    assert build == engine.index.build_id and homophones.correct("节顶", engine.tokenizer)[0] == "截顶"
