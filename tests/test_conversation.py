"""Conversations as a grower has them (issue 13): a new question after another topic is searched as asked, an
elliptical follow-up carries the user's topic, extractive answers answer, and what the knowledge base lacks is refused
whatever the topic. Cases written for this file, not taken from the gold sets."""
from __future__ import annotations

import re

import pytest

from rag_core.eval.gold import load_gold
from rag_core.generate import EXTRACTIVE_HEADER, not_covered
from rag_core.history import carry_topic, classify, leans_back, rewrite_query
from rag_core.pipeline import Options
from rag_core.records import Chunk, Hit, Turn
from rag_core.relevance import missing_fact, unknown_words
from tests.conftest import SHARED_EVAL

PRUNING = [Turn("user", "咖啡树主干长到多高要打顶？"),
           Turn("assistant", "以下内容摘自知识库：\n单干整形的植株长到 1.6–1.8 m 时打顶，剪口离节 1 cm[07179cda#9]")]
RUST = [Turn("user", "咖啡锈病怎么防治？"),
        Turn("assistant", "以下内容摘自知识库：\n选用抗病品种：新植或更新改造时选用卡蒂姆、萨奇姆等抗锈品种；铁皮卡、波旁等感病品种"
                          "只宜在锈病较轻的较高海拔地块小面积种植。[fb82b28b#11]")]


@pytest.mark.parametrize("question", ["成龄咖啡树一年施几次肥，每株施多少？", "湿法加工发酵要多长时间？",
                                      "咖啡果小蠹怎么防治？", "新种的咖啡苗要遮荫吗？"])
def test_a_question_naming_its_own_topic_is_searched_as_asked(sample_engine, question):
    stats = sample_engine.term_stats
    assert classify(question, sample_engine.tokenizer, stats).kind == "new"
    assert rewrite_query(question, PRUNING, sample_engine.tokenizer, 2, stats=stats) == question


def test_a_name_jieba_cuts_in_two_that_the_kb_writes_whole_is_a_topic_of_its_own(sample_engine):
    """防雹网 is cut 防雹 + 网 and is in no lexicon: after a soil question, asking about the hail net's mesh is a new
    question (it was read as a follow-up and answered with soil sampling); "要打几次" still continues."""
    stats, soil = sample_engine.term_stats, [Turn("user", "咖啡地土壤好久测一次？"), Turn("assistant", "同一地块每 2～3 年检测一次。")]
    for question in ("网眼要选好大的防雹网？", "想架防雹网，网眼要选好大的？"):
        assert classify(question, sample_engine.tokenizer, stats).kind == "new"
        assert rewrite_query(question, soil, sample_engine.tokenizer, 2, stats=stats) == question
    assert classify("要打几次？", sample_engine.tokenizer, stats).kind == "followup"


def test_a_demonstrative_for_what_the_question_said_before_a_space_points_nowhere_back(sample_engine):
    """Growers type a space for a comma. A demonstrative whose head the question said before it (拿去杯测打了86分 这个分),
    or that sums up the words it follows (开花采收这些, 看影子那个办法), names what the question said; after a cultivar
    question it is searched as asked (round 25's conv25 read both as follow-ups and carried 萨奇姆, 铁皮卡). 它, and a
    head the question never said (也照这个浓度喷), still point back."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    for question in ("拿去杯测打了86分 这个分算哪个档次", "800米河谷的园子 开花采收这些要比一般的早好久",
                     "想估下园子的荫蔽度 用正午看影子那个办法 几点去看合适"):
        assert classify(question, tok, stats).kind == "new", question
    for question in ("苗圃头的小苗也长了 也照这个浓度喷？", "植保站喊挂诱捕器监测 里头装哪样来诱它", "要是剪多了 那个位置还长不长"):
        assert classify(question, tok, stats).kind == "followup", question


def test_a_bare_demonstrative_after_a_figure_the_question_states_sums_it_up(sample_engine):
    """荫蔽度30%到40% 这个到底是啥意思: 这个 is the figure just typed, so the question stands alone (round 37's conv37
    read it as a follow-up after a pruning exchange and carried 截干, ranking its passage 5th; alone it is 1st). A
    noun after the demonstrative (施了3斤 这个药) is still the conversation's, and the space before a figure's clause
    is a comma as any other (发锈病 这种树: the tree just described)."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    for question in ("书上老是说荫蔽度30%到40% 这个到底是啥意思", "土壤化验出来有效磷8个毫克每公斤 速效钾90 这个算低不？",
                     "年年头一个发锈病 这种树咋个处理"):
        assert classify(question, tok, stats).kind == "new", question
    pruning = [Turn("user", "老树截干 离地留好高"), Turn("assistant", "离地30～40厘米截，当天涂波尔多浆。")]
    question = "书上老是说荫蔽度30%到40% 这个到底是啥意思"
    assert rewrite_query(question, pruning, tok, 2, stats=stats) == question
    assert classify("去年打了两次 这个药还要打几次", tok, stats).kind == "followup"


def test_a_demonstrative_after_a_place_describes_what_is_there(sample_engine):
    """苗圃里那些小苗 are the seedlings in the nursery, not the conversation's: after a harvest exchange in the same month
    (12月采果人手不够…), 12月份苗圃里那些小苗要咋个防寒 was read as a follow-up and answered with the picking rounds
    (round 31's dev31). Without a place the demonstrative still points back, and a question naming little after the
    place (树上那些还要不要) still continues."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    for question in ("12月份苗圃里那些小苗要咋个防寒", "卡蒂姆园子里那种比周围高出一截的杂株，要咋个处理？"):
        assert classify(question, tok, stats).kind == "new", question
    harvest = [Turn("user", "12月采果人手不够，隔好多天采一轮要得"),
               Turn("assistant", "盛采期每7～10天采一轮，只采完熟红果。[339eb071#10]")]
    assert rewrite_query("12月份苗圃里那些小苗要咋个防寒", harvest, tok, 2, stats=stats) == "12月份苗圃里那些小苗要咋个防寒"
    for question in ("那些小苗要咋个防寒", "树上那些还要不要"):
        assert classify(question, tok, stats).kind == "followup", question


@pytest.mark.parametrize("question", ["是不是还要分几个篮子装", "是整棵砍掉还是只锯那一截？", "好久点火？熏到啥时候收？"])
def test_words_cut_out_of_grammar_name_no_topic(sample_engine, question):
    """jieba's search mode cuts 不是 out of 是不是, and 还要, 最多 are a conjunction and an adverb: specific to a few
    passages of the KB's written style, they counted as topic words, and a follow-up naming nothing else
    (是不是还要分几个篮子装 after 采果一把捋下来: round 26's conv26) was searched as a new question. Only content words
    (nouns, verbs, adjectives) count."""
    stats = sample_engine.term_stats
    assert classify(question, sample_engine.tokenizer, stats).kind != "new"


@pytest.mark.parametrize("question", ["那用什么药？什么时候喷？", "它要打几次？", "这个病会传染吗？", "那老树呢？"])
def test_an_elliptical_follow_up_carries_the_users_topic(sample_engine, question):
    stats = sample_engine.term_stats
    assert classify(question, sample_engine.tokenizer, stats).kind == "followup"
    rewritten = rewrite_query(question, RUST, sample_engine.tokenizer, 2, stats=stats)
    assert rewritten.startswith("咖啡锈病")  # the user's own topic first
    carried = rewritten[: rewritten.index(question.lstrip("那"))].split()
    assert len(carried) <= 3  # the user's term and at most two from the reply: the reply does not swamp it


@pytest.mark.parametrize("question", ["喷完以后要隔几天才能摘果子？", "第一年呢？要打几次？", "苗圃里的小苗也得了，药也是一样兑法？"])
def test_a_question_continuing_the_last_action_or_asking_what_about_mid_sentence_leans_back(sample_engine, question):
    # "喷完以后…" omits what was done (the previous turn's spraying); "…呢？" asks "and what about" even when a
    # second clause follows; "也是一样…" asks whether it is the same as before. Each names little, or a topic that
    # only continues the last turn (苗圃): never "new"
    stats = sample_engine.term_stats
    assert classify(question, sample_engine.tokenizer, stats).kind != "new"
    assert rewrite_query(question, RUST, sample_engine.tokenizer, 2, stats=stats).startswith("咖啡锈病")


@pytest.mark.parametrize("question", ["挖好塘以后底肥咋个下？", "移进袋子以后遮阴要遮好多？"])
def test_a_question_opening_with_the_step_just_done_continues_the_process(sample_engine, question):
    """"挖好塘以后…", "移进袋子以后…": the step the last exchange was about, then what comes next. Such a question
    leans back though it names a topic of its own (底肥, 遮阴), as "喷完以后" does (round 22's blind wave: d21-015
    was searched as a shade question of its own; over every gold follow-up and switch, 15 follow-ups and no switch
    read this way)."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    assert classify(question, tok, stats).kind == "ambiguous"
    history = [Turn("user", "沙床上的苗长成蝴蝶那个样子了，定植穴要挖多大？"), Turn("assistant", "定植穴长宽深各 60 厘米。")]
    rewritten = carry_topic(question, history, tok, 2, stats)
    assert rewritten.endswith(question) and "定植" in rewritten and "沙床" in rewritten, rewritten


def test_the_rust_spray_follow_up_finds_the_chemical_control_passage(sample_engine):
    answer = sample_engine.answer("那用什么药？什么时候喷？", RUST)
    shown = answer.text + "".join(h.chunk.text for h in answer.evidence)
    assert re.search(r"铜制剂|波尔多液|三唑", shown), answer.text
    # the chemical-control section itself, first and cited: not the reply's cultural control, nor a variety chapter
    # that mentions spraying in passing (the reply's words 抗病品种/抗锈品种 are not carried: the user asks past them)
    assert "抗病品种" not in answer.rewritten_query
    assert "化学防治" in answer.evidence[0].chunk.section
    assert any("化学防治" in c.section for c in answer.citations), answer.text
    # and it answers: a product with its dose (not only 轮换用药, which names a class of drugs) and when to spray it
    assert re.search(r"波尔多液|可湿性粉剂|倍液", answer.text), answer.text
    # when: the months (6–7 月雨季初期, what the shipped e5 ranker leads with: bench/results/chat-transcript.md) or, from
    # the general chemical-control passage this test's e5-less ranker leads with since the faq_chunk feature, the
    # stage of the disease each kind of product is for (发病前用保护剂、发病初期用内吸剂)
    assert re.search(r"\d+\s*[～~–-]\s*\d+\s*月雨季初期|发病前[^。]*发病初期", answer.text), answer.text


def test_a_follow_up_of_a_follow_up_keeps_the_conversations_topic(sample_engine):
    stats = sample_engine.term_stats
    history = [*RUST, Turn("user", "那用什么药？什么时候喷？"),
               Turn("assistant", "以下内容摘自知识库：\n发病前喷铜制剂保护，发病初期用三唑类药剂。[fb82b28b#14]")]
    rewritten = rewrite_query("要打几次？", history, sample_engine.tokenizer, 2, stats=stats)
    assert rewritten.startswith("咖啡锈病") and "时候" not in rewritten  # 时候: common Chinese, not a topic
    # a new question ends the chain: its follow-up does not reach back past it
    history = [*RUST, *PRUNING]
    assert "锈病" not in rewrite_query("要剪几次？", history, sample_engine.tokenizer, 2, stats=stats)


def test_a_bare_follow_up_of_a_follow_up_searches_in_the_conversations_chapter(sample_engine):
    # "要打几次？" names little: what it finds alone (spraying FAQ) says nothing about a topic switch, and the question
    # it follows ("那用什么药？") is read as it was read then, inside the rust chapter
    history = [*RUST, Turn("user", "那用什么药？什么时候喷？"),
               Turn("assistant", "以下内容摘自知识库：\n发病前喷铜制剂保护，发病初期用三唑类药剂。[fb82b28b#14]")]
    # it found the rust chapter first, or the IPM regulation's timing rule that names rust and its count (连喷 2 次)
    evidence = sample_engine.search("要打几次？", history).evidence
    first = evidence[0].chunk
    assert "锈病" in first.section or ("锈病" in first.text and "连喷" in first.text), [h.chunk.section for h in evidence]


def test_a_new_question_after_another_topic_ranks_as_it_does_alone(sample_engine):
    """The issue's two questions after a pruning turn. 湿法加工发酵要多长时间 ranks exactly as alone. 成龄咖啡树一年施几次
    肥 names no domain term (施/几次/肥), so it is also read in the conversation's context (`Engine._continue`,
    always): its own best passages keep the lead and no pruning passage comes in, while the contextual reading may
    reorder the places after them among the question's own passages."""
    question = "湿法加工发酵要多长时间？"
    assert [h.chunk.id for h in sample_engine.search(question, PRUNING).evidence] == \
        [h.chunk.id for h in sample_engine.search(question).evidence]
    question = "成龄咖啡树一年施几次肥，每株施多少？"
    alone = [h.chunk.id for h in sample_engine.search(question).evidence]
    after = sample_engine.search(question, PRUNING).evidence
    assert [h.chunk.id for h in after[:2]] == alone[:2]
    assert {h.chunk.id for h in after[:3]} <= set(alone)
    assert not any("修剪" in h.chunk.title or "打顶" in h.chunk.text for h in after), [h.chunk.id for h in after]


def test_a_follow_up_only_by_naming_little_keeps_its_own_best_passage(sample_engine):
    question = "冬天地里的水咋个管？"
    # no 它, no 那…, no …呢: it names little the KB knows, so it is read as a follow-up of the pruning turn, but it
    # may well be a new question in a farmer's words; its best passage asked alone stays in the top 5 (冬天咖啡地的水,
    # naming the crop's field, is put whole: test_a_question_that_names_little_but_the_crop_itself_is_put_whole)
    assert classify(question, sample_engine.tokenizer, sample_engine.term_stats).kind == "followup"
    alone = sample_engine.search(question).evidence
    after = sample_engine.search(question, PRUNING).evidence
    assert alone[0].chunk.id in {h.chunk.id for h in after}


def test_a_new_question_in_the_conversations_documents_is_also_read_in_its_context(sample_engine):
    # 排水沟 names its own topic, but after "the rainy season floods my field" its passages and the previous
    # question's share documents: the conversation continues, and a rainy-season passage joins the question's own
    history = [Turn("user", "今年雨季雨水特别多，咖啡地里老是积水"), Turn("assistant", "以下内容摘自知识库：\n雨季要及时排水。")]
    question = "排水沟要挖多宽？"
    assert classify(question, sample_engine.tokenizer, sample_engine.term_stats).kind == "new"
    alone = sample_engine.search(question).evidence
    after = sample_engine.search(question, history).evidence
    assert after[0].chunk.id == alone[0].chunk.id  # its own best passage stays first
    # and a passage of the reading in context, which the question alone does not find, joins its evidence (the
    # rainy-season check of the drains, fourth with the ranker trained on every read set; third before)
    own = {h.chunk.id for h in alone}
    assert any(h.chunk.id not in own for h in after), [h.chunk.section for h in after]


@pytest.mark.parametrize("question", ["那咖啡锈病怎么防治？", "那湿法加工发酵要多长时间？"])
def test_a_new_question_opened_with_na_keeps_its_own_passages(sample_engine, question):
    # "那…" leans on the previous turn, yet the question names its own topic: it is ambiguous, and its own
    # passages stay in the top 5 next to the rewritten question's (the old rule carried the pruning topic over and
    # ranked the pruning chapter first, the question's own passages out of sight)
    assert classify(question, sample_engine.tokenizer, sample_engine.term_stats).kind == "ambiguous"
    alone = [h.chunk.id for h in sample_engine.search(question).evidence]
    after = [h.chunk.id for h in sample_engine.search(question, PRUNING).evidence]
    assert set(alone[:2]) <= set(after)
    answer = sample_engine.answer(question, PRUNING)
    assert {c.id for c in answer.citations} & set(alone[:2]), answer.text


@pytest.mark.parametrize("previous, question", [("咖啡锈病怎么防治？", "那牛粪沤好了一棵树放多少？"),
                                                ("霜冻以后咖啡叶子全黑了", "那蚜虫多了要打什么药？")])
def test_a_leaning_question_whose_passages_lie_outside_the_conversation_ranks_them_first(sample_engine, previous, question):
    # "那…" leans on the last turn, but none of the passages the question finds alone is in the documents the previous
    # question finds: a new topic opened the way people talk, its own best passage first (the previous topic's
    # chapter came first before)
    history = [Turn("user", previous), Turn("assistant", "以下内容摘自知识库：\n先说到这里。")]
    assert classify(question, sample_engine.tokenizer, sample_engine.term_stats).kind == "ambiguous"
    alone = sample_engine.search(question).evidence
    after = sample_engine.search(question, history).evidence
    assert after[0].chunk.id == alone[0].chunk.id, [h.chunk.section for h in after]


@pytest.mark.parametrize("question", ["对了，成龄咖啡树一年施几次肥？", "还有，湿法加工发酵要多长时间？", "另外，咖啡锈病怎么防治？"])
def test_a_question_opened_as_another_question_is_searched_as_asked(sample_engine, question):
    # "对了，…", "还有，…" announce another question (by the way): naming its own topic, it is new, and finds after
    # the pruning exchange exactly what it finds alone (还 alone leans back: "还要打几次？")
    assert classify(question, sample_engine.tokenizer, sample_engine.term_stats).kind == "new"
    assert classify("还要打几次？", sample_engine.tokenizer, sample_engine.term_stats).kind != "new"
    alone = [h.chunk.id for h in sample_engine.search(question).evidence]
    after = [h.chunk.id for h in sample_engine.search(question, PRUNING).evidence]
    assert after[:3] == alone[:3]


@pytest.mark.parametrize("question", ["那咖啡地土太酸，撒石灰一亩撒好多？", "那咖啡树开花的时候天干，要浇水不？"])
def test_a_leaning_question_that_names_the_crop_again_is_put_whole(sample_engine, question):
    # a follow-up leaves the crop out ("那要打几次？"); "那…给咖啡…" says it again, as a question put whole does: new,
    # and searched as asked after the pruning exchange (咖啡锈病 names a topic, not the crop: that one stays ambiguous)
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    assert classify(question, tok, stats).kind == "new"
    assert classify("那咖啡锈病怎么防治？", tok, stats).kind == "ambiguous"
    assert classify("那花开过以后还要浇不？", tok, stats).kind != "new"  # 不 is in most passages, but is no word
    alone = [h.chunk.id for h in sample_engine.search(question).evidence]
    after = [h.chunk.id for h in sample_engine.search(question, PRUNING).evidence]
    assert after[:3] == alone[:3]


CUPPING = [Turn("user", "杯测的时候水温要好多度？"), Turn("assistant", "注水约 93 ℃，浸泡 3–5 分钟后破渣闻湿香。")]


@pytest.mark.parametrize("question", ["咖啡地里积了水，好久要排干", "夜里风大得很，咖啡树倒了几棵，要咋个弄"])
def test_a_question_that_names_little_but_the_crop_itself_is_put_whole(sample_engine, question):
    # no domain term of its own, yet it names the crop or its field (咖啡地, 咖啡树) as its subject: a follow-up leaves
    # the crop out ("积了水，好久要排干"), so this is a question of its own, and after the cupping exchange its own
    # best passage stays first (the cupping passages came first before: 24 gold switches of this shape against 4
    # follow-ups); a next step asked ("砍稀了以后咖啡要咋个管？") still continues
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    assert classify(question, tok, stats).kind == "new"
    assert classify("积了水，好久要排干", tok, stats).kind == "followup"
    assert classify("砍稀了以后咖啡要咋个管？", tok, stats).kind == "followup"
    alone = sample_engine.search(question).evidence
    after = sample_engine.search(question, CUPPING).evidence
    assert after[0].chunk.id == alone[0].chunk.id, [h.chunk.section for h in after]


def test_an_ambiguous_follow_up_still_finds_the_previous_topic(sample_engine):
    history = [Turn("user", "叶子上有圆斑，中间灰白、外圈褐色，是什么病？"),
               Turn("assistant", "以下内容摘自知识库：\n这是咖啡褐眼斑病，由咖啡尾孢菌引起。[fb82b28b#20]")]
    question = "那苗圃里的小苗一般几月份容易得？"
    assert classify(question, sample_engine.tokenizer, sample_engine.term_stats).kind == "ambiguous"
    after = sample_engine.search(question, history).evidence
    assert any("褐眼斑病" in h.chunk.text for h in after[:3])


def test_extractive_answers_never_show_a_question_line_or_a_table_row(sample_engine):
    for question in ("咖啡树叶子发黄是缺什么肥", "咖啡树的枝条怎么修剪", "一分枝和二分枝怎么处理"):
        answer = sample_engine.answer(question)
        body = answer.text.removeprefix(EXTRACTIVE_HEADER)
        assert "问：" not in body and "|" not in body and "---" not in body, answer.text
    leaf = sample_engine.answer("咖啡树叶子发黄是缺什么肥").text
    assert "缺氮" in leaf or "缺镁" in leaf


def test_a_table_row_shows_each_figure_with_its_column(sample_engine):
    """A figure shown without its column (成龄结果树：40–50；15–20；45–55) says nothing on a phone; a row of a passage
    that opens inside a table, whose header is elsewhere, is left out rather than shown so."""
    from rag_core.generate import extractive_answer

    header = "| 树龄阶段 | 年施纯氮 N（g/株） | K₂O（g/株） | 施肥位置 |\n|---|---|---|---|\n"
    row = "| 成龄结果树（中等产量） | 40–50 | 45–55 | 树冠滴水线环沟 |\n"
    whole = Hit(Chunk("f" * 8, 27, "fertilization.md", "施肥", "不同树龄咖啡树的施肥量", header + row, 0, 90), 1.0)
    text, _ = extractive_answer("成龄结果树每株施多少纯氮？", [whole], sample_engine.tokenizer)
    assert "成龄结果树（中等产量）：年施纯氮 N（g/株） 40–50；K₂O（g/株） 45–55；施肥位置 树冠滴水线环沟。" in text, text
    headless = Hit(Chunk("f" * 8, 28, "fertilization.md", "施肥", "不同树龄咖啡树的施肥量",
                         row + "成龄树每年施肥三次，以壮果肥为主。", 0, 60), 1.0)
    text, _ = extractive_answer("成龄结果树每株施多少纯氮？", [headless], sample_engine.tokenizer)
    assert "40–50" not in text and "壮果肥" in text, text


def test_the_rows_of_one_table_are_no_repeats_and_read_one_to_a_line(sample_engine):
    """The spacing table's rows share their words and differ in their figures: each is an answer (单干 370 株, 肥地
    278～309 株), not a repeat of the first, and each reads on a line of its own, as on the page."""
    from rag_core.generate import extractive_answer

    table = ("| 品种类型 | 整形方式 | 行距（m） | 株距（m） | 每亩株数（约） |\n|---|---|---|---|---|\n"
             "| 卡蒂姆、萨奇姆等矮秆紧凑型 | 单干 | 1.8 | 1.0 | 370 |\n"
             "| 卡蒂姆、萨奇姆等矮秆紧凑型 | 单干（肥地） | 1.8～2.0 | 1.2 | 278～309 |\n")
    hit = Hit(Chunk("5" * 8, 33, "establishment_regulation.txt", "建园", "9 种植密度与株行距 › 9.2 推荐株行距", table, 0, 200), 1.0)
    text, cited = extractive_answer("卡蒂姆一亩地栽好多棵合适？", [hit], sample_engine.tokenizer, lead=1)
    assert cited == [hit.chunk.id]
    assert "每亩株数（约） 370。\n卡蒂姆、萨奇姆等矮秆紧凑型：整形方式 单干（肥地）" in text, text


def test_a_lead_in_shows_its_list_one_item_to_a_line(sample_engine):
    """"咖啡园喷施杀菌剂时应做到：" answers nothing without its list: the items follow it (numbered, one to a line,
    the last closed with a full stop) as far as the answer has room, the first always; an item's second sentence stays
    on its line; a PDF's wrapped prose after a lead-in joins it as prose."""
    from rag_core.generate import extractive_answer

    text = ("咖啡园喷施杀菌剂时应做到：\n1. 按产品标签推荐浓度配药，不随意加大浓度；\n"
            "2. 叶片正反两面都要喷到，防治锈病尤其要喷湿叶背；\n3. 喷药后 4–6 小时内遇中到大雨，应在天晴后补喷。这样药效才够。\n"
            "目前在咖啡上取得登记的农药品种有限。")
    hit = Hit(Chunk("d" * 8, 5, "diseases.md", "病害", "四、咖啡病害化学防治的基本要求", text, 0, len(text)), 1.0)
    whole, cited = extractive_answer("喷杀菌剂时应做到哪些？", [hit], sample_engine.tokenizer, lead=1)
    assert cited == [hit.chunk.id]
    assert ("咖啡园喷施杀菌剂时应做到：\n①按产品标签推荐浓度配药，不随意加大浓度；\n②叶片正反两面都要喷到，防治锈病尤其要喷湿叶背；"
            "\n③喷药后 4–6 小时内遇中到大雨，应在天晴后补喷。这样药效才够。") in whole, whole
    assert "做到。" not in whole
    short, _ = extractive_answer("喷杀菌剂时应做到哪些？", [hit], sample_engine.tokenizer, budget=30, lead=1)
    assert "应做到：\n①按产品标签推荐浓度配药，不随意加大浓度。[" in short, short  # the first item, whatever the room
    wrapped = ("一类缺陷及其换算（几粒折合 1 个完整缺陷）：\n全黑豆 1 粒；全酸豆 1 粒；霉变豆 1 粒；\n"
               "异物 1 个；严重虫蛀豆 5 粒。\n二类缺陷及其换算：\n部分黑豆 3 粒。")
    pdf = Hit(Chunk("c" * 8, 7, "quality.pdf", "质量", "生豆缺陷", wrapped, 0, len(wrapped)), 1.0)
    grading, _ = extractive_answer("一类缺陷及其换算是怎样的？", [pdf], sample_engine.tokenizer, lead=1)
    assert "一类缺陷及其换算（几粒折合 1 个完整缺陷）：全黑豆 1 粒；全酸豆 1 粒；霉变豆 1 粒；异物 1 个；严重虫蛀豆 5 粒。" in grading, grading


def test_a_question_about_bearing_trees_is_not_answered_with_the_young_trees_rates(sample_engine):
    """The rates passage gives both stages: a question naming one (成龄) gets its sentences, not the other's
    (定植第 1 年的咖啡幼树…每次每株用尿素约 10 g); a question naming neither, or both, gets whatever answers it."""
    from rag_core.generate import extractive_answer

    text = ("以单质肥料计，一株年施纯氮约 50 g 的成龄树，全年约需尿素 110 g、过磷酸钙 150 g、氯化钾 90 g。"
            "定植第 1 年的咖啡幼树，在定植成活后开始追肥，每次每株用尿素约 10 g，雨季内每隔 1–1.5 个月一次。")
    hit = Hit(Chunk("9" * 8, 28, "fertilization.md", "施肥", "二、不同树龄咖啡树的施肥量", text, 0, 120), 1.0)
    mature, _ = extractive_answer("成龄咖啡树每株施多少尿素？", [hit], sample_engine.tokenizer, lead=1)
    assert "110 g" in mature and "幼树" not in mature, mature
    young, _ = extractive_answer("定植第 1 年的幼树每次每株施多少尿素？", [hit], sample_engine.tokenizer, lead=1)
    assert "10 g" in young and "成龄树" not in young, young
    either, _ = extractive_answer("咖啡树每株施多少尿素？", [hit], sample_engine.tokenizer, lead=1)
    assert "幼树" in either and "成龄树" in either, either


def test_what_to_spray_is_answered_by_a_product_with_its_dose_not_by_a_chemical_control_heading(sample_engine):
    """The ranker's first passage sits under 化学防治 but only says to alternate classes of drugs: the answer to 用什么药
    needs the sentence naming a product with its dose, from the next passage, cited on its own."""
    from rag_core.generate import extractive_answer

    section = "第八章 主要病害识别与防治 › 第二节 咖啡锈病 › （三）化学防治"
    rotate = Hit(Chunk("b" * 8, 15, "diseases.md", "病害", section, "轮换用药：同一季节内铜制剂与三唑类药剂交替使用。", 0, 30), 3.0)
    product = Hit(Chunk("b" * 8, 14, "diseases.md", "病害", section,
                        "发病初期治疗：改用 25% 三唑酮可湿性粉剂 1000–1500 倍液，间隔 15–20 天。", 30, 80), 1.0)
    text, cited = extractive_answer("咖啡锈病用什么药？", [rotate, product], sample_engine.tokenizer, lead=1)
    assert cited == [rotate.chunk.id, product.chunk.id] and "1000–1500 倍液" in text, text


def test_a_question_with_two_asks_gets_a_cited_sentence_for_each(sample_engine):
    answer = sample_engine.answer("咖啡锈病用什么药？什么时候喷？")
    assert re.search(r"铜制剂|波尔多液|三唑", answer.text)
    assert re.search(r"\d+\s*[～~–-]?\s*\d*\s*月", answer.text)  # when: a month
    assert answer.citations


# Out of scope in many ways: brands, prices, forecasts, paperwork, other crops, unknown chemicals, consumer coffee.
OUT_OF_SCOPE = ["咖啡烘焙机买什么牌子好？", "今年小粒咖啡生豆多少钱一吨？", "后天保山会不会下冰雹？",
                "合作社出口咖啡要办哪些手续？", "猕猴桃的溃疡病怎么治？", "用阿维菌素打咖啡蚜虫兑多少倍？",
                "咖啡因对失眠的人影响大吗？", "申请小额贷款种咖啡要什么条件？"]


def test_out_of_scope_questions_are_refused_with_what_is_missing(sample_engine):
    refused = [q for q in OUT_OF_SCOPE if not sample_engine.answer(q).covered]
    assert len(refused) >= 6, set(OUT_OF_SCOPE) - set(refused)
    answer = sample_engine.answer("今年小粒咖啡生豆多少钱一吨？")
    assert not answer.covered and not answer.citations and ("价格" in answer.text or "多少钱" in answer.text)


def test_unknown_words_come_from_the_corpus_not_a_list(sample_engine):
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    assert any("贷款" in w for w in unknown_words("申请小额贷款种咖啡要什么条件？", tok, stats))
    assert unknown_words("咖啡锈病怎么防治？", tok, stats) == []
    assert unknown_words("叶子背面有黄粉咋办", tok, stats) == []  # a growers' word the synonym table maps


def test_a_price_question_is_answered_only_by_evidence_holding_a_price(sample_engine):
    hits = sample_engine.search("氯化钾和硫酸钾哪个价格便宜").evidence
    assert missing_fact("生豆多少钱一斤", hits) == "价格"
    priced = [type(h)(type(h.chunk)(**{**h.chunk.__dict__, "text": "生豆每公斤 30 元。"}), h.score) for h in hits[:1]]
    assert missing_fact("生豆多少钱一斤", priced) == ""


@pytest.mark.slow
def test_answerable_dev_questions_are_rarely_refused(sample_engine):
    items = [i for i in load_gold(SHARED_EVAL / "dev.jsonl") if i.answerable]
    refused = [i.id for i in items if not sample_engine.answer(i.question).covered]
    assert len(refused) <= 0.03 * len(items), refused


async def test_turns_older_than_the_limit_do_not_steer_a_follow_up(sample_engine, tmp_path):
    from bot.history_store import HistoryStore
    from bot.service import ChatService

    now = [__import__("time").time() - 4 * 3600]  # the rust exchange happened four hours ago
    store = await HistoryStore.open(tmp_path / "h.sqlite3", clock=lambda: now[0])
    seen: list[list[Turn]] = []

    class Recording:
        def __getattr__(self, name):
            return getattr(sample_engine, name)

        def answer(self, question, history, **kw):
            seen.append(list(history))
            return sample_engine.answer(question, history, **kw)

    try:
        for turn in RUST:
            await store.add_turn("telegram", "c1", turn.role, turn.content)
        now[0] += 4 * 3600
        service = ChatService(sample_engine.cfg, Recording(), store)
        await service.ask("telegram", "c1", "那要打几次？")
        assert seen[-1] == []  # 180 minutes by default: the old exchange is not carried
        await service.ask("telegram", "c1", "那老树呢？")
        assert [t.role for t in seen[-1]] == ["user", "assistant"]  # the fresh exchange is
    finally:
        await store.close()


def test_an_agrochemical_the_kb_never_names_is_refused_even_beside_a_known_pest(sample_engine):
    answer = sample_engine.answer("用阿维菌素打咖啡蚜虫兑多少倍？")
    assert not answer.covered and "阿维菌素" in answer.text and not answer.citations


def test_asked_facts_need_their_kind_of_answer_in_the_evidence(sample_engine):
    hits = sample_engine.search("卡蒂姆是怎么来的").evidence
    assert missing_fact("卡蒂姆是哪一年育成的？", hits) in ("年份", "")
    paper = sample_engine.search("合作社办有机认证要什么手续").evidence
    assert missing_fact("合作社办有机认证要什么手续", paper) == "办理手续"  # the manual never says "认证"


def test_a_follow_up_stays_with_the_documents_of_the_previous_question(sample_engine):
    previous = {h.chunk.docid for h in sample_engine.search(RUST[0].content).evidence[:2]}
    result = sample_engine.search("那要打几次？", RUST)
    assert result.rewritten_query != "那要打几次？"
    assert result.evidence[0].chunk.docid in previous
    docs = [h.chunk.docid in previous for h in result.evidence]
    # those documents lead and hold most of the evidence; a passage of another that states the count for the same
    # disease (the IPM regulation's 9.2: 咖啡锈病…连喷 2–3 次) may come second, before the chapter's other lines (since
    # round 29's figure_words feature; round 30's retrained rankers put it there)
    assert docs[0] and sum(docs) >= 3
    # the first states how many sprays: since round 36's chunking (no cut at a semicolon) the chemical-control
    # section is one passage, with the copper spray's count and the triazoles' both
    first = result.evidence[0].chunk.text
    assert "连喷 2–3 次" in first and "连喷 2 次" in first, first


def test_a_how_many_question_without_a_number_in_the_evidence_says_so(sample_engine):
    from rag_core.generate import NO_NUMBER, extractive_answer

    hits = sample_engine.search("咖啡锈病怎么防治").evidence
    wordy = [type(h)(type(h.chunk)(**{**h.chunk.__dict__, "text": "锈病要以预防为主，选用抗病品种，修剪通风。"}), h.score)
             for h in hits[:1]]
    text, cited = extractive_answer("锈病要打几次药？", wordy, sample_engine.tokenizer)
    assert cited and text.endswith(NO_NUMBER)
    text, _ = extractive_answer("锈病怎么防治？", wordy, sample_engine.tokenizer)
    assert NO_NUMBER not in text  # no number was asked for


def test_a_follow_up_in_plain_words_has_the_previous_question_and_the_reply_without_tags():
    from rag_core.history import conversation_text

    text = conversation_text("那用什么药？", RUST)
    assert text.startswith("咖啡锈病怎么防治？ 选用抗病品种") and text.endswith(" 那用什么药？")
    assert "[" not in text and EXTRACTIVE_HEADER not in text
    assert conversation_text("那用什么药？", []) == "那用什么药？"


def test_how_to_control_gets_the_cultural_and_the_chemical_section(sample_engine):
    # "怎么防治" is answered by each control section under the same heading: not by the cultural one alone; the
    # ranker may lead with a second section of them (田间监测与防治指标, when it cannot tell the two apart), and the
    # answer stays short enough for a phone. The shipped ranker (with e5 features) leads with the cultural section
    # and the answer cites it and the chemical one (bench/results/chat-transcript.md). The fallback these tests run
    # (no e5) leads, since round 35's hidden-layer ranker, with the chapter's general principle (预防为主、综合防治)
    # just ahead of the chemical section: the answer cites the chemical section, and the cultural one is in its evidence
    answer = sample_engine.answer("咖啡锈病怎么防治？")
    leaves = [c.section.rpartition(" › ")[2] for c in answer.citations]
    assert any("化学防治" in leaf for leaf in leaves), answer.text
    assert any(h.chunk.section.endswith("（一）农业防治") and "锈病" in h.chunk.section for h in answer.evidence)
    assert all("防治" in c.section for c in answer.citations), answer.text
    assert len(answer.citations) <= 3 and len(answer.text) < 600


def test_how_to_control_gets_the_chemical_section_even_when_retrieval_ranked_it_below_the_five(sample_engine):
    from rag_core.generate import extractive_answer, with_control_sections
    from rag_core.records import Hit

    chunks = sample_engine.index.chunks
    cultural = next(c for c in chunks if c.section.endswith("（一）农业防治") and "锈病" in c.section)
    symptoms = next(c for c in chunks if c.section.endswith("二、咖啡锈病的症状识别"))
    hits = [Hit(cultural, 6.4), Hit(symptoms, 3.8)]
    shown = with_control_sections("咖啡锈病怎么防治？", hits, chunks)
    leaves = [h.chunk.section.rpartition(" › ")[2] for h in shown[2:]]
    assert shown[:2] == hits and any("化学防治" in leaf for leaf in leaves) and len(leaves) == len(set(leaves)) <= 3
    text, cited = extractive_answer("咖啡锈病怎么防治？", shown, sample_engine.tokenizer, lead=1)
    assert any("化学防治" in h.chunk.section for h in shown if h.chunk.id in cited), text
    # not for another ask
    assert with_control_sections("咖啡锈病是什么症状？", hits, chunks) == hits
    # a description first (症状识别), a control section further down: the control sections from their heading's start
    # come right after the description, the one retrieved stays where it was
    shown = with_control_sections("咖啡锈病怎么防治？", hits[::-1], chunks)
    leaves = [h.chunk.section.rpartition(" › ")[2] for h in shown]
    assert shown[0] == hits[1] and shown[-1] == hits[0]
    assert leaves[1:-1] == ["（二）田间监测与防治指标", "（三）化学防治"], leaves


def test_what_to_do_after_a_description_is_read_from_the_measures_start(sample_engine):
    # "叶子冻黑了，咋办？": the e5 ranker puts the symptom passage first and a late recovery passage (调整负载) fifth;
    # the answer reads the recovery section from its start (wait 2–4 weeks before pruning), cited
    from rag_core.generate import extractive_answer, with_control_sections
    from rag_core.records import Hit

    chunks = sample_engine.index.chunks
    symptoms = next(c for c in chunks if c.section.endswith("一、叶片受冻的症状"))
    forming = next(c for c in chunks if c.section.endswith("一、寒害、冻害与霜冻的区别"))
    late = next(c for c in chunks if c.section.endswith("五、调整负载与补植"))
    hits = [Hit(symptoms, 4.8, {"rrf": 1}), Hit(forming, 3.2, {"rrf": 2}), Hit(late, 1.8, {"rrf": 5})]
    question = "昨晚下霜了，咖啡叶子冻黑了一大片，咋办？"
    shown = with_control_sections(question, hits, chunks)
    assert shown[0] == hits[0] and "一、不要急于修剪" in shown[1].chunk.section and shown[-2:] == hits[1:]
    text, cited = extractive_answer(question, shown, sample_engine.tokenizer, lead=1)
    assert shown[1].chunk.id in cited, text
    assert re.search(r"等待\s*2\s*[–～-]\s*4\s*周", text), text
    # a question that asks what it looks like keeps the evidence as retrieved
    assert with_control_sections("咖啡叶子受冻以后是什么样子？", hits, chunks) == hits


def test_how_to_control_after_a_description_reads_a_section_that_says_it_is_a_measure(sample_engine):
    # 咖啡果小蠹怎么防治: morphology ranked first, then 监测与检疫, 采收卫生 ("采收卫生是预防咖啡果小蠹的主要措施："),
    # no heading naming measures; the section whose opening says it is one is read second, and cited
    from rag_core.generate import extractive_answer, with_control_sections
    from rag_core.records import Hit

    chunks = sample_engine.index.chunks
    morphology = next(c for c in chunks if c.section.endswith("一、咖啡果小蠹的形态与为害"))
    habits = next(c for c in chunks if c.section.endswith("二、咖啡果小蠹的生活习性"))
    hygiene = next(c for c in chunks if c.section.endswith("四、采收卫生") and "果小蠹" in c.section)
    hits = [Hit(morphology, 6.0, {"rrf": 1}), Hit(habits, 4.6, {"rrf": 2}), Hit(hygiene, 4.2, {"rrf": 3})]
    shown = with_control_sections("咖啡果小蠹怎么防治？", hits, chunks)
    assert [h.chunk.id for h in shown] == [morphology.id, hygiene.id, habits.id]
    text, cited = extractive_answer("咖啡果小蠹怎么防治？", shown, sample_engine.tokenizer, lead=2)
    assert hygiene.id in cited and "采收卫生" in text, text
    # the order stays as retrieved for a question asking what it is
    assert with_control_sections("咖啡果小蠹长什么样？", hits, chunks) == hits


def test_a_chapter_heading_does_not_answer_what_to_do_for_a_symptom_sentence(sample_engine):
    # the nursery rule's "9 苗圃病虫害防治 › 9.4 褐斑病和炭疽病" holds 9.4.1 症状 and 9.4.2 防治: the symptom sentence
    # under a chapter named 防治 does not answer 咋整 by itself; the 防治 sentence joins it
    from rag_core.generate import extractive_answer
    from rag_core.records import Hit

    passage = next(c for c in sample_engine.index.chunks if c.section.endswith("9.4 褐斑病和炭疽病"))
    text, cited = extractive_answer("咖啡苗叶子上有褐色圆斑咋整？", [Hit(passage, 5.0, {"rrf": 1})],
                                    sample_engine.tokenizer, lead=1)
    assert cited == [passage.id] and "症状" in text and "波尔多液" in text, text


@pytest.mark.parametrize("question", ["叶子背面起黄粉粉，咋整？", "天牛钻进去了咋个办？", "果子掉得凶，怎么整？",
                                      "这种黑果咋弄？"])
def test_growers_words_for_what_to_do_ask_for_control(question):
    # Yunnan what-to-do words ask what 咋办 asks: the answer's control sections and the ranker's control intent
    from rag_core.generate import CONTROL, asked_intents
    from rag_core.rank.features import _Q_INTENT

    assert asked_intents(question)[:1] == [CONTROL]
    assert _Q_INTENT["control"].search(question)


def test_a_when_question_leads_with_the_sentence_that_holds_a_time(sample_engine):
    # the frost chapter's symptom passage ranked first, its "don't prune yet: wait 2–4 weeks" passage second (as the
    # e5 ranker orders them for 那冻死的枝条什么时候剪 after a frost question): the time is what was asked
    from rag_core.generate import extractive_answer
    from rag_core.records import Hit

    chunks = {c.id: c for c in sample_engine.index.chunks}
    symptoms = next(c for c in chunks.values() if c.section.endswith("二、枝梢和主干受冻的症状"))
    wait = next(c for c in chunks.values() if c.section.endswith("一、不要急于修剪"))
    hits = [Hit(symptoms, 2.6, {"rerank": 1}), Hit(wait, 2.1, {"rerank": 2})]
    text, cited = extractive_answer("那冻死的枝条什么时候剪？", hits, sample_engine.tokenizer,
                                    context="霜冻 冻伤 冻死的枝条什么时候剪？")
    assert cited[0] == wait.id, text


def test_a_when_question_gets_the_wait_even_when_its_passages_were_picked_by_their_sentences(sample_engine):
    # lead=0 (a follow-up's evidence laid out by the conversation): the passages whose sentences share the most words
    # say how far to cut back and what frozen bark looks like; "什么时候" is answered by the one that says to wait
    from rag_core.generate import extractive_answer
    from rag_core.records import Hit

    chunks = sample_engine.index.chunks
    by_level = next(c for c in chunks if "轻度冻害" in c.text and "剪除冻死的嫩梢" in c.text)
    bark = next(c for c in chunks if "枝条受冻后皮层变褐" in c.text)
    wait = next(c for c in chunks if "等待 2～4 周" in c.text and "不要急于修剪" in c.text)
    hits = [Hit(by_level, 3.2), Hit(bark, 2.1), Hit(wait, 3.0)]
    text, cited = extractive_answer("那冻死的枝条什么时候剪？", hits, sample_engine.tokenizer,
                                    context="下霜 叶子 冻死的枝条什么时候剪？", lead=0)
    assert wait.id in cited and "2～4 周" in text, text


def test_the_kbs_own_faq_for_the_question_leads_the_answer(sample_engine):
    answer = sample_engine.answer("咖啡树叶子发黄是缺什么肥？")
    assert "问：咖啡叶子发黄" in answer.citations[0].text and "缺氮" in answer.text, answer.text


# Cases written for the forecast and animal rules, none from a gold set: a coming season's date is a forecast (how
# the weather usually runs, or when to work in it, is not); a farm animal the knowledge base never names is a topic it
# cannot answer, whatever coffee words come with it (a pest it names, 蜗牛 or 天牛, and its manure are answerable).
FORECAST_DATES = ["明年雨季啥时候来？", "今年冬天头一场霜大概几号下？", "今年什么时候开始下雨，我好栽苗",
                  "这个雨季哪天结束？"]
NOT_FORECASTS = ["雨季一般几月份来？", "今年雨季什么时候施肥最好？", "明年什么时候截干合适？",
                 "冬天傍晚咋个判断今晚会不会下霜？"]


def test_the_date_of_coming_weather_is_a_forecast_the_manual_lacks(sample_engine):
    hits = sample_engine.search("雨季什么时候开始").evidence
    assert [q for q in FORECAST_DATES if missing_fact(q, hits) != "天气和行情预测"] == []
    assert [q for q in NOT_FORECASTS if missing_fact(q, hits) == "天气和行情预测"] == []


@pytest.mark.parametrize("question", ["咖啡地里养山羊，羊会不会啃树皮？一亩放几只", "果园里放养鸭子能吃虫吗？咖啡地行不行"])
def test_a_farm_animal_the_kb_never_names_is_what_the_question_is_about(sample_engine, question):
    answer = sample_engine.answer(question)
    assert not answer.covered and not answer.citations, answer.text


@pytest.mark.parametrize("question", ["蜗牛啃咖啡苗子咋个整？", "鸡粪沤好了能不能直接施到咖啡地里？", "天牛钻的虫眼里注啥药？"])
def test_a_pest_or_manure_the_kb_names_is_still_answered(sample_engine, question):
    assert sample_engine.answer(question).covered


def test_what_to_spray_is_answered_by_a_product_with_its_dose_not_by_a_drug_class(sample_engine):
    # the serving build (e5 on) ranks the chemical-control section's tail (三唑类…轮换用药…采收期用药) before its head
    # (6–7 月 波尔多液 …, 三唑酮 1000–1500 倍液): the head holds the answer and must be shown and cited
    from rag_core.generate import extractive_answer

    chunks = {c.id: c for c in sample_engine.index.chunks}
    tail = next(c for c in chunks.values() if "化学防治" in c.section and "轮换用药" in c.text)
    head = next(c for c in chunks.values() if c.section == tail.section and "波尔多液" in c.text and c.id != tail.id)
    hits = [type(h)(c, 1.0) for h, c in zip(sample_engine.search("咖啡锈病").evidence, (tail, head))]
    text, cited = extractive_answer("那用什么药？什么时候喷？", hits, sample_engine.tokenizer,
                                    context="咖啡锈病 那用什么药？什么时候喷？")
    assert head.id in cited, text
    assert re.search(r"波尔多液|可湿性粉剂", text) and re.search(r"\d+\s*[～~–-]\s*\d+\s*月雨季初期", text), text


def test_an_extractive_answer_leads_with_the_passage_ranked_first(sample_engine):
    # word overlap alone prefers another passage's sentences (what the answer did before `lead`); the ranker's first
    # passage is the one shown and cited, and with lead=2 the second is cited too, each with its own sentences
    from rag_core.generate import extractive_answer

    hits = list(sample_engine.search("咖啡锈病怎么防治？").evidence)
    _, by_words = extractive_answer("咖啡锈病怎么防治？", hits, sample_engine.tokenizer)
    # given first: control passages the words do not pick (whatever order the ranker of the day gives them; a passage
    # on another aspect, such as the symptoms, is led with only when its best sentence is near the first's: LEAD_FLOOR)
    order = sorted(hits, key=lambda h: h.chunk.id == by_words[0])  # stable: the picked one goes last
    assert order[0].chunk.id != by_words[0] and order[1].chunk.id != by_words[0]
    text, cited = extractive_answer("咖啡锈病怎么防治？", order, sample_engine.tokenizer, lead=1)
    assert cited[0] == order[0].chunk.id, text
    # with lead=2 the second is cited too, when its best sentence is near the first's (LEAD_FLOOR: the symptoms
    # passage, second in some rankers' order, answers 怎么防治 too weakly and is not led with)
    second = next(h for h in order[1:] if "防治" in h.chunk.section.rpartition(" › ")[2])
    order.remove(second)
    order.insert(1, second)
    text, cited = extractive_answer("咖啡锈病怎么防治？", order, sample_engine.tokenizer, lead=2)
    assert cited[:2] == [order[0].chunk.id, order[1].chunk.id], text
    assert text.count("[") >= 2


def test_the_second_passage_is_cited_when_the_learned_ranker_cannot_tell_them_apart(sample_engine):
    from rag_core.pipeline import UNSURE_MARGIN, lead_passages
    from rag_core.records import Hit, Retrieval

    a, b, c = (h.chunk for h in sample_engine.search("咖啡锈病怎么防治？").evidence[:3])

    def retrieval(scores, reranker="learned-mlp+e5"):
        return Retrieval("q", "q", tuple(Hit(x, s) for x, s in zip((a, b, c), scores)), {}, reranker=reranker)

    assert lead_passages(retrieval((3.0, 3.0 - UNSURE_MARGIN / 2, 1.0))) == 2  # p2/p1 = e^-0.35 > 1/2
    assert lead_passages(retrieval((3.0, 3.0 - 2 * UNSURE_MARGIN, 1.0))) == 1  # p2/p1 = 1/4
    assert lead_passages(retrieval((3.0, 2.9, 1.0), reranker="none")) == 1  # RRF scores are no log-odds
    # arranged by the conversation: the first leads, and the second that the ranker liked better joins it
    assert lead_passages(retrieval((2.0, 3.0, 1.0))) == 2
    assert lead_passages(retrieval((2.0, 3.0, 1.0), reranker="none")) == 1


PESTS = [Turn("user", "咖啡树干上有蛀孔，还往外冒木屑，是啥虫？"),
         Turn("assistant", "以下内容摘自知识库：\n这是咖啡天牛的幼虫蛀食树干，从蛀孔排出木屑和虫粪。[a825da70#1]")]


@pytest.mark.parametrize("question", ["我家地在山洼洼里，晚上冷风都往下灌，种咖啡要注意啥？",
                                      "隔壁老李说他家咖啡一年到头都不见开花，是咋回事？"])
def test_a_question_saying_a_whole_clause_is_no_follow_up_even_in_words_the_kb_lacks(sample_engine, question):
    # it names little the knowledge base knows (山洼, 冷风, 老李 …), yet says a situation of its own: not an ellipsis
    # like "一亩撒好多？", so the pests exchange before it does not take it over
    assert classify(question, sample_engine.tokenizer, sample_engine.term_stats).kind != "followup"
    assert classify("一亩撒好多？", sample_engine.tokenizer, sample_engine.term_stats).kind == "followup"
    alone = [h.chunk.id for h in sample_engine.search(question).evidence]
    after = [h.chunk.id for h in sample_engine.search(question, PESTS).evidence]
    assert after[0] == alone[0]
    assert not {h.chunk.docid for h in sample_engine.search(PESTS[0].content).evidence[:1]} & {after[0].split("#")[0]}


def test_a_table_caption_is_never_an_answer_sentence(sample_engine):
    # "表 10-2 咖啡霜冻受害分级与恢复措施" shares the question's words but names a table; the rows say what to do
    from rag_core.generate import extractive_answer
    from rag_core.records import Hit

    chunk = next(c for c in sample_engine.index.chunks if "表 10-2" in c.text)
    text, cited = extractive_answer("霜冻受害以后的恢复措施有哪些？", [Hit(chunk, 1.0)], sample_engine.tokenizer, lead=1)
    assert cited == [chunk.id] and "表 10-2" not in text, text


def test_a_follow_up_after_a_described_symptom_carries_what_the_reply_named(sample_engine):
    # the user only described what they see; the reply named the disease: that is what "那要喷哪样药？" is about
    history = [Turn("user", "我家咖啡树叶子上起了一圈圈褐色的斑，中间发白，是啥毛病？"),
               Turn("assistant", "以下内容摘自知识库：\n这多半是咖啡褐眼斑病，全光照、干旱和缺肥的园子最重。[fb82b28b#20]")]
    rewritten = rewrite_query("那要喷哪样药？", history, sample_engine.tokenizer, 2, stats=sample_engine.term_stats)
    assert "褐眼斑病" in rewritten, rewritten
    evidence = sample_engine.search("那要喷哪样药？", history).evidence
    assert any("褐眼斑病" in h.chunk.section for h in evidence[:3]), [h.chunk.section for h in evidence]
    # a user who named the disease keeps their own words: the reply's 抗病品种 is not carried ("那用什么药" above)
    assert "抗病品种" not in rewrite_query("那用什么药？", RUST, sample_engine.tokenizer, 2, stats=sample_engine.term_stats)


def test_after_what_is_it_the_replys_name_is_the_topic_and_the_description_is_not_carried(sample_engine):
    """是哪样虫？ was answered 咖啡绿蚧: 这个虫一般哪几个月最凶 asks the scale's season, and the description words (趴着,
    小虫, 叶脉) would only find the description again. Only described, without asking (后天寒潮过了就转晴), the
    user's words stay."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    history = [Turn("user", "叶子背面顺着叶脉趴起好多绿色扁扁的小虫，是哪样虫？"),
               Turn("assistant", "这是咖啡绿蚧，固定在嫩梢、叶背主脉两侧和果柄上吸汁，蜜露会诱发煤烟病。")]
    rewritten = carry_topic("这个虫一般哪几个月最凶？", history, tok, 2, stats)
    assert rewritten.startswith("咖啡绿蚧") and "小虫" not in rewritten and "叶脉" not in rewritten, rewritten
    evidence = sample_engine.search("这个虫一般哪几个月最凶？", history).evidence
    assert any("发生季节" in h.chunk.section or "发生期" in h.chunk.section for h in evidence[:3]), \
        [h.chunk.section for h in evidence]
    told = [Turn("user", "天气预报说后天寒潮过了就转晴，我家咖啡在1600米。"),
            Turn("assistant", "寒潮过后转晴的头一两个晚上最容易打霜，要提前准备好熏烟材料。")]
    assert "寒潮" in carry_topic("烟堆要摆几个？", told, tok, 2, stats)


def test_a_description_naming_only_a_plant_part_or_a_practice_still_carries_the_name_the_reply_gave(sample_engine):
    # 子叶 (jieba's reading of 树子叶子) and 沙床 are lexicon nouns, not names: the user still named no pest or disease
    for described, reply, name in [
        ("树脚下地上有一小堆新鲜的木渣渣和虫屎，树子叶子也开始黄了。", "这是咖啡旋皮天牛的典型症状，幼虫在树干基部环着蛀食树皮。", "旋皮天牛"),
        ("沙床上的小苗一片一片倒下去，茎基部像遭水泡过一样变细了。", "这是苗期猝倒病，多因浇水太多、通风差。", "猝倒病"),
    ]:
        history = [Turn("user", described), Turn("assistant", reply)]
        rewritten = carry_topic("往里头咋个打药？", history, sample_engine.tokenizer, 2, sample_engine.term_stats)
        assert name in rewritten, rewritten


@pytest.mark.parametrize("question", ["一台脱皮机一个钟头能脱好多公斤鲜果？"])
def test_an_amount_in_a_unit_the_evidence_never_states_is_refused(sample_engine, question):
    # the knowledge base has the topic (脱皮机) but no figure in the asked unit: a near miss, not an answer
    answer = sample_engine.answer(question)
    assert not answer.covered and not answer.citations, answer.text


@pytest.mark.parametrize("question", ["催花水一棵树要浇好多升？", "果子遭虫咬了，咋个晓得是啥虫？"])
def test_an_amount_the_evidence_states_and_growers_grammar_are_answered(sample_engine, question):
    # an amount the evidence states is answered; 遭 is the growers' passive, not a topic the knowledge base lacks
    assert sample_engine.answer(question).covered


def test_after_what_to_do_the_replys_terms_are_not_carried_as_a_name(sample_engine):
    # "咋办" was answered with what frost damage looks like: its terms (水渍状) name nothing the user described
    history = [Turn("user", "昨晚下霜了，咖啡叶子冻黑了一大片，咋办？"),
               Turn("assistant", "以下内容摘自知识库：\n咖啡叶片受冻后先呈水渍状、暗绿色，随后变褐、变黑。[2d73a183#12]")]
    rewritten = rewrite_query("那冻死的枝条什么时候剪？", history, sample_engine.tokenizer, 2, stats=sample_engine.term_stats)
    assert "水渍状" not in rewritten and rewritten != "那冻死的枝条什么时候剪？", rewritten


def test_a_question_naming_no_domain_term_is_also_read_in_the_conversations_context(sample_engine):
    """"泡过头了会是哪样样子？" names words of its own (泡, 过头, 样子) but no domain term: after a fermentation question
    it continues it, though what it finds alone (yellow leaves, waterlogging) shares no document with that question.
    It is read both ways: its own first passage stays first, and the fermentation section joins."""
    from rag_core.history import names_little_of_its_own

    history = [Turn("user", "水洗的带壳豆放发酵池里要泡好久？"),
               Turn("assistant", "以下内容摘自知识库：\n一般发酵 12–36 小时，气温高时短一些。")]
    question = "泡过头了会是哪样样子？"
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    assert classify(question, tok, stats).kind == "new" and names_little_of_its_own(question, tok, stats)
    alone = sample_engine.search(question).evidence
    after = sample_engine.search(question, history).evidence
    assert after[0].chunk.id == alone[0].chunk.id
    assert not any("发酵" in h.chunk.section for h in alone)
    assert any("发酵" in h.chunk.section for h in after), [h.chunk.section for h in after]
    # a question naming a domain term, or two words rare in everyday Chinese, is searched as asked (as alone)
    assert not names_little_of_its_own("咖啡锈病怎么防治？", tok, stats)
    assert not names_little_of_its_own("湿法加工发酵要多长时间？", tok, stats)
    # …and so is one that says four dictionary words or more of its own (no ellipsis), as classify reads it
    assert not names_little_of_its_own("想自己看看地块排水好不好 有没有简单办法", tok, stats)
    assert not names_little_of_its_own("咖啡地泡水好几天了，根会不会烂掉？", tok, stats)


def test_a_reply_that_says_what_a_description_is_gives_the_topic_alone(sample_engine):
    """Only described (叶子背后一团团橙黄色的粉…), and the reply opens by naming a disease (听起来是咖啡锈病): the next
    question asks about the disease, and the description words would only find the description passage again.
    A reply that names no pest or disease in its opening (寒潮过后…) leaves the user's words in."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    history = [Turn("user", "我家咖啡叶子背后起了一团团橙黄色的粉，手一摸就沾一手黄"),
               Turn("assistant", "听起来是咖啡锈病，叶背的橙黄色粉状孢子堆是识别它最可靠的特征。")]
    rewritten = carry_topic("要打哪样药？兑好多倍", history, tok, 2, stats)
    assert rewritten.startswith("咖啡锈病 ") and "孢子堆" not in rewritten and "橙黄色" not in rewritten, rewritten
    told = [Turn("user", "天气预报说后天寒潮过了就转晴，我家咖啡在1600米。"),
            Turn("assistant", "寒潮过后转晴的头一两个晚上最容易打霜，要提前准备好熏烟材料。")]
    assert "寒潮" in carry_topic("烟堆要摆几个？", told, tok, 2, stats)


def test_a_follow_up_that_names_its_own_thing_leads_with_the_best_passage_of_each_reading(sample_engine):
    """那接穗要从哪种枝子上剪 after 老铁皮卡锈病重: read in the conversation it finds the Typica passages first; read alone,
    the grafting answer (接穗从哪里剪). Both readings' best passages lead and are cited, as for a question that
    continues the conversation."""
    history = [Turn("user", "我家有一块老铁皮卡，年年锈病都重得很"),
               Turn("assistant", "铁皮卡感锈病，锈病控制不住的地块宜换成抗锈品种。")]
    answer = sample_engine.answer("那接穗要从哪种枝子上剪", history)
    assert any("接穗从哪里剪" in c.text for c in answer.citations), [c.text[:30] for c in answer.citations]


def test_a_back_reference_to_the_questions_own_clause_is_no_follow_up(sample_engine):
    """…新的咖啡价值评估体系，那个是咋个打分的？: 那个 points to the clause before it, which names its own topic; the
    question is new, and is refused as it would be alone (the document says it presents the 100-point form instead).
    A 那个 with nothing named before it still points back."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    question = "听说SCA出了个新的咖啡价值评估体系，那个是咋个打分的？"
    assert classify(question, tok, stats).kind == "new"
    assert classify("那个药兑好多倍？", tok, stats).kind == "followup"
    assert classify("那平时咋个查园子里有没得它？", tok, stats).kind == "followup"  # no clause before its own
    history = [Turn("user", "咖啡锈病咋个防？"), Turn("assistant", "6～7 月雨季初喷铜制剂保护。")]
    answer = sample_engine.answer(question, history)
    assert not answer.covered and not answer.citations, answer.text


def test_the_previous_questions_keyboard_slips_are_read_right_before_its_topic_is_carried(sample_engine):
    """下个月要挖定值穴了 was answered as 定植穴: a follow-up carries 定植穴, not the fragment 挖定 of the typed words."""
    history = [Turn("user", "下个月要挖定值穴了，穴要挖好大好深？"),
               Turn("assistant", "定植穴规格为长 60 cm × 宽 60 cm × 深 50 cm～60 cm。")]
    rewritten = sample_engine.search("那底肥放好多？", history).rewritten_query
    assert "挖定" not in rewritten and "定植穴" in rewritten, rewritten


def test_a_question_the_bot_refused_sets_no_topic_for_the_next(sample_engine):
    """After 新的咖啡价值评估体系…咋个打分 was refused, 那底肥放好多？ carries nothing of it: the knowledge base had no
    topic there to continue."""
    refused = sample_engine.answer("听说SCA出了个新的咖啡价值评估体系，那个是咋个打分的？")
    assert not refused.covered
    history = [Turn("user", "听说SCA出了个新的咖啡价值评估体系，那个是咋个打分的？"), Turn("assistant", refused.text)]
    rewritten = sample_engine.search("那底肥放好多？", history).rewritten_query
    assert "评估" not in rewritten and "体系" not in rewritten, rewritten
    answer = sample_engine.answer("那底肥放好多？", history)
    assert answer.citations and "评估" not in answer.citations[0].text, answer.text


def test_the_diagnosis_a_reply_opens_with_leads_whatever_the_description_said(sample_engine):
    """The reply opens by saying what the grower's description is (这是咖啡根腐病, 这是遭霜冻了, 这多半是缺锌): that is
    the conversation's topic. "那几棵" and "蚂蚁好多" describe, they ask nothing; a cultivar or a symptom word in the
    description (卡蒂姆, 水渍状) is no diagnosis; a disorder the lexicon does not list as a name (霜冻, 缺锌) leads the
    description's words instead of replacing them."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    for described, reply, question, lead, alone in [
        ("我家低洼那片有几棵整株叶子发黄打蔫，挖开看根皮是黑的，一撸就掉", "这是咖啡根腐病，多发生在低洼积水的地方。",
         "已经死了的那些咋整", "咖啡根腐病", True),
        ("树上蚂蚁好多，爬上爬下的，嫩梢上还有一团团白粉粉", "那是粉蚧，蚂蚁吃它分泌的蜜露。",
         "有啥子法子不让它们上树？", "粉蚧", True),
        ("卡蒂姆挂果多的枝条叶子黄了往下掉，枝条从梢头往下干，这是咋回事", "这是咖啡枯枝病，也叫回枯，结果太多引起的。",
         "要是不管它会咋样？", "咖啡枯枝病", True),
        ("昨晚降温，今早看低处那片咖啡叶子像开水烫过一样，水渍状的", "这是遭霜冻了，低洼处冷空气沉积，最容易冻。",
         "那要不要赶紧把那些枝子剪了？", "霜冻", False),
    ]:
        rewritten = carry_topic(question, [Turn("user", described), Turn("assistant", reply)], tok, 2, stats)
        assert rewritten.startswith(lead + " "), rewritten
        assert (rewritten == f"{lead} {question}") == alone, rewritten


def test_a_reply_that_denies_the_growers_guess_names_the_topic_instead(sample_engine):
    """是锈病不？ guesses; a reply opening 不是锈病，这是咖啡褐眼斑病 corrects it, and "这个病" is the one the reply named
    (found by round 22's blind wave: the rewrite carried 锈病 and 黄晕 and searched rust), also as the first of an
    extractive answer's numbered passages. A reply that agrees (对，…)
    leaves the user's words the topic."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    guessed = "叶子上有圆圆的褐斑，中间灰白，外头一圈黄晕，像眼睛一样，是锈病不？"
    question = "这个病在苗圃头咋个防？"
    for reply in ("不是锈病，这是咖啡褐眼斑病，叶背没有橙黄色粉。",
                  "以下内容摘自知识库：\n不是锈病，这是咖啡褐眼斑病，叶背没有橙黄色粉。[fb82b28b#20]",
                  # an extractive answer of several passages numbers them (round 26's dev26, with the bot's own reply)
                  "以下内容摘自知识库：\n1. 不是锈病，是咖啡褐眼斑病，也叫褐斑病。[aad5e67b#8]\n2. 叶片症状：初为褪绿小点。[fb82b28b#20]"):
        rewritten = carry_topic(question, [Turn("user", guessed), Turn("assistant", reply)], tok, 2, stats)
        assert rewritten == f"咖啡褐眼斑病 {question}", rewritten
    agreed = carry_topic(question, [Turn("user", "叶背一层橙黄色的粉，是锈病不？"),
                                    Turn("assistant", "对，这是咖啡锈病，叶背有橙黄色粉状孢子堆。")], tok, 2, stats)
    assert "锈病" in agreed and "褐眼斑" not in agreed, agreed


def test_the_passage_the_last_reply_stood_on_joins_a_follow_ups_evidence(sample_engine):
    """要是已经钻到根颈那点了呢 asks another line of the passage the reply paraphrased (天牛: 刮除, 钩杀, 截除; 蛀入根颈的
    连根挖除). The reply's passage joins the first SAID_AT: found from the reply's words when it cites nothing (a hand
    written history), from its citation when it has one; the follow-up's own best passage stays first. That is the
    pipeline's own order, which the conversation ranker reorders (tests/test_conversation_ranker.py)."""
    from rag_core.pipeline import SAID_AT

    stood_on = next(c for c in sample_engine.index.chunks if "幼虫已蛀入根颈" in c.text and "铁丝钩杀" in c.text)
    question = "要是已经钻到根颈那点了呢"
    paraphrased = [Turn("user", "天牛钻进树干里了咋个整？"),
                   Turn("assistant", "皮下的虫道可以刮掉幼虫，钻进木质部的用铁丝钩出来，被害枝干从虫道下端截掉。")]
    cited = [paraphrased[0], Turn("assistant", f"以下内容摘自知识库：\n对木质部蛀孔宜用铁丝钩杀幼虫。[{stood_on.id}]")]
    # the reply cites nothing: its passage is the best match for its words, a passage that states its 截除 and the
    # 根颈 the follow-up asks of (the IPM regulation's 7.2, or the pests chapter's 截除被害枝干 that says it as well)
    found = sample_engine._said(question, paraphrased, Options())
    assert "截除" in found.text and "蛀入根颈" in found.text, found.text
    for history, said in ((paraphrased, found), (cited, stood_on)):  # the pipeline's own order (the conversation
        evidence = sample_engine.read(question, history)[0].evidence  # ranker may reorder it)
        assert said.id in [h.chunk.id for h in evidence[:SAID_AT]], [h.chunk.id for h in evidence]
    # a refusal stood on no passage
    refused = [Turn("user", "咖啡期货明天涨不涨？"), Turn("assistant", not_covered("天气和行情预测"))]
    assert sample_engine._said("那要打几次？", refused, Options()) is None


def test_a_reply_citing_several_passages_stood_on_the_one_stating_the_figure_asked(sample_engine):
    """"要打几次？" after a reply citing the spraying rules, then the schedule (连喷 2 次): the schedule is what the
    count is asked of. A follow-up asking no figure keeps the first citation."""
    rules = next(c for c in sample_engine.index.chunks if "安全间隔期" in c.text and not re.search(r"\d\s*次", c.text))
    schedule = next(c for c in sample_engine.index.chunks if re.search(r"连喷\s*\d", c.text))
    history = [Turn("user", "锈病用什么药？什么时候喷？"),
               Turn("assistant", f"以下内容摘自知识库：\n1. 遵守安全间隔期。[{rules.id}]\n2. 雨季初期喷药。[{schedule.id}]")]
    assert sample_engine._said("要打几次？", history, Options()) == schedule
    assert sample_engine._said("那要注意哪样？", history, Options()) == rules


def test_a_follow_up_carries_the_two_most_specific_terms_of_a_turn_and_no_place_word(sample_engine):
    """Over 325 labelled follow-ups, two terms a turn found the follow-up's passage more often than four (Hit@5
    0.744 → 0.761 on one ranker): the third and fourth were words like 叶子, 打伤, 长大 that pull the search back to
    the description. A locative (地里, jieba's s) says where, not what about."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    rust = [Turn("user", "锈病起来了，叶子背后全是黄粉"), Turn("assistant", "锈病发病期要用内吸性杀菌剂。")]
    assert carry_topic("那用啥药？隔好久打一回？", rust, tok, 2, stats) == "锈病 黄粉 用啥药？隔好久打一回？"
    wet = [Turn("user", "今年雨季雨水特别多，咖啡地里老是积水"), Turn("assistant", "雨季要及时排水。")]
    rewritten = carry_topic("沟要挖好深？", wet, tok, 2, stats)
    assert "积水" in rewritten and "地里" not in rewritten, rewritten


def test_a_question_that_says_it_is_another_ranks_as_alone(sample_engine):
    """问个别的，… / 还有个事，… : the grower says the question is a new one. It is searched exactly as asked, even
    when its passages share a document with the previous question's (the contextual reading is for a question that
    may continue the conversation)."""
    history = [Turn("user", "冰雹过后咖啡树要打药不"), Turn("assistant", "雹灾后要及时喷铜制剂保护伤口。")]
    for question in ("问个别的，我家地比县里气象站高600多米，气温大概要低好多？",
                     "还有个事，从母树上采的种子放得好久？能不能等到明年春天再播"):
        assert classify(question, sample_engine.tokenizer, sample_engine.term_stats).kind == "new"
        alone = [h.chunk.id for h in sample_engine.search(question).evidence]
        assert [h.chunk.id for h in sample_engine.search(question, history).evidence] == alone


@pytest.mark.parametrize("question", ["问个别的，咖啡地土壤好久测一次", "对了，雨季当中有时候十来天不下雨，要不要浇水",
                                      "对了，防天牛刷树干的那个白灰浆咋个配"])
def test_a_question_that_says_it_is_another_is_new_even_naming_little(sample_engine, question):
    """The opening says a new question comes (问个别的, 对了) and the question names something of its own: it is no
    follow-up, though it names little the KB marks as a topic, or says 那个 of a thing it names itself."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    assert classify(question, tok, stats).kind == "new"
    history = [Turn("user", "采果隔几天采一轮"), Turn("assistant", "盛采期每7–10天采一轮，只采完熟红果。")]
    assert sample_engine.rewrite(question, history) == question
    for elliptical in ("对了，要打几次？", "对了，它要打几次？", "对了，那个药要打几次？"):  # little said, or pointing back
        assert classify(elliptical, tok, stats).kind == "followup"


@pytest.mark.parametrize("question", ["还有，卡蒂姆这种矮的，一亩地种好多棵合适？", "铁皮卡那种上百年的老咖啡树，云南哪里还留得有？"])
def test_a_demonstrative_right_after_a_name_is_that_names(sample_engine, question):
    """卡蒂姆这种矮的 is "a short one like Catimor": the demonstrative belongs to the name before it and points nowhere
    back; the question names its own topic."""
    assert classify(question, sample_engine.tokenizer, sample_engine.term_stats).kind == "new"
    assert classify("那种虫钻进去了咋个打药？", sample_engine.tokenizer, sample_engine.term_stats).kind == "followup"


def test_a_question_pointing_past_the_last_exchange_continues_the_earlier_one(sample_engine):
    """回到头先那个肥 / 头一个说的那个 / 前头说那个打顶: the exchange before the last is what it continues (every such
    question of the conversation sets asks about the first of two); 头一个月 is the first month, no pointer."""
    from rag_core.history import as_pointed

    history = [Turn("user", "单干的卡蒂姆打顶打好高"), Turn("assistant", "单干树一般在1.6～1.8米处打顶。"),
               Turn("user", "生豆含水率要求好多"), Turn("assistant", "控制在10%～12%。")]
    assert as_pointed("头先说的那个高度，要是走多干的，每根干也打在那么高？", history) == history[:2]
    assert as_pointed("回到头一个，多干的呢？", history) == history[:2]
    assert as_pointed("那刚栽下去头一个月呢？", history) == history
    assert as_pointed("头先说的那个高度呢？", history[:2]) == history[:2]  # one exchange: nothing earlier
    evidence = sample_engine.search("头先说的那个高度，要是走多干的，每根干也打在那么高？", history).evidence
    assert any("打顶" in h.chunk.section or "打顶" in h.chunk.text for h in evidence[:3]), [h.chunk.id for h in evidence]


@pytest.mark.parametrize("previous, question, asked, gone", [
    ("咖啡锈病一般几月份最凶嘛", "那炭疽病呢？", "炭疽病 一般几月份最凶", "锈病"),  # a name for a name
    ("一月份咖啡园主要做些啥子活路？", "那二月呢", "二月 咖啡园主要做些啥子活路", "一月"),  # a month
    ("苗圃头的袋苗，干季多久浇一回水？", "那雨季呢？", "雨季 苗圃头的袋苗", "干季"),  # a season
    ("去年雨季新栽的苗，头一年一棵施好多肥嘛？", "那第二年呢", "第二年 去年雨季新栽的苗", "头一年"),  # a year of growth
    ("我家在孟连，海拔900米左右，咖啡大概哪阵开始摘？", "那1600米以上的呢？", "1600米以上 我家在孟连", "900"),
    # and a clause after it asks on of the same question
    ("苗圃头的袋苗，干季多久浇一回水？", "那雨季呢？还要浇那么勤不", "雨季 苗圃头的袋苗", "干季"),
    ("卡蒂姆种下去第几年挂果？", "那铁皮卡呢，产量比得上不", "铁皮卡 种下去第几年挂果", "卡蒂姆"),
])
def test_what_about_x_asks_the_previous_question_again_of_x(sample_engine, previous, question, asked, gone):
    history = [Turn("user", previous), Turn("assistant", "……")]
    rewritten = rewrite_query(question, history, sample_engine.tokenizer, 2, stats=sample_engine.term_stats)
    assert rewritten.startswith(asked) and gone not in rewritten, rewritten
    then = re.split(r"呢[？?，,]", question, maxsplit=1)[1:]  # what it asks after 那X呢, kept
    assert not then or rewritten.endswith(then[0]), rewritten


@pytest.mark.parametrize("previous, question", [
    ("园子里有几棵根腐病死了，咋个处理？", "石灰用量呢？"),  # an aspect of the same topic: the topic is carried
    ("小咖啡苗能用香蕉遮荫不", "要是冬天会下霜的地呢"),  # a condition
    ("水洗的咖啡发酵，咋个看发好了没得？", "发酵完了接下来呢？"),  # the next step
])
def test_what_about_an_aspect_a_condition_or_a_next_step_keeps_the_previous_topic(sample_engine, previous, question):
    history = [Turn("user", previous), Turn("assistant", "……")]
    rewritten = rewrite_query(question, history, sample_engine.tokenizer, 2, stats=sample_engine.term_stats)
    assert rewritten.endswith(question.lstrip("那")) and rewritten != question, rewritten



def test_a_demonstrative_after_a_measure_describes_it_and_points_nowhere(sample_engine):
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    # 1600多米这种地方: places like ours at 1600 m, asked after a frost exchange at the same altitude: not "this" of the
    # conversation, so the question is not held to the frost documents
    question = "我们1600多米这种地方，采收要采到几月份？"
    assert classify(question, tok, stats).reason != "points back" and not leans_back(question, tok)
    assert classify("这种病咋个防？", tok, stats).reason == "points back" and leans_back("这种病咋个防？", tok)
    assert leans_back("打了以后那种芽留不留", tok)


@pytest.mark.parametrize("question, asks", [("发酵好了以后呢", True), ("热起来以后接下来要咋个弄", True), ("到点了 下一步咋个整", True),
                                            ("绑好后还要整哪样", True), ("那要打几次？", False), ("这个病在苗圃头咋个防？", False)])
def test_what_to_do_after_a_step_asks_the_next_step(question, asks):
    from rag_core.history import asks_next_step

    assert asks_next_step(question) is asks


def test_a_next_step_asked_finds_where_the_manual_goes_on(sample_engine):
    """发酵终点到了以后下一步咋个整 after a reply on the fermentation's end point: the manual's next section (清洗) is the
    passage right after the reply's. It joins the first five at NEXT_STEP_AT, whatever the question's own words find;
    a follow-up that asks no next step is left to the ranker."""
    chunks = sample_engine.index.chunks
    end_point = next(c for c in chunks if "发酵终点的判断" in c.text and "手搓法" in c.text)
    washing = chunks[sample_engine.index.position[end_point.id] + 1]
    assert washing.docid == end_point.docid and "清洗" in washing.text
    history = [Turn("user", "池子里的豆子咋个晓得发酵好了？"),
               Turn("assistant", f"以下内容摘自知识库：\n豆表不再滑腻、手感粗糙，搓动时发出“沙沙”声，即为发酵终点。[{end_point.id}]")]
    evidence = [h.chunk.id for h in sample_engine.search("到点了以后，下一步咋个整", history).evidence]
    assert washing.id in evidence[:5], evidence


def test_a_next_step_after_a_reply_that_went_on_past_its_passage(sample_engine):
    """A reply written on how long to ferment that also tells the hand test of its end (the next section's 手搓,
    沙沙) has told that step: 发酵好了下一步咋个整 asks the one after it, washing (round 27's dev27 found neither)."""
    chunks = sample_engine.index.chunks
    end_point = next(c for c in chunks if "发酵终点的判断" in c.text and "手搓法" in c.text)
    duration = chunks[sample_engine.index.position[end_point.id] - 1]
    washing = chunks[sample_engine.index.position[end_point.id] + 1]
    assert duration.docid == end_point.docid == washing.docid and "清洗" in washing.text
    history = [Turn("user", "第一年自己做水洗，鲜果脱完皮倒进池子里，要泡多久？"),
               Turn("assistant", f"以下内容摘自知识库：\n{duration.text[:120]}\n接近终点时，用手搓豆表不滑腻、有“沙沙”声就是发酵好了。"
                                 f"[{duration.id}]")]
    evidence = [h.chunk.id for h in sample_engine.search("发酵好了下一步咋个整", history).evidence]
    assert washing.id in evidence[:5], evidence
