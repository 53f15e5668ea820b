"""Refusals that generalise (issue 13): each principle of rag_core.relevance on questions written for this file in
growers' words, none taken from the eval sets. A principle is a kind of fact asked for (money, a forecast, an address
…) or a kind of name the knowledge base lacks (an agrochemical, a pest, a crop), never a topic list."""
from __future__ import annotations

import dataclasses

import pytest

from rag_core.records import Chunk, Hit
from rag_core.relevance import (_home, _with_column_units, animal_care, asked_amounts, assess, content_words, missing_fact, other_crop, other_crops_care,
                                unanchored_amount, unanchored_code, unanchored_control, unanchored_country, unanchored_dose, unanchored_lifespan,
                                unanchored_paperwork, unanchored_place,
                                unanchored_remedy, unanchored_stage, unknown_focus, unknown_latin_name, unknown_topic,
                                unknown_words, scoped_out, unstated_element, unstated_period, unstated_rate,
                                unanchored_year)


@pytest.fixture(scope="module")
def hits(sample_engine):
    """Evidence the sample KB gives a general question: it holds no currency amount, forecast, address or year."""
    return sample_engine.search("咖啡鲜果采收以后怎么加工").evidence


@pytest.mark.parametrize("question", ["鲜果收购点一斤给几毛？", "这台脱皮机要几千块？", "我那块地流转出去，租金一年能收好多？",
                                      "带壳豆一公斤能卖到二十块不？",
                                      "一亩咖啡一年能挣多少？", "咖啡园上保险一亩要交多少？"])
def test_money_asks_in_growers_words_need_a_currency_amount(sample_engine, hits, question):
    assert missing_fact(question, hits) == "价格"
    priced = [type(h)(type(h.chunk)(**{**h.chunk.__dict__, "text": "每公斤 12 元。"}), h.score) for h in hits[:1]]
    assert missing_fact(question, priced) == ""


@pytest.mark.parametrize("question", ["生豆的收购价是按什么定的？", "一亩地一次施几斤尿素？", "卖鲜果之前要挑几遍？",
                                      "叶片上黄一块绿一块，是缺啥？", "听说咖啡豆晒得越干越好，多晒几天保险，是不是这样？",
                                      "家头买的农药咋个放才保险？家里有娃娃"])
def test_how_a_price_is_set_or_how_much_fertiliser_is_no_money_ask(hits, question):
    # (多晒几天保险 and 咋个放才保险: "to be safe", no insurance bought)
    # (an amount in 斤 that this processing evidence does not hold is a missing figure, not a money ask)
    assert missing_fact(question, hits) in ("", "具体数字")


@pytest.mark.parametrize("question", ["今年雨季是早来还是晚来？", "这个月底会不会来寒潮？", "明年咖啡价格会不会涨？",
                                      "下礼拜临沧降温厉害不？", "咖啡价钱明年会不会好点？", "这个礼拜孟连会不会下雨？",
                                      "这星期会不会降温？", "这两天保山会不会打霜？", "过两天还下不下雨？",
                                      "后天勐海那边有没得霜？", "明年的雨季好久来？会不会来得迟？",
                                      "下个礼拜孟连这边天气咋样，会不会下大雨？",
                                      # where this one event goes (adversarial-oos31's o31-024 was answered)
                                      "那这回台风会不会刮到我们文山这边 好久到", "这股寒潮好久到？"])
def test_a_forecast_is_never_in_a_manual(hits, question):
    assert missing_fact(question, hits) == "天气和行情预测"
    # wanting to know (想晓得) is still the forecast asked; how to know (咋个晓得) is a method
    assert missing_fact("明后天会不会下雨？想晓得哪天是晴天。", hits) == "天气和行情预测"


@pytest.mark.parametrize("question", ["咋个看出今晚会不会结霜？", "今年种的苗子霜冻以后会不会死？",
                                      "预报说后天有霜，今天要做哪样准备？", "怎么看今晚会不会打霜？",
                                      "看得出明天要下霜不？有啥征兆？", "这两天叶子上起了黄点点，是哪样病？",
                                      "今年霜来得早，小苗还要不要盖草？",  # told, not asked: the late frost is given
                                      "咋个晓得今晚会不会下霜？傍晚气温降到好多就要当心了",  # 晓得: to know, in dialect
                                      # what this event did or does to the trees is no path of it
                                      "这场冰雹会不会打坏果子？", "这次寒潮来了以后要咋个整？"])
def test_how_to_tell_and_this_years_seedlings_are_no_forecast(hits, question):
    assert missing_fact(question, hits) == ""


def test_the_other_kinds_of_asked_fact(hits):
    assert missing_fact("自家的咖啡豆拿铁锅炒，要炒多久？", hits) == "家庭烘焙和冲煮"
    assert missing_fact("自己冲洗脱皮机要注意啥？", hits) == ""  # washing a machine is no brewing
    assert missing_fact("开个咖啡小作坊要办啥证？", hits) == "办理手续"
    assert missing_fact("全县种咖啡的有多少户？", hits) == "统计数字"
    assert missing_fact("县里的咖啡交易市场在哪里？", hits) == "地址"
    assert missing_fact("这种豆子泡出来好不好喝？", hits) == "家庭烘焙和冲煮"
    assert missing_fact("咖啡叶能不能泡水喝？", hits) == "家庭烘焙和冲煮"
    assert missing_fact("全州一年卖出去多少吨生豆？", hits) == "统计数字"
    assert missing_fact("云南有多少户咖啡农？", hits) == "统计数字"
    assert missing_fact("镇上卖农药的店在哪里？", hits) == "地址"
    assert missing_fact("买了保险，霜冻了能赔不？", hits) == "保险理赔"
    assert missing_fact("有胃病的人一天喝好多杯咖啡合适？", hits) == "喝咖啡与健康"
    assert missing_fact("天天喝咖啡会不会失眠？", hits) == "喝咖啡与健康"
    # a cup tasted to grade beans, a defect's danger and a tree's health are the manual's
    assert missing_fact("杯测喝出怪味，一杯要扣好多分？", hits) == ""
    assert missing_fact("生豆长了霉斑，拿来喝会不会有毒？", hits) == ""
    assert missing_fact("咖啡树身体弱，叶子发黄咋办？", hits) == ""
    assert missing_fact("煮咖啡要煮几分钟？", hits) == "家庭烘焙和冲煮"
    assert missing_fact("收购站一公斤给到好多？", hits) == "价格"
    assert missing_fact("一斤鲜果能出几两生豆？", hits) == ""  # a yield, not a price
    # 我们几户 (we few households), 一天好几吨 (several tons): counts told, none asked
    assert missing_fact("我们几户种咖啡的想加入合作社，合作社能帮着做些啥子？", hits) == ""
    assert missing_fact("收果高峰一天好几吨，果子泡在水里放一夜要得不？", hits) == ""
    assert missing_fact("你们合作社几户？", hits) == "统计数字"
    assert missing_fact("邻居砍树砸坏了我家的咖啡，咋个找他赔？能不能去法院告", hits) == "税费和合同"  # the law


def test_names_jieba_splits_into_characters_are_found(sample_engine):
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    assert "啶虫脒" in unknown_words("啶虫脒兑多少水打咖啡蚜虫？", tok, stats)
    assert "白粉虱" in unknown_words("咖啡叶背上有白粉虱咋个整？", tok, stats)
    assert unknown_focus("地边上种的沃柑要施啥肥？", tok, stats) == "沃柑"


def test_a_name_jieba_cuts_into_words_it_knows_is_found(sample_engine):
    """jieba cuts 枯草芽孢杆菌 into 枯草/芽孢/杆菌, dictionary words all: the run, ending like a microbe's name, is the
    biological agent the KB never names (round 38's o37-024 was answered with the KB's rust sprays). A verb's fragment
    before a name the KB holds (灌点/多菌灵) opens no run."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    assert unknown_focus("锈病能不能用枯草芽孢杆菌这种生物药来治 效果咋样", tok, stats) == "枯草芽孢杆菌"
    assert unknown_focus("听说苗床小苗一片片倒下去，灌点多菌灵就好了，是不是真的？", tok, stats) == ""
    assert unknown_focus("霜冻前想喷点防冻剂，哪个牌子的效果好", tok, stats) == ""  # the brand is what it lacks


def test_the_content_of_a_thing_the_kb_never_names_is_its_focus(sample_engine):
    """哪个咖啡因含量高一点: a content compared, not asked with 好多, is an amount of 咖啡因 all the same, which the KB
    never names, however much it says of the two cultivars (round 38's o37-060 was answered with their cup quality).
    A content of what the KB does name (锌含量) is its own question."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    assert unknown_focus("卡蒂姆和铁皮卡的豆子 哪个咖啡因含量高一点", tok, stats) == "咖啡因"
    assert unknown_focus("卡蒂姆和铁皮卡的豆子 哪个锌含量高一点", tok, stats) == ""


def test_a_mix_of_kinds_names_no_crop(sample_engine):
    """杂树 (whatever trees grow wild) ends like a crop, 树, but names none: round 38's c37-032 (a steep slope 上面长的
    是杂树, asked whether coffee may be planted there) was refused for 杂树. A tree the KB never names still is one."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    assert unknown_focus("我们村后山有块荒坡，陡得很，估计有三十度，上面长的是杂树。这种陡坡开出来种咖啡要得不？", tok, stats) == ""
    assert unknown_focus("地边上种的柠檬树要施啥肥？", tok, stats) == "柠檬树"


def test_a_name_ending_in_a_morpheme_jieba_tags_apart_is_found(sample_engine):
    """jieba cuts 皇帝蕉 as 皇帝 + 蕉 and tags the 蕉 a morpheme (zg), as it does 剂 of 生根剂: the run is the banana
    variety the KB never names, which the question is about, however much coffee shade it names besides."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    assert unknown_focus("给小咖啡遮荫的香蕉种哪个品种好点，巴西蕉还是皇帝蕉？", tok, stats) == "巴西蕉"
    assert "生根剂" in unknown_words("插条要剪多长，用哪样生根剂？", tok, stats)


def test_a_pest_crop_or_chemical_the_kb_lacks_is_the_focus_whatever_else_is_asked(sample_engine):
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    assert unknown_focus("咖啡地边的核桃树要不要跟咖啡一起修剪？", tok, stats) == "核桃树"
    assert unknown_focus("咖啡嫩梢上有卷叶虫，打什么药？", tok, stats) == "卷叶虫"  # a name: 卷叶 (symptom) does not excuse it
    assert unknown_focus("咖啡地里能打草铵膦吗？", tok, stats) != ""  # jieba: 打草/铵膦; the chemistry character names it
    assert unknown_focus("苗圃里爬着一种大肉虫，咋个整？", tok, stats) == ""  # a description, not a name


def test_another_crop_is_the_question_when_coffee_is_not_named(sample_engine):
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    assert other_crop("芒果树开花时打什么药？", tok, stats) == "芒果树"
    assert other_crop("甘蔗得了黑穗病咋办？", tok, stats) == "甘蔗"
    assert other_crop("行间套种玉米行不行？", tok, stats) == ""  # planted beside coffee: the manual teaches that
    assert other_crop("荫蔽树选杧果好不好？", tok, stats) == ""  # a shade question
    assert other_crop("杧果树当遮荫树要咋个修？", tok, stats) == ""  # its role beside coffee
    assert other_crop("包谷地里的草用啥药除？", tok, stats) in ("包谷", "玉米")
    assert other_crop("行距一米五的地能种几棵？", tok, stats) == ""  # a metre is no crop
    assert other_crop("咖啡地里种甘蔗行不行？", tok, stats) == ""  # names coffee
    assert other_crop("腊月间园子头挂过果的大树，放大水漫灌一下要得不？", tok, stats) == ""  # 挂过果: has borne fruit
    # a doubled character is a diminutive (果果: the coffee cherries), no crop's name
    assert other_crop("三百棵挂果的树，一棵一千颗左右果果，一亩大概能收好多鲜果？", tok, stats) == ""
    assert other_crop("果果有好多斤", tok, stats) == ""
    # a growers' word the synonym table reads (种果 → 留种|种子: the seed fruit) is that, no crop; a crop's other name
    # (包谷 → 玉米) is still the crop
    assert other_crop("想自己留点种子育苗，一般几月份开始在树上摘种果？", tok, stats) == ""
    assert other_crop("包谷要施好多肥", tok, stats) == "玉米"


def test_a_kind_of_a_known_thing_the_kb_never_names_is_the_focus(sample_engine):
    """厌氧发酵 is a kind of 发酵 the KB never describes (it has no 厌氧): the question is about that kind, however much
    of 发酵, 密封 and 咖啡 the rest of it knows. 枝枝叶叶 is a grower's way of saying 枝叶, no kind of 叶."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    assert unknown_focus("听说有种厌氧发酵 把咖啡装桶里密封起来发酵 具体咋个整", tok, stats) == "厌氧发酵"
    assert unknown_focus("采果季请了几个工，出了事要不要买工伤保险", tok, stats) == "工伤保险"
    assert unknown_focus("采后修剪剪下来的那些枝枝叶叶，能不能就铺在地里头", tok, stats) == ""
    assert unknown_focus("水洗法的发酵池要密封不？", tok, stats) == ""


def test_growers_everyday_words_for_what_the_kb_names_are_no_unknown_focus(sample_engine):
    """泥巴 (soil), 州市 (a prefecture: the KB's 产区)."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    assert unknown_focus("装营养袋的土咋个配，泥巴跟粪兑好多？", tok, stats) == ""
    assert unknown_focus("云南哪个州市种咖啡最多？", tok, stats) == ""
    # a relative's home is where, not what is asked (那我舅舅家1600米以上的呢: round 22's conv21 refused it);
    # 脚底下 is the foot of the tree, 钟头 an hour
    assert unknown_focus("我舅舅家1600米以上 咖啡一般啥时候开始采？", tok, stats) == ""
    assert unknown_focus("生鸡屎直接倒到咖啡脚底下要得不？", tok, stats) == ""
    assert unknown_focus("要是刚喷完三四个钟头就下大雨了呢", tok, stats) == ""
    # a growers' word the synonym table maps onto a KB topic names that topic: 开荒 (开垦, 清园) beside 火烧山, so the
    # everyday 省事 is no focus (round 27's colloquial26 was refused for it); 药 of 医药费 is a character, no such word
    assert unknown_focus("开荒整新地，放把火烧山省事得很，要不要得？", tok, stats) == ""
    assert unknown_focus("请来摘咖啡的工人从坎子上摔下去了，医药费我要出好多？", tok, stats) != ""
    # 灵 ends names (多菌灵); after an adverb it says a remedy works (又便宜又灵): round 27's control was refused for 又灵
    assert unknown_topic("隔壁说打2,4-滴除草又便宜又灵 咖啡地头打得不", sample_engine.index.corpus_text, tok.synonyms, tok) == ""
    assert unknown_topic("隔壁说打速杀灵除草又便宜 咖啡地头打得不", sample_engine.index.corpus_text, tok.synonyms, tok) != ""


def test_another_crops_own_disease_or_fertiliser_is_not_the_manuals_even_beside_coffee(sample_engine):
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    banana = "咖啡地里遮荫的香蕉叶子上起黄褐色的斑，一片片枯掉，香蕉这个叶斑病要打哪样药？"
    assert other_crop(banana, tok, stats) == ""  # names coffee and the crop's role beside it
    assert other_crops_care(banana, tok, stats).startswith("香蕉的叶斑")
    assert other_crops_care("咖啡地里套的澳洲坚果已经挂果了，坚果树一棵一年要施好多斤复合肥才够？", tok, stats) == "澳洲坚果的复合肥"
    # what the manual does say about the crop beside coffee, or about coffee beside it
    assert other_crops_care("咖啡和香蕉间作，香蕉行距留好宽？", tok, stats) == ""  # 香蕉行距约 4–6 m
    assert other_crops_care("套种的澳洲坚果要几年才结果？", tok, stats) == ""
    assert other_crops_care("香蕉树下的咖啡要施多少复合肥？", tok, stats) == ""  # the fertiliser is coffee's
    assert other_crops_care("种了香蕉遮荫，锈病会不会轻一些？", tok, stats) == ""  # rust in its own clause: coffee's
    assert other_crops_care("咖啡地头套种香蕉遮阴，香蕉离咖啡好远？", tok, stats) == ""  # its role beside coffee
    hits = sample_engine.search(banana).evidence
    coverage = assess(banana, hits, tok, sample_engine.index.corpus_text, stats)
    assert not coverage.covered and "香蕉" in coverage.missing


def test_a_latin_name_the_kb_never_writes(sample_engine):
    corpus = sample_engine.index.corpus_text
    assert unknown_latin_name("GAP认证怎么申请？", corpus) == "GAP"
    assert unknown_latin_name("SCA杯测多少分算精品？", corpus) == ""
    # a measure the KB writes, typed with its value, is no name (round 27's conv27: 测出来pH4.7 refused for "PH4")
    assert unknown_latin_name("测出来pH4.7 要撒石灰吧 撒好多", corpus) == ""
    assert unknown_latin_name("测出来ph5", corpus) == ""
    assert unknown_latin_name("买个XR4型号的打药机", corpus) == "XR4"
    # cultivars given as numbers, two listed, neither in the KB (round 38's o37-011: macadamia's 695、788 was answered
    # with the intercropping passage); figures are not names (1000到1600米, 数了400片), nor numbers the KB writes
    assert unknown_latin_name("咖啡地里想套种澳洲坚果 选哪个品种好？听人说有695、788这些", corpus) == "695"
    assert unknown_latin_name("坚果选哪个品种好，695还是344？", corpus) == "695"
    assert unknown_latin_name("我们这点海拔1000 1600米之间，选哪个品种好", corpus) == ""
    assert unknown_latin_name("数了365、400片叶子，这个算好多", corpus) == ""  # no cultivar asked


def test_what_disease_and_falling_ill_name_no_disease(sample_engine):
    corpus = sample_engine.index.corpus_text
    assert unknown_topic("叶子上起黑斑，是啥子病？", corpus) == ""  # 啥子病: "what disease", not a 子病
    assert unknown_topic("遭病的树咋个救？", corpus) == ""
    assert unknown_topic("咖啡叶子上有红蜘蛛，是啥子病？", corpus) == "红蜘蛛"  # a pest the sample KB never names
    synonyms = sample_engine.tokenizer.synonyms  # growers' names the table maps are no unknown disease
    assert unknown_topic("咖啡得了黄粉病咋办？", corpus, synonyms) == "" and unknown_topic("咖啡得了黄粉病咋办？", corpus) == "粉病"
    assert unknown_topic("叶子得了黄叶病咋个整？", corpus, synonyms) == ""
    assert unknown_topic("咖啡得了白粉病咋办？", corpus, synonyms) == "粉病"  # powdery mildew: no key maps it


# processing_regulation.txt's honey process: 7.2 names 红蜜、黑蜜 and declines their figures; 7.1 and 7.3 state others
HONEY = ("7.1 鲜果脱皮后带着果胶直接上床干燥，摊晒厚度 2～3 cm。7.2 生产上常按成品外观习惯称为黄蜜、红蜜、黑蜜等，本文件不作统一规定。"
         "7.3 干燥终点含水率为 10%～12%。")


def _passages(*texts: str, section: str = "") -> list[Hit]:
    return [Hit(Chunk("0" * 8, i, "x.md", "x", section, t, 0, len(t)), 1.0) for i, t in enumerate(texts)]


def test_an_amount_asked_in_a_unit_must_stand_beside_what_it_is_asked_about(sample_engine):
    """The near miss: the KB names the topic and gives figures of the asked kind, but for something else."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    question = "澳洲坚果最低扛得住零下几度？"
    near_miss = _passages("澳洲坚果常绿、树体高大，可作咖啡园的永久荫蔽树。", "小粒咖啡叶片在 0 至 −2 °C 左右即可受害。")
    assert unanchored_amount(question, near_miss, tok, stats) == "具体数字"
    stated = _passages("澳洲坚果常绿、树体高大，成年树可耐 −4 °C 的短时低温。", "小粒咖啡叶片在 0 至 −2 °C 左右即可受害。")
    assert unanchored_amount(question, stated, tok, stats) == ""
    # a figure of another kind is no answer either (4 年 is no temperature)
    assert unanchored_amount(question, _passages("澳洲坚果定植后 4 年开始结果。"), tok, stats) == "具体数字"
    # the heading and the neighbouring sentence say what a figure is about
    headed = _passages("一般在 9–12 月最重。", section="咖啡锈病 › 发生规律")
    assert unanchored_amount("锈病一年里头哪几个月最凶？", headed, tok, stats) == ""
    assert unanchored_amount("锈病一年里头哪几个月最凶？", _passages("锈病的流行规律如下。一般在 9–12 月最重。"), tok, stats) == ""
    # a count of grains: eggs a beetle lays are not the beans in 100 g
    eggs = "旋皮天牛一只母虫要下好多粒卵？"
    assert unanchored_amount(eggs, _passages("旋皮天牛成虫在树干基部产卵。", "每 100 克生豆约 500–650 粒。"), tok, stats) == "具体数字"
    assert unanchored_amount(eggs, _passages("旋皮天牛每头雌虫产卵 30–50 粒。"), tok, stats) == ""
    # days asked are a span: the months of the year a beetle lays in do not say how many days its eggs take; 好久 (in
    # Yunnan also "when") may be answered by months
    season = _passages("旋皮天牛成虫羽化和产卵主要在 4–6 月，卵产在主干基部的树皮下。")
    assert unanchored_amount("旋皮天牛的卵要几天才孵得出来？", season, tok, stats) == "具体数字"
    hatch = _passages("旋皮天牛的卵产在主干基部的树皮下，卵期 7–10 天。")
    assert unanchored_amount("旋皮天牛的卵要几天才孵得出来？", hatch, tok, stats) == ""
    assert unanchored_amount("旋皮天牛的成虫好久出来？", season, tok, stats) == ""
    # a count of things (好多个), in a figure: 一个 is an article, and 几个月, 哪几个 ask a time and which
    pores = _passages("要看果实顶端有没有一个约 1 mm 的小圆孔，有孔的多是果小蠹蛀的。")
    assert unanchored_amount("果子上打孔的小甲虫，一只母虫能下好多个卵？", pores, tok, stats) == "具体数字"
    laid = _passages("咖啡果小蠹雌虫在果实内产卵，每头可产卵 30–60 个。")
    assert unanchored_amount("果子上打孔的小甲虫，一只母虫能下好多个卵？", laid, tok, stats) == ""
    smoke = _passages("熏烟防霜时每亩堆 6–8 个烟堆，均匀摆放在园地上风处。")
    assert unanchored_amount("熏烟防霜一亩地要堆几个烟堆？", smoke, tok, stats) == ""
    assert unanchored_amount("熏烟防霜是哪几个步骤？", pores, tok, stats) == ""
    # generations a year, in figures or in words ("多代"), of the insect asked about
    assert unanchored_amount("绿蚧一年要发好多代？", _passages("咖啡绿蚧一年发生多代，世代重叠。"), tok, stats) == ""
    assert unanchored_amount("绿蚧一年要发好多代？", _passages("咖啡绿蚧在嫩梢上吸汁。", "天牛一年发生 1 代。"),
                             tok, stats) == "具体数字"


def test_how_much_of_a_thing_the_kb_never_names_is_its_focus(sample_engine):
    """An amount asked of a word no passage uses (好多负离子, 咖啡因有好多) cannot be stated, however much else of the
    question the KB knows; the same word in a clause that only tells ("many") is judged as before."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    assert unknown_focus("一亩咖啡地一年要好多负离子才够？", tok, stats) == "负离子"
    assert unknown_focus("卡蒂姆鲜果里头咖啡因有好多？", tok, stats) == "咖啡因"
    assert unknown_focus("咖啡地里飘来好多负离子，对结果有好处没得？", tok, stats) == ""
    assert unknown_focus("卡蒂姆鲜果里头咖啡因多不多？", tok, stats) == ""
    assert unknown_focus("杯测打分时有瑕疵的杯子要扣好多分？", tok, stats) == ""  # the points, not the cups, are asked


def test_which_chemical_must_stand_beside_what_it_is_asked_for(sample_engine):
    """The near miss of a remedy: the KB names another crop's disease (香蕉枯萎病, in its intercropping advice) and
    names fungicides for coffee's own diseases, but none for that one."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    question = "香蕉得了枯萎病用什么药治？"
    near_miss = _passages("种苗应选用无病组培苗，不从香蕉枯萎病发生区调苗。",
                          "锈病发病初期用 25% 三唑酮可湿性粉剂 1000–1500 倍液喷雾。")
    assert unanchored_remedy(question, near_miss, tok, stats) == "防治药剂"
    stated = _passages("香蕉枯萎病发病初期可用 50% 多菌灵可湿性粉剂 500 倍液灌根。")
    assert unanchored_remedy(question, stated, tok, stats) == ""
    rust = _passages("咖啡锈病的化学防治：发病初期用 25% 三唑酮可湿性粉剂 1000–1500 倍液喷雾。")
    assert unanchored_remedy("咖啡锈病该打啥子药？", rust, tok, stats) == ""
    # spraying, the pesticides one has, or whose interval counts asks for no chemical: "打药得不得", "剩下的农药咋个放"
    for asks_none in ("大中午太阳辣得很，这个时候打药得不得？", "剩下的农药拿饮料瓶分装起放着行不行？",
                      "先打了铜制剂又打了三唑酮，等几天摘果按哪个药算？"):
        assert unanchored_remedy(asks_none, near_miss, tok, stats) == ""
    # a percentage names a chemical when a product's name follows it (50% 多菌灵); a share of shade (荫蔽度保持
    # 30%–40%) names none, however close it stands to the words of a question about another crop
    shaded = "给咖啡遮阴的香蕉遭了枯萎病，叶子黄了，这个香蕉咋个医？打哪样药？"
    shade = _passages("合理荫蔽：成龄园荫蔽度保持 30%–40%。无荫蔽园地先种山毛豆、木豆、香蕉等临时荫蔽树，叶子不易发病。")
    assert unanchored_remedy(shaded, shade, tok, stats) == "防治药剂"
    assert unanchored_remedy(shaded, _passages("香蕉枯萎病发病初期，叶子发黄时用 50% 多菌灵灌根。"), tok, stats) == ""


def test_an_amount_is_stated_of_what_the_asking_clause_names(sample_engine):
    """The crop or proper name the asking clause names (澳洲坚果, 瑰夏) must stand beside the figure: coffee's frost
    temperature, in a paragraph that shares the description's 结霜, does not say what the nut tree withstands, nor
    Catimor's yield Geisha's."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    question = "澳洲坚果最低扛得住零下几度？我那点冬天要结霜。"
    coffee = _passages("晴朗无风的夜晚地面结霜，咖啡叶片温度降到 −2 °C 以下就会受冻。",
                       "澳洲坚果常绿、树体高大，与咖啡间作可以防风遮荫。")
    assert unanchored_amount(question, coffee, tok, stats) == "具体数字"
    stated = _passages("澳洲坚果成龄树能耐短时 −4 °C 的低温，幼树遇结霜要包扎防寒。")
    assert unanchored_amount(question, stated, tok, stats) == ""
    # Geisha named nowhere in the evidence, Catimor (named by the comparing clause) beside its own yield
    geisha = "瑰夏管得好的话一亩地一年能收好多斤鲜果？跟卡蒂姆比要少好多斤？"
    catimor = _passages("卡蒂姆盛产期一亩鲜果产量 1000–1500 kg。\n施肥要跟上产量。")
    assert unanchored_amount(geisha, catimor, tok, stats) == "具体数字"
    both = _passages("瑰夏产量很低，一亩鲜果约 300 kg，卡蒂姆一亩鲜果 1000–1500 kg。")
    assert unanchored_amount(geisha, both, tok, stats) == ""
    # a thing, not a name: the manual calls 红果 鲜果, and states their count beside that word
    counted = _passages("估产以地块为单位选点。成熟鲜果的单果重多在 1.5–2 g之间，每公斤约 500–650 粒。")
    assert unanchored_amount("估产的时候，一公斤红果子大概有好多颗？", counted, tok, stats) == ""


def test_a_designation_asked_must_be_stated_of_what_it_is_asked_of(sample_engine):
    """哪几个编号 asks a line's code, which the passages on Sarchimor's lines never give (and a number of
    something else is none); a date (几号) asks none."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    question = "萨奇姆听说分好几个品系，具体是哪几个编号？"
    lines = _passages("萨奇姆各品系在云南不同海拔的耐寒性、产量和品质表现差异较大，应选用经过当地试种的品系。",
                      "萨奇姆抗锈病，丰产性较好，矮秆品种通常每亩可种 300 株左右。")
    assert unanchored_code(question, lines, tok, stats) == "具体编号"
    stated = _passages("萨奇姆在云南推广的主要是 T5296 等品系。")
    assert unanchored_code(question, stated, tok, stats) == ""
    assert unanchored_code("萨奇姆几号开始采？", lines, tok, stats) == ""


def test_a_transliterated_name_is_a_topic(sample_engine):
    """jieba tags 卡布奇诺 as a transliterated name (nrt): a word the KB never uses, and all the question names."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    assert "卡布奇诺" in unknown_words("拿铁和卡布奇诺有哪样区别？", tok, stats)
    assert unknown_focus("拿铁和卡布奇诺有哪样区别？哪个奶放得多？", tok, stats) == "卡布奇诺"


def test_a_farm_animals_feeding_or_health_is_not_taught(sample_engine):
    """The manual teaches coffee: how much to feed a pig, or what ails it, is no question it answers, though it names
    pig manure and says a cover crop is no fodder (what is fed is then asked about, not the animal)."""
    tok = sample_engine.tokenizer
    assert animal_care("脱下来的咖啡果皮拿来喂猪得不得？一头猪一天喂好多斤？", tok) == "猪的饲养和疾病"
    assert animal_care("园子边上养的猪不吃食、发烧，是哪样病？", tok) == "猪的饲养和疾病"
    assert animal_care("行间种了猪屎豆当绿肥，割下来的能不能拿去喂牛喂猪？", tok) == ""
    assert animal_care("沤好的猪粪一棵咖啡树下好多？", tok) == ""
    assert animal_care("牛粪和鸡粪哪个肥效快？", tok) == ""


def test_a_tables_figures_carry_their_columns_units(sample_engine):
    """A table states its unit once, in the column's name (行距（m）, 每亩株数（约）): the row "卡蒂姆…| 370 |" answers
    how many Catimor plants a mu takes, and says nothing of a cultivar it does not name."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    table = _passages("9.2 推荐株行距\n表 1 小粒咖啡推荐株行距\n| 品种类型 | 整形方式 | 行距（m） | 株距（m） | 每亩株数（约） |\n"
                      "| 卡蒂姆、萨奇姆等矮秆紧凑型 | 单干 | 1.8 | 1.0 | 370 |\n"
                      "| 铁皮卡、波旁等高秆型 | 单干或多干 | 2.0 | 1.3～1.5 | 222～256 |")
    assert unanchored_amount("卡蒂姆一亩地栽好多棵合适？", table, tok, stats) == ""
    assert unanchored_amount("瑰夏一亩地栽好多棵合适？", table, tok, stats) == "具体数字"
    assert "| 卡蒂姆、萨奇姆等矮秆紧凑型 | 单干 | 1.8 m | 1.0 m | 370 株 |" in _with_column_units(table[0].chunk.text)
    # a passage that opens inside a table: no row names the columns, so no figure is given a unit
    headless = "| 1 年生 | 10–15 | 每株 5 株 |\n| 2 年生 | 20–30 | 8 |"
    assert _with_column_units(headless) == headless


def test_a_count_per_kilogram_is_no_price():
    """一公斤…好多颗 counts fruit, as 一斤…好多粒 does; 一公斤…好多 alone still asks a price."""
    counted = _passages("成熟鲜果的单果重多在 1.5–2 g之间，每公斤约 500–650 粒。")
    assert missing_fact("估产要晓得果子重量，红果一公斤大概有好多颗？", counted) == ""
    assert missing_fact("红果一公斤能卖好多？", counted) == "价格"


def test_a_question_words_tail_is_no_topic(sample_engine):
    """jieba cuts 咋个数 as 咋/个数: 个数 is the tail of the question word 咋个, not a word the question is about."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    assert "个数" not in unknown_words("收购点嫌我家果子青的多，自己咋个数一下熟果占好多？", tok, stats)
    assert unknown_focus("收购点嫌我家果子青的多，自己咋个数一下熟果占好多？", tok, stats) == ""


def test_how_long_is_answered_in_words_too(sample_engine):
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    same_day = _passages("鲜果浮选后应立即脱皮，当天采摘的鲜果应在当天脱皮完毕。")
    assert unanchored_amount("鲜果采回来多久要脱皮？", same_day, tok, stats) == ""
    assert unanchored_amount("鲜果采回来多久要脱皮？", _passages("脱皮机要调好间隙。"), tok, stats) == "具体数字"


def test_how_long_is_answered_in_minutes_as_a_standard_writes_them(sample_engine):
    """静置 3～5 min answers 要等好久 (round 28's dev28 was refused: min was no unit of time)."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    question = "鲜果倒进浮选槽里搅一搅，要等好久再捞浮起来的？"
    settled = _passages("4.2.1 浮选槽（池）应注入清水，鲜果倒入后充分搅动，静置 3～5 min。")
    assert unanchored_amount(question, settled, tok, stats) == ""
    assert unanchored_amount(question, _passages("4.2.1 浮选槽（池）应注入清水，鲜果倒入后充分搅动。"), tok, stats) == "具体数字"


def test_a_name_stands_beside_its_figure_in_the_kbs_word_for_it(sample_engine):
    """遮荫树 is written 荫蔽树 in the KB (the synonym table): the figure beside 荫蔽树冠 is of the shade tree the grower
    names (round 28's adversarial-oos27 control was refused)."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    question = "有遮荫树的咖啡，打霜的晚上树底下比空地上暖和好多度"
    shaded = _passages("霜冻多发生在 12 月至翌年 2 月晴朗无风的夜晚。荫蔽树冠减少夜间辐射散热，使树冠下温度比空旷处高约 1–2 °C。")
    assert unanchored_amount(question, shaded, tok, stats) == ""
    bare = _passages("霜冻多发生在晴朗无风的夜晚。荫蔽树可减轻受冻。", "小粒咖啡叶片在 0 至 −2 °C 左右即可受害。")
    assert unanchored_amount(question, bare, tok, stats) == "具体数字"


def test_a_head_after_grammar_is_no_name(sample_engine):
    """The character before 病 or 蚜虫 that ends a word of grammar (看得到/病, 嫩梢上/蚜虫) is no part of a name: the head
    stands alone (round 28's colloquial27 and adversarial-oos27 were refused for 到病 and 上蚜虫); a modifier is (红蜘蛛)."""
    corpus, tok = sample_engine.index.corpus_text, sample_engine.tokenizer
    assert unknown_topic("八月才看得到病，六七月打药有哪样用？", corpus, tok.synonyms, tok) == ""
    assert unknown_topic("咖啡正开着花 嫩梢上蚜虫有点多 这阵能不能打杀虫药", corpus, tok.synonyms, tok) == ""
    assert unknown_topic("叶子上有红蜘蛛咋个打", corpus, tok.synonyms, tok) == "红蜘蛛"
    assert unknown_topic("咖啡得了白粉病咋办？", corpus, tok.synonyms, tok) == "粉病"


def test_a_growers_phrase_over_jiebas_cut_names_its_topic(sample_engine):
    """怀着娃 (pregnant: the KB's 孕期) is cut 怀着/娃娃, yet names what the spraying rules say of it, so 姑娘 is no
    focus (round 28's colloquial27 was refused for it)."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    assert unknown_focus("我家姑娘怀着娃娃，想帮忙背药桶打药，要得不？", tok, stats) == ""
    assert unknown_focus("我家姑娘想帮忙背药桶，要得不？", tok, stats) == "姑娘"


def test_a_kilogram_of_seed_finds_the_count_per_kilogram(sample_engine):
    """公斤 is the KB's 千克 (每千克种子粒数): 咖啡种子一公斤好多颗 did not find the nursery rule's count and was refused
    (round 28's colloquial27 and conv28)."""
    evidence = sample_engine.search("咖啡种子一公斤好多颗").evidence
    assert any("每千克种子粒数" in h.chunk.text for h in evidence), [h.chunk.section for h in evidence]


def test_the_diseases_second_name_finds_its_chapter(sample_engine):
    """褐斑病 is the KB's own second name for 褐眼斑病 (咖啡褐眼斑病又叫褐斑病): 褐斑病打啥药 (round 27's colloquial26) found
    only the general spraying rules, none of the disease's passages, and was refused. The disease's control section
    is among the first two (since round 36's chunking the general rules' passage, which names the fungicides, may lead)."""
    evidence = sample_engine.search("褐斑病打啥药").evidence
    assert any("褐眼斑病的防治" in h.chunk.section for h in evidence[:2]), [h.chunk.section for h in evidence]


def test_a_growers_word_anchors_through_the_synonym_table(sample_engine):
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    rust = _passages("云南的咖啡锈病在雨季开始后逐步加重，9–12 月是发病高峰。")
    assert unanchored_amount("叶子背面起黄粉的那种病，一年里头哪几个月最凶？", rust, tok, stats) == ""


@pytest.mark.parametrize("question", ["几棵咖啡树长得矮小发黄，咋个查？", "园子里有几棵叶子黄了，是缺啥？", "好几年没修枝了，咋个整？",
                                      "哪些农药是不准打在咖啡上的？说几个名字嘛",  # name a few
                                      "澳洲坚果种在咖啡地里好不好？"])
def test_a_few_trees_or_years_ask_no_amount(sample_engine, question):
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    assert unanchored_amount(question, _passages("澳洲坚果常绿、树体高大。咖啡树矮小发黄多是缺肥。"), tok, stats) == ""


def test_a_follow_up_is_not_held_to_its_own_few_words(sample_engine):
    """Only a question as asked is judged: a follow-up's words ("隔好久打一回") name too little to anchor a figure."""
    tok, stats, corpus = sample_engine.tokenizer, sample_engine.term_stats, sample_engine.index.corpus_text
    own = "澳洲坚果扛得住零下几度？"
    near_miss = _passages("澳洲坚果常绿、树体高大，可作咖啡园的永久荫蔽树。", "小粒咖啡叶片在 0 至 −2 °C 左右即可受害。")
    assert assess(own, near_miss, tok, corpus, stats).missing == "具体数字"
    assert assess("咖啡 荫蔽树 " + own, near_miss, tok, corpus, stats, asked=own).missing == ""


def test_asked_facts_come_from_the_users_own_words(sample_engine):
    """A follow-up searched with a word carried from the previous turn (贵不贵) is not a price question."""
    tok, stats, corpus = sample_engine.tokenizer, sample_engine.term_stats, sample_engine.index.corpus_text
    own = "隔几天浇一回？"
    rewritten = "催花水 贵不贵 旱季 " + own
    hits = sample_engine.search(rewritten).evidence
    assert assess(rewritten, hits, tok, corpus, stats).missing == "价格"
    assert assess(rewritten, hits, tok, corpus, stats, asked=own).missing == ""


@pytest.mark.parametrize("question", ["啶虫脒兑多少水打咖啡蚜虫？", "鲜果收购点一斤给几毛？", "芒果树开花时打什么药？"])
def test_the_engine_refuses_and_names_what_is_missing(sample_engine, question):
    answer = sample_engine.answer(question)
    assert not answer.covered and not answer.citations and "知识库中没有" in answer.text


@pytest.mark.parametrize("question", ["咖啡壶煮咖啡要煮多久？", "榨汁机能不能拿来打咖啡果？"])
def test_a_rare_dictionary_word_of_three_characters_is_a_word_not_a_fragment(sample_engine, question):
    # 咖啡壶 and 榨汁机 are in jieba's dictionary with a low count: words the KB never uses, not segmentation debris
    answer = sample_engine.answer(question)
    assert not answer.covered and not answer.citations, answer.text


@pytest.mark.parametrize("question", ["天气预报说今晚最低3度，低处的咖啡会冻吗？", "从外县调咖啡苗要办什么手续？",
                                      "咖啡地里套种香蕉，香蕉种多密？", "三唑酮防锈病兑多少倍？",
                                      # Yunnan and everyday words the synonym table maps (none a topic the KB lacks)
                                      "冷窝子里头的咖啡咋个防霜？", "红土地种咖啡要不要撒石灰？", "半坡上种咖啡好不好？",
                                      "施肥打药的活路一年咋个安排？"])
def test_answerable_questions_phrased_like_the_refused_ones_are_answered(sample_engine, question):
    answer = sample_engine.answer(question)
    assert answer.covered and answer.citations


@pytest.mark.slow
def test_the_held_out_out_of_scope_set_is_refused_and_its_controls_answered(eval_cfg, tmp_path):
    """adversarial-oos2.jsonl: 42 out-of-scope questions and 27 answerable controls phrased like them, written before
    these principles and kept out of their tuning (refused 19/42 and controls 2/27 before)."""
    from pathlib import Path

    from rag_core.eval.run import evaluate

    gold = Path(__file__).parent / "data" / "eval" / "adversarial-oos2.jsonl"
    full = evaluate(eval_cfg, gold, ["full"], runs=1, out_dir=tmp_path / "o", resamples=200)["systems"]["full"]
    assert full["refusal_rate_unanswerable"] >= 0.8
    assert full["false_refusal_rate"] <= 0.05


def test_what_a_description_names_need_only_stand_in_the_figures_paragraph(sample_engine):
    """A grower describes the thing before asking about it (树皮上起一道道圈…的那种虫，哪几个月出来): the description
    identifies the passage, and the figure may stand anywhere in that paragraph (an FAQ answer's with its question);
    the asking clause's own words must still stand beside it, and another paragraph's subject is no identification."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    described = "树皮上一圈圈的，刮开里头全是木屑的那种天牛，成虫哪几个月飞出来？"
    life = _passages("这种天牛把树皮一圈圈旋断，里面塞满木屑。它在云南一年发生 1 代，以幼虫越冬。"
                     "老熟幼虫在木质部化蛹。成虫羽化和产卵主要在 4–6 月。")
    assert unanchored_amount(described, life, tok, stats) == ""
    faq = _passages("问：嫩梢上趴着淡绿色扁扁的小虫，叶子和果子上一层黑灰，怎么办？\n"
                    "答：这是绿蚧。先控制蚂蚁，保护瓢虫和寄生蜂。必要时在若虫孵化盛期喷 99% 矿物油乳油 150–200 倍液。")
    assert unanchored_remedy("嫩梢上趴着绿色扁扁的小虫，叶子果子黑黢黢的，要打哪样药？", faq, tok, stats) == ""
    # the remedy two paragraphs up is for another subject: the described one has none
    other = _passages("叶斑病：发病初期喷 0.5% 波尔多液，10–15 d 一次。\n褐斑病：叶上出现褐色圆斑，多雨季节发生重。\n"
                      "根结线虫病：根上有大小不一的瘤状根结，病苗应销毁。")
    assert unanchored_remedy("老树根上长满疙瘩，说是根结线虫，用啥子药灌根？", other, tok, stats) == "防治药剂"


@pytest.mark.parametrize("question, unknown", [
    # 查一回病虫: 回 counts the visits (as 次, 遍 do); 回病 is no disease the KB lacks
    ("多久要去园子里查一回病虫？", ""),
    ("雨季要查几遍病虫？", ""),
    ("园子里的咖啡得了猝死病咋个整？", "死病"),
    # 鸡瘟 is a disease by its head character as 锈病 is; 黑枝小蠹 a bark beetle the KB lacks beside its 果小蠹
    ("放养的鸡打瞌睡、拉绿屎，是不是鸡瘟？", "鸡瘟"),
    ("枝条上好多针尖大的小孔，是不是黑枝小蠹？", "枝小蠹"),
    ("咖啡果小蠹咋个防？", ""),
])
def test_a_name_is_read_by_its_head_and_a_classifier_before_it_names_nothing(sample_engine, question, unknown):
    assert unknown_topic(question, sample_engine.index.corpus_text, sample_engine.tokenizer.synonyms) == unknown


def test_growers_words_and_abbreviations_map_onto_the_kbs(sample_engine):
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    assert unknown_focus("育苗的床子上铺沙子要铺好多？", tok, stats) == ""
    assert unknown_focus("我们这点年均温好多度算合适？", tok, stats) == ""


def test_more_kinds_of_amount_must_stand_beside_what_is_asked(sample_engine):
    """A wind force (级), a count of sprayer loads (桶), a share (好多比例), a pH and a line's number (哪个号) are
    figures of their own kind; 第一天 is a day's place in a sequence, no span of days."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    wind = "刮几级的大风咖啡枝条就会吹断？"
    assert unanchored_amount(wind, _passages("大风会吹断咖啡枝条，风口地块要种防风林。", "风力 3 级以上不宜喷药。"),
                             tok, stats) == "具体数字"
    assert unanchored_amount(wind, _passages("风力达到 8 级以上的大风会吹断咖啡枝条。"), tok, stats) == ""
    loads = "电动喷雾器充一次电能打几桶药？"
    assert unanchored_amount(loads, _passages("电动喷雾器要及时充电，喷药后清洗药箱。"), tok, stats) == "具体数字"
    assert unanchored_amount(loads, _passages("电动喷雾器充满一次电可喷 8–10 桶药液。"), tok, stats) == ""
    share = "蜜处理要留好多比例的果胶？"
    assert unanchored_amount(share, _passages("蜜处理是带着果胶直接晾晒的处理方法，晒时要勤翻动。"), tok, stats) == "具体数字"
    assert unanchored_amount(share, _passages("蜜处理一般保留 30%–50% 的果胶。"), tok, stats) == ""
    acid = "发酵池的水pH降到好多就算发酵好了？"
    assert unanchored_amount(acid, _passages("发酵池宜用水泥池，发酵 12–36 小时，手搓带壳豆无滑腻感即为发酵好了。"),
                             tok, stats) == "具体数字"
    assert unanchored_amount(acid, _passages("发酵水 pH 降到 4.5 左右，带壳豆手搓不滑，即为发酵好了。"), tok, stats) == ""
    first_day = _passages("洗净的湿豆第一天宜薄摊，厚度不超过 3 cm。")
    assert unanchored_amount("洗好的湿豆要晒几天才干？", first_day, tok, stats) == "具体数字"
    assert unanchored_amount("洗好的湿豆要晒几天才干？", _passages("洗净的湿豆一般晒 7–10 天干燥。"), tok, stats) == ""
    lines = _passages("萨奇姆各品系在云南不同海拔的表现差异较大，应选用经过当地试种的品系。")
    assert unanchored_code("萨奇姆选哪个号的品系好？", lines, tok, stats) == "具体编号"


def test_a_contaminants_limit_in_micrograms_is_no_kilogram_figure(sample_engine):
    """好多微克 asks a trace limit: 生豆 100 kg 晒到 97.8 kg beside the same words states no such figure."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    asked = "生豆里赭曲霉毒素最多好多微克？"
    drying = _passages("霉变豆可产生赭曲霉毒素等有害物质。", "含水率 12% 的生豆 100 kg，晒到 10% 后约为 97.8 kg。")
    assert unanchored_amount(asked, drying, tok, stats) == "具体数字"
    limit = _passages("生豆中赭曲霉毒素 A 不得超过 5 μg/kg。")
    assert unanchored_amount(asked, limit, tok, stats) == ""


def test_tobacco_is_another_crop(sample_engine):
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    assert other_crop("烤烟一般几月份移栽，一亩栽好多棵", tok, stats) == "烤烟"
    assert other_crop("熏烟防霜要准备些啥", tok, stats) == ""  # smoke against frost, no crop


def test_a_name_in_the_asking_sentence_must_stand_in_the_figures_paragraph(sample_engine):
    """戊唑醇打过以后，要隔几天才能采: the days asked are the fungicide's; the picking rounds' 7–10 days are not. A name
    an earlier sentence gave (试种瑰夏。…几年？) sets the scene, and a general rule may answer."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    question = "戊唑醇打过以后，要隔几天才能采果子？"
    rounds = _passages("盛采期每 7–10 天采一轮果子。", "病重时可选用戊唑醇等内吸性药剂，按标签使用。")
    assert unanchored_amount(question, rounds, tok, stats) == "具体数字"
    stated = _passages("戊唑醇的安全间隔期为 21 天，打过以后要隔 21 天才能采果子。")
    assert unanchored_amount(question, stated, tok, stats) == ""
    scene = _passages("引进新品种先小面积试种，连续观察 3 年以上，表现稳定再扩大种植。")
    assert unanchored_amount("想拿点地试种瑰夏。要观察几年才敢扩大种植？", scene, tok, stats) == ""
    # what the grower grafts or plants is no subject of the work's figure (four writers' 嫁接萨奇姆，几月份接 were
    # refused: the FAQ's grafting months name no variety); a fungicide sprayed stays one (打了戊唑醇以后)
    grafting = _passages("树桩新枝长到铅笔粗、半木质化时嫁接，一般在雨季 6～8 月，气温 20 度以上、空气湿润时成活率高。")
    assert unanchored_amount("想在截了干的老桩上嫁接萨奇姆，几月份接好？", grafting, tok, stats) == ""
    assert unanchored_amount("打了戊唑醇以后，要隔几天才能采果子？", rounds, tok, stats) == "具体数字"


def test_a_tree_of_a_word_the_kb_never_uses_is_another_crop(sample_engine):
    """jieba cuts 茶叶树 as 茶叶/树: the tree of a word the KB never uses is a crop it does not teach, whatever the
    question asks of it; a tree of the KB's own words (老树) is coffee."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    assert unknown_focus("地埂上的茶叶树要施哪样肥？", tok, stats) == "茶叶"
    assert unknown_focus("老树遭冻了，要砍掉几棵树？", tok, stats) == ""


def test_a_nutrients_content_must_be_stated_for_that_element():
    """叶片锰好多算正常: the leaf ranges give N to Fe, not Mn, and 代森锰锌 600–800 倍 or 氢氧化铜 77% state no
    content of the element inside them; 锌约 10–30 mg/kg answers zinc. How much fertiliser to give is no content."""
    ranges = _passages("叶片养分的常用参考范围：氮 2.5%–3.0%，镁 0.25%–0.40%，锌约 10–30 mg/kg，硼约 40–80 mg/kg。",
                       "褐眼斑病可用铜制剂或 80% 代森锰锌 600–800 倍，或 77% 氢氧化铜可湿性粉剂 500–800 倍液。")
    assert unstated_element("叶片送去化验，锰含量好多算正常？", ranges) == "锰的含量"  # named in the refusal
    assert unstated_element("叶子化验单上铜、锰正常该是好多？", ranges) == "铜的含量"
    assert unstated_element("叶片送去化验，锌和硼含量好多算正常？", ranges) == ""
    assert unstated_element("叶片化验镁好多算偏低？", ranges) == ""
    assert unstated_element("一亩地氮肥施好多？", ranges) == ""  # an amount of fertiliser, not a content


@pytest.mark.parametrize("check, passages, refused, answered, unasked, missing", [
    # 哪一年传到云南来的: the evidence's only year (2020年前后 of the province's planted area) is not the year rust came;
    # the year of the area, asked, is
    (unanchored_year, ("咖啡锈病是小粒咖啡最重要的病害，在云南各咖啡产区普遍发生。",
                       "云南是我国小粒咖啡的主产区，2020年前后收获面积约10万公顷（约150万亩），占全国咖啡种植面积的95%以上。"),
     "咖啡锈病是哪一年传到云南来的", "云南咖啡收获面积约150万亩是哪一年的数字", "咖啡锈病在云南普遍发生吗", "具体年份"),
    # 报关要办些啥子手续: the nursery regulation's 植物检疫手续 is for moving seedlings between counties, not for exporting
    # (round 38's o37-043 was answered with it after a drying exchange); it answers the seedlings' question
    (unanchored_paperwork, ("苗木运到后应卸放在阴凉处，及时淋水。跨县（市）调运苗木应按规定办理植物检疫手续，并附苗木标签。",
                            "云南咖啡过去主要以生豆原料形式出口，国内市场所占比重不高。"),
     "晒好了我想自己直接出口到国外卖 报关要办些啥子手续", "从外县拉咖啡苗过来种 要办哪样手续", "苗木运到后咋个放", "办理手续"),
], ids=["year", "paperwork"])
def test_an_asked_fact_must_stand_beside_what_it_is_asked_of(sample_engine, check, passages, refused, answered, unasked,
                                                             missing):
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    evidence = _passages(*passages)
    assert check(refused, evidence, tok, stats) == missing
    assert check(answered, evidence, tok, stats) == ""
    assert check(unasked, evidence, tok, stats) == ""  # no such fact asked


def test_a_rate_asked_must_be_stated_with_its_share():
    """成活率有百分之几: a rate is a share, stated by a sentence naming the rate with a figure in per cent or tenths. The
    renovation FAQ names 成活率 only as what bad weather lowers, and its passages' other figures (第 2 年, 6～8 月) are
    none; the leaf-disease rate's 5% answers 病叶率, and a rate asked of something that is not a figure asks nothing."""
    grafting = _passages("可以嫁接换种。缺点是需要一定的嫁接技术，遇到天气不好成活率会降低，没成活的要补接。",
                         "嫁接时间以 6～8 月为好，气温 20 度以上、空气湿润时成活率高；嫁接后第 2 年能少量结果。")
    rust = _passages("一般以病叶率约 5% 作为开始治疗性用药的参考指标，各地可在 5%–10% 之间掌握。")
    assert unstated_rate("老树截干以后嫁接抗锈品种，成活率一般能有百分之几", grafting) == "成活率的具体数字"
    assert unstated_rate("咖啡劈接一般成活率能有几成", grafting) == "成活率的具体数字"
    assert unstated_rate("那劈接一般成活率有好多？十棵能活几棵？", grafting) == "成活率的具体数字"
    assert unstated_rate("锈病病叶率到好多要打药", rust) == ""
    assert unstated_rate("秀病病叶率到几成就要开始打药了", rust) == ""
    assert unstated_rate("嫁接咋个整成活率才高", grafting) == ""  # how to raise it: no figure asked


def test_a_named_periods_length_must_be_stated_with_its_name(sample_engine):
    """安全间隔期到底是几天: a period named for what happens in it is what its length is of. The farming calendar's
    采收期喷药必须遵守安全间隔期 beside the picking round's 每 7–10 天一轮 states no interval (round 38's o37-001 was
    answered with it); the KB's 潜育期 with its 3–5 周 answers 潜伏期 (the synonym table's word), and a period not
    asked how long (遵守安全间隔期要注意啥) asks nothing."""
    tok = sample_engine.tokenizer
    calendar = _passages("10 月中下旬低海拔地区开始采收，只采完熟红果，每 7–10 天一轮。锈病处于高峰期，采收期喷药必须遵守安全间隔期。")
    rust = _passages("锈菌孢子萌发后从叶背气孔侵入，侵入后要经过约 3–5 周的潜育期才出现可见病斑。")
    question = "前天刚打了一遍戊唑醇，树上红果子又熟了一批。打完要等好多天才能摘果子？这个药的安全间隔期到底是几天"
    assert unstated_period(question, calendar, tok) == "安全间隔期的具体时长"
    assert unstated_period("三唑酮的安全间隔期是好多天", calendar, tok) == "安全间隔期的具体时长"
    assert unstated_period("锈病潜伏期好久？", rust, tok) == ""
    assert unstated_period("锈病潜伏期好久？", calendar, tok) == "潜伏期的具体时长"
    assert unstated_period("遵守安全间隔期要注意啥", calendar, tok) == ""  # no length asked
    assert unstated_period("打完要等好多天才能摘果子", calendar, tok) == ""  # no period named


@pytest.mark.parametrize("check, question, another, stated, missing", [
    # 萨奇姆有好几个品系，推荐哪个编号: CIFC 7963 is stated beside 卡蒂姆, in a passage that names 萨奇姆 further on; every
    # name the asking sentence gives must stand with the figure's paragraph, and that figure must not be another name's
    (unanchored_code, "萨奇姆有好几个品系，具体推荐种哪个编号的？",
     "四、品种结构\n云南咖啡的品种结构高度单一。卡蒂姆（Catimor，以CIFC 7963等品系为主）占种植面积的80%以上。"
     "但卡蒂姆在部分地区抗锈性已经减退。\n铁皮卡、波旁等传统品种杯品质量好。萨奇姆作为抗锈病的替代品种正在推广。",
     "萨奇姆在云南推广的品系以 T5296 为主，表现稳定。", "具体编号"),
    # 咪鲜胺兑好多倍: 波尔多液's 0.5%–1% in the same control paragraph is Bordeaux mixture's dose; the manual says only
    # to follow the label for prochloraz
    (unanchored_amount, "炭疽病重了想打咪鲜胺，要兑好多倍水才合适？",
     "五、咖啡炭疽病的防治方法\n3. 化学防治：发病初期喷 0.5%–1% 波尔多液保护。病害较重时，可选用咪鲜胺等内吸性药剂，"
     "按标签浓度使用。",
     "五、咖啡炭疽病的防治方法\n病害较重时，可用 25% 咪鲜胺乳油 1000–1500 倍液喷雾。", "具体数字"),
], ids=["line-number", "dose"])
def test_a_figure_beside_another_name_is_not_the_asked_ones(sample_engine, check, question, another, stated, missing):
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    assert check(question, _passages(another), tok, stats) == missing
    assert check(question, _passages(stated), tok, stats) == ""


def test_a_code_is_the_line_or_race_it_stands_beside_and_the_name_it_is_given_with(sample_engine):
    """CIFC 7963 is Catimor's line: it does not answer which rust race broke Catimor's resistance (哪几号生理小种: round
    38's d28/d35 misses), nor which line of 萨奇姆 (the sentence gives it after 卡蒂姆), nor a question that gives its
    digits itself (像卡蒂姆那个7963一样的: o37-015). It answers which line of Catimor is grown, and a line's name asked
    after a long clause (哪个品系在普洱一千二三百米那种海拔表现最好 叫啥名字: d38-067) is a code asked too."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    catimor = _passages("卡蒂姆是卡杜拉与蒂莫尔杂种杂交后选育出的品种群，包括多个品系，云南种植的主要是CIFC 7963等品系。",
                        "卡蒂姆（如 CIFC 7963 品系）原来抗锈，但咖啡锈菌有多个生理小种，随着新小种出现，部分地区抗性已经下降。",
                        "萨奇姆抗锈病，丰产性较好，杯品质量与卡蒂姆相当，部分品系表现更好。")
    for question in ("云南现在卡蒂姆上发病的锈菌是哪几号生理小种", "萨奇姆现在推广的是哪个品系？品系编号是好多嘛",
                     "萨奇姆里头哪个品系最好？有没有具体编号 像卡蒂姆那个7963一样的",
                     "萨奇姆到底哪个品系在普洱一千二三百米那种海拔表现最好 叫啥名字"):
        assert unanchored_code(question, catimor, tok, stats) == "具体编号", question
    assert unanchored_code("我们这边种的卡蒂姆是哪个品系的 听人说有个编号", catimor, tok, stats) == ""
    assert unanchored_code("萨奇姆推广的是哪个品系？品系编号是好多", _passages("萨奇姆在云南推广的品系以 T5296 为主。"),
                           tok, stats) == ""


def test_which_counties_must_be_named_beside_what_is_asked(sample_engine):
    """哪几个县发现了果小蠹: a passage on the beetle that names no place (a genus jieba tags as one, 小蠹亚科, is none)
    does not say where; one that lists the prefectures answers where coffee grows."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    beetle = _passages("咖啡果小蠹属鞘翅目象甲科小蠹亚科，是检疫性害虫，一旦发现疑似咖啡果小蠹，应采集样品送当地植保植检机构鉴定。")
    assert unanchored_place("咖啡果小蠹现在哪几个县已经发现了？", beetle, tok, stats) == "具体地名"
    grown = _passages("云南小粒咖啡主要种植在普洱、临沧、保山、德宏和西双版纳等州市。")
    assert unanchored_place("云南咖啡主要种在哪几个州市？", grown, tok, stats) == ""
    assert unanchored_place("冰雹一般打哪些地方？", beetle, tok, stats) == ""  # spots, not counties: no such ask


def test_dialect_locatives_are_no_topic(sample_engine):
    """高头 (Yunnan: up there, on top), 里头, 上头 say where, like 这边: no word the KB lacks that the question is about."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    assert unknown_focus("我那块地在1600米高头，温度大概好多？", tok, stats) == ""
    assert "里头" not in unknown_words("沤肥堆里头要烫到好多度？", tok, stats)


def test_money_told_or_denied_is_no_money_ask(hits, sample_engine):
    """那么值钱 tells, 值钱不 asks; 没得好多钱 says there is little money, it asks no sum; a price cheaper told in a
    clause that goes on (colloquial31's c31-023 was refused "价格") asks none, one asked of which asks."""
    assert missing_fact("铁皮卡那么值钱，我们这边能不能多种点？", hits) != "价格"
    assert missing_fact("尿素里头含好多氮？碳铵价钱便宜点，天热的时候拿来用要得不？", hits) != "价格"
    assert missing_fact("碳铵价钱便宜不？", hits) == "价格"
    assert missing_fact("氯化钾和硫酸钾哪个价格便宜，买哪个好？", hits) == "价格"
    assert missing_fact("现在种铁皮卡值钱不？", hits) == "价格"
    assert missing_fact("种咖啡能不能赚钱？", hits) == "价格"
    assert missing_fact("家头没得好多钱买肥，先保哪几棵树？", hits) != "价格"
    assert missing_fact("请人摘一天要好多钱？", hits) == "价格"
    text, synonyms = sample_engine.index.corpus_text, sample_engine.tokenizer.synonyms
    assert unknown_topic("上面发的查病虫记录表要填些啥？", text, synonyms) == ""


def test_a_few_wanted_or_standing_beside_is_no_amount_asked(sample_engine):
    """想整几亩 says what one wants (a few mu), 旁边几棵 counts trees standing there: no amount is asked; 养鸡 is the
    raising, not an animal the question is about; a 本子 is the KB's 记录."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    nothing = _passages("海拔1800米以上热量不足、霜冻重，不建议种植咖啡。")
    assert unanchored_amount("我们寨子在1900米的山上，我也想整几亩，得不得？", nothing, tok, stats) == ""
    assert unanchored_amount("园子头几棵老树嫩叶是红铜色的，旁边几棵又是绿的，咋个认？", nothing, tok, stats) == ""
    assert unknown_focus("家头养鸡攒了好多鸡粪，一棵咖啡要放好多？", tok, stats) == ""
    assert unknown_focus("加工的记录本子要留好多年？", tok, stats) == ""


def test_a_count_that_describes_a_kind_is_no_amount_asked():
    """整成几个杆杆的那种多干树 is the kind of tree with a few stems: it asks when and where to cut, no count (round 34's
    d34-011 was refused for want of one); 一棵留几个杆杆 asks it."""
    assert asked_amounts("想把小树整成几个杆杆的那种多干树，啥时候截，截在哪点？") == []
    assert asked_amounts("想把小树整成几根主干的那种，咋个整？") == []
    assert asked_amounts("一棵留几个杆杆好？") == [("几个", "items")]


def test_a_spacing_asked_is_a_length_stated_as_one(sample_engine):
    """一丛跟一丛隔好远 asks one plant's distance from the next: the hedge's height (高度控制在 50～100 cm) beside 行间,
    where its cuttings go, does not state it (five writers' 香根草 questions were answered so); 株距 or 间隔 does."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    question = "种香根草做植物篱 一丛跟一丛隔好远栽"
    hedge = "常用山毛豆、木豆和香根草。植物篱每年修剪 2～4 次，高度控制在 50～100 cm，修下的枝叶铺在咖啡行间作覆盖物。"
    assert unanchored_amount(question, _passages(hedge), tok, stats) == "具体数字"
    spaced = "常用山毛豆、木豆和香根草。植物篱里香根草丛与丛间隔约 30 cm，每年修剪 2～4 次。"
    assert unanchored_amount(question, _passages(spaced), tok, stats) == ""


def test_how_long_a_thing_lives_or_lasts_must_be_stated_as_a_lifespan(sample_engine):
    """成虫能活好多天 is not answered by the months the adults come out, nor 滴灌管用得了几年 by a drip line's flow; 木豆
    寿命短，2–4 年后需砍除 states how long pigeon pea serves."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    season = _passages("旋皮天牛成虫羽化和产卵主要在 4–6 月，成虫飞出后在树干基部产卵。")
    assert unanchored_lifespan("天牛成虫从树里头飞出来以后，能活好多天？", season, tok, stats) == "具体寿命"
    flow = _passages("滴灌管铺设在树冠滴水线附近，每个滴头流量 2–4 L/h，滴灌管要定期冲洗。")
    assert unanchored_lifespan("滴灌管铺下去以后，一般用得了几年就要换？", flow, tok, stats) == "具体寿命"
    assert unanchored_lifespan("滴灌带铺下去一般能用好多年才要换", flow, tok, stats) == "具体寿命"  # 好多年: how many years
    pea = _passages("木豆生长快，可作临时荫蔽，但寿命短，2–4 年后需砍除或更新。")
    assert unanchored_lifespan("木豆种下去能管几年？", pea, tok, stats) == ""


def test_a_forecast_heard_or_a_things_name_is_no_forecast_or_person_asked(hits, sample_engine):
    """今晚看样子要下霜， tells a forecast and asks how to smoke; 明天会不会下霜 and 下礼拜最低气温会降到几度 ask one. 有种
    瓢虫…叫啥子名字 asks an insect's name; 哪个传教士 and 那个专家叫啥名字 ask a person's."""
    assert missing_fact("今晚看样子要下霜，熏烟的话一亩堆几堆？", hits) != "天气和行情预测"
    assert missing_fact("广播里讲明天有暴雨，一天下好多雨才算暴雨？", hits) != "天气和行情预测"
    assert missing_fact("明天会不会下霜？", hits) == "天气和行情预测"
    assert missing_fact("下礼拜普洱这边最低气温会降到几度？", hits) == "天气和行情预测"
    assert missing_fact("听人说有种瓢虫专门吃粉蚧，叫啥子名字？", hits) != "人名"
    assert missing_fact("云南咖啡是哪个传教士带进来的？", hits) == "人名"
    assert missing_fact("上回来讲课的那个专家叫啥名字？", hits) == "人名"


def test_a_figure_the_kb_declines_or_another_chemicals_dose_answers_no_amount(sample_engine):
    """7.2 names 红蜜、黑蜜 and says 本文件不作统一规定: its neighbours' figures (7.1's, 7.3's) are about something else.
    噻嗪酮 1000–1500 倍液，或螺虫乙酯等…按标签浓度使用 doses 噻嗪酮, not 螺虫乙酯; 99% 矿物油 is the oil's own."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    honey = _passages(HONEY)
    assert unanchored_amount("红蜜跟黑蜜各要留好多比例的果胶？", honey, tok, stats) == "具体数字"
    assert unanchored_amount("蜜处理的豆子晒到含水率好多比例算干？", honey, tok, stats) == ""
    scale = _passages("药剂防治：可用 25% 噻嗪酮可湿性粉剂 1000–1500 倍液，或螺虫乙酯等对天敌较安全的药剂，按标签浓度使用。"
                      "在若虫孵化盛期喷 99% 矿物油乳油 150–200 倍液。", section="咖啡绿蚧和粉蚧的防治方法")
    assert unanchored_amount("绿蚧多得很，想打螺虫乙酯，兑好多倍合适？", scale, tok, stats) == "具体数字"
    assert unanchored_amount("绿蚧多得很，想打噻嗪酮，兑好多倍合适？", scale, tok, stats) == ""


def test_how_long_an_insects_stage_lasts_must_be_stated_with_the_stage(sample_engine):
    """卵要几天才孵出来 is not answered by a spraying interval written after 若虫孵化盛期 in another clause, nor by the
    months adults emerge in; 卵期 7–10 天 states it."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    spray = _passages("在若虫孵化盛期喷 99% 矿物油乳油 150–200 倍液，间隔 10–15 天，连喷 2 次。",
                      "灭字脊虎天牛成虫 4–6 月羽化产卵，卵多产在树皮裂缝内。", section="咖啡绿蚧 天牛")
    assert unanchored_stage("灭字脊虎天牛产在树皮缝里的卵，要几天才孵得出来？", spray, tok, stats) == "孵化的天数"
    assert unanchored_stage("咖啡绿蚧从若虫孵出来到长成，要好多天？", spray, tok, stats) == "孵化的天数"
    assert unanchored_stage("灭字脊虎天牛在树干头化蛹，蛹期有好多天？", spray, tok, stats) == "蛹期的天数"
    stated = _passages("灭字脊虎天牛卵多产在树皮裂缝内，卵期 7–10 天。")
    assert unanchored_stage("灭字脊虎天牛产在树皮缝里的卵，要几天才孵得出来？", stated, tok, stats) == ""
    assert unanchored_stage("绿蚧一年要打几次药？", spray, tok, stats) == ""  # no stage asked
    # 这几天 tells when, it asks no span (round 38's c37-031 was refused for 发育的天数: 小苗刚长成蝴蝶样子，这几天连着下雨)
    assert unanchored_stage("沙床里的小苗刚长成蝴蝶样子，这几天连着下雨，一片一片地倒", spray, tok, stats) == ""


def test_how_to_treat_a_named_disease_needs_a_control_measure_beside_it(sample_engine):
    """不从香蕉枯萎病发生区调苗 mentions the banana's wilt in passing and says nothing of treating it; the rust passage
    says how to spray for rust. Frost's and erosion's 咋个防 name no pest or disease: not this test's."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    banana = _passages("香蕉种苗应选用无病组培苗，不从香蕉枯萎病发生区调苗。", section="咖啡—香蕉间作模式")
    assert unanchored_control("咖啡行间种的香蕉，香蕉枯萎病咋个治？", banana, tok, stats) == "香蕉枯萎病的防治方法"
    rust = _passages("咖啡锈病的防治：6–7 月喷 1% 波尔多液或铜制剂，9–12 月发病高峰前再喷一次。")
    assert unanchored_control("咖啡锈病咋个治？", rust, tok, stats) == ""
    assert unanchored_control("听说过两天要打霜了，提前咋个防？", banana, tok, stats) == ""


def test_is_there_a_ratio_asks_one(sample_engine):
    """有没得个比例 asks the ratio as 好多比例 does; 7.2 declines it for red and black honey."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    honey = _passages(HONEY)
    assert unanchored_amount("红蜜和黑蜜到底各要留好多果胶？有没得个比例", honey, tok, stats) == "具体数字"


def test_a_modal_cut_with_its_verb_anchors_no_figure(sample_engine):
    """一年要除几回草: jieba cuts 要除, a modal and a verb, which stands in no sentence beside the count; 6～7 月和
    8～9 月各除草 1 次 answers. 想养成几个杆杆 wants a few stems, it asks no count. (Each cut word stands in another
    sentence of the evidence, as it did where the bug showed: there it was the rarest anchor, never beside a figure.)"""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    weeding = _passages("雨季杂草生长快，一般在 6～7 月和 8～9 月各除草 1 次，杂草多的园地雨季除草 3～4 次。",
                        "树盘内的杂草要除干净，行间保留草根固土。", "单干整形的幼树长到 1.6 m 左右截顶。")
    assert unanchored_amount("咖啡地一年要除几回草？啥时候除？", weeding, tok, stats) == ""
    assert unanchored_amount("小苗子想养成几个杆杆的，啥时候截顶？", weeding, tok, stats) == ""


def test_an_everyday_verb_anchors_no_figure(sample_engine):
    """自己留的咖啡种子放在家头，最多能放多久还种得出来: 放在 and 出来 are everyday Chinese the KB's written style rarely
    uses, so their IDF outweighed 种子; standing elsewhere in the evidence, never beside 2个月, they refused the answer
    (round 26's adversarial-oos25, a control). What the figure is of is 种子."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    seeds = _passages("咖啡种子生活力下降快，宜随采随播；确需贮藏的，贮藏期不宜超过2个月。",
                      "幼苗从沙床里长出来以后，移进营养袋，放在荫棚下。", "鲜果要当天加工。")
    assert unanchored_amount("自己留的咖啡种子放在家头，最多能放多久还种得出来", seeds, tok, stats) == ""
    sprouts = _passages("种子应带种壳贮藏，用布袋盛装。", "幼苗从沙床里长出来以后，一般 2 个月出圃。")
    assert unanchored_amount("自己留的咖啡种子放在家头，最多能放多久还种得出来", sprouts, tok, stats) \
        == "具体数字"  # a span beside the everyday word alone is no seed's


def test_the_very_year_a_shop_or_another_code_must_be_stated(hits, sample_engine):
    """具体是哪一年 is not answered by 十九世纪末 (哪个年代 is); 哪个苗圃有卖 asks where to buy; 除了 CIFC 7963，还有哪几个
    品系编号 is not answered by CIFC 7963 itself."""
    era = _passages("十九世纪末至二十世纪初，外国传教士把咖啡带到大理宾川朱苦拉一带，当地至今仍保留老咖啡树。")
    assert missing_fact("宾川朱苦拉那些老咖啡树，具体是哪一年栽下的？", era) == "具体年份"
    assert missing_fact("宾川朱苦拉的老咖啡树是哪个年代栽的？", era) == ""
    assert missing_fact("想买萨奇姆的苗，云南哪个苗圃有正规的卖？", hits) == "品牌和购买渠道"
    assert missing_fact("鲜果哪个时候卖最划算？", hits) != "品牌和购买渠道"
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    lines = _passages("卡蒂姆是卡杜拉与蒂莫尔杂种杂交后选育出的品种群，包括多个品系，云南种植的主要是CIFC 7963等品系。")
    assert unanchored_code("卡蒂姆除了CIFC 7963，云南还种了哪几个品系编号？", lines, tok, stats) == "具体编号"
    assert unanchored_code("云南种的卡蒂姆主要是哪个品系编号？", lines, tok, stats) == ""
    # 哪个品系号 asks a code too (round 33's d33-071): the Sarchimor passage names its lines by no number
    sarchimor = _passages("萨奇姆各品系在云南不同海拔的耐寒性、产量和品质表现差异较大，应选用经过当地试种、来源清楚的品系。")
    assert unanchored_code("萨奇姆具体哪个品系号适合我们1400米的地", sarchimor, tok, stats) == "具体编号"
    assert unanchored_code("卡蒂姆哪个品系号是云南种得最多的", lines, tok, stats) == ""


def test_a_number_to_call_must_be_printed(hits):
    """有没有电话, 咋个联系他们 ask how to reach someone: a passage naming the buyer (星巴克、雀巢等公司在普洱设收购点)
    is no phone number. A phone call told (打电话问过植保站) asks nothing of it."""
    buyers = _passages("星巴克、雀巢等公司在普洱设有收购点，按质论价收购咖啡豆。")
    for question in ("星巴克雀巢那些大公司在普洱的收购点咋个联系 有没有电话", "星巴克那边收不收我们村的咖啡豆？咋个联系他们",
                     "发现咖啡果小蠹要打哪个电话报告？"):
        assert missing_fact(question, buyers) == "联系电话", question
    assert missing_fact("收购点咋个联系？", _passages("收购点联系电话：0879-2123456。")) == ""
    assert missing_fact("我打电话问过植保站，说是锈病，咋个治", hits) != "联系电话"


def test_a_few_more_asks_no_amount_and_seasons_are_a_time(sample_engine):
    """多买几棵, 多灌几回 say "a few more": the question asks whether to, not how many (watering is given by month). 要看几年 is answered by 至少 3 个收获季: a season is a
    span of time."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    spare = _passages("应按定植株数的 5 %～10 % 准备同龄预备苗。定植后 15 d～30 d 应逐株检查成活情况，缺株及时补植。")
    assert unanchored_amount("买苗子的时候要不要多买几棵备起补缺？种下去以后隔好久去查活没活？", spare, tok, stats) == ""
    # how many is asked, and the share of the planted ones answers it (the count the KB gives)
    assert asked_amounts("一亩要准备几棵预备苗？") == [("几棵", "plants")]
    assert unanchored_amount("一亩要准备几棵预备苗？", spare, tok, stats) == ""
    water = _passages("12月至翌年1月花芽尚未充分发育时大水灌溉，可能引起零星开花，使花期不整齐。")
    assert unanchored_amount("听人讲冬月腊月给咖啡多灌几回大水，来年花开得好，是不是这样嘛？", water, tok, stats) == ""
    trial = _passages("新品种试种面积宜控制在1～2亩或全园的10%以内，单独成片，连续记录至少3个收获季的生长、开花、成熟期、产量、锈病和寒害情况。",
                      section="新品种引进试种")
    assert unanchored_amount("合作社想引个新品种来试下，头一回种好多面积合适？要看几年才敢扩大？", trial, tok, stats) == ""


def test_growers_grammar_and_everyday_words_are_no_unknown_topic(sample_engine):
    """试一下 (V一下: do it once), 虫虫 and 筋筋 (a doubled character: a diminutive), 好多天才 (jieba glues the unit
    of an asked amount to 才) are grammar; 下地 (going to the field) and 甲壳虫 (any beetle) are everyday words the
    synonym table maps; 技术员说病叶率 names no 说病. None is what the question is about."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    assert unknown_focus("想晓得那块地排水好不好，有没得啥子土办法试一下？", tok, stats) == ""
    assert unknown_focus("叶子背面顺到筋筋两边巴起好多绿绿的扁虫虫，叶子果子上还糊起一层黑灰灰，咋个治？", tok, stats) == ""
    assert unknown_focus("蜜处理的豆子摊开晒，要晒好多天才算干？", tok, stats) == ""
    assert unknown_focus("旱季病虫少，还要下地去查么？隔好久查一回", tok, stats) == ""
    assert unknown_focus("园子头飞来一种黑褐色的甲壳虫，背上有黄白色的花道道，这是哪样虫？", tok, stats) == ""
    text, synonyms = sample_engine.index.corpus_text, tok.synonyms
    assert unknown_topic("技术员说病叶率到5%就要打药，这个病叶率咋个算嘛", text, synonyms) == ""
    assert unknown_focus("蝈蝈咋个养？", tok, stats) != ""  # a name that is a doubled character is a name


def test_maize_dibbled_between_the_rows_is_planted_beside_coffee(sample_engine):
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    assert other_crop("截了干以后行间空出来了，点几行苞谷要得不？", tok, stats) == ""
    assert other_crop("苞谷叶子发黄，缺哪样肥？", tok, stats) != ""
    assert other_crop("吃一点玉米要得不？", tok, stats) != ""


def test_a_heading_that_names_the_subject_makes_its_lines_one_account(sample_engine):
    """Under 咖啡炭疽病的防治方法, the spraying line's 间隔 10–15 天，连喷 2–3 次 is anthracnose's, although 黑果 (named
    in the question's other clause) stands two lines up: the heading names what every line is about. Without such a
    heading, lines are separate paragraphs, as before."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    lines = ("1. 增强树势：合理施肥、适度荫蔽、控制挂果量。\n2. 清除病残：剪除病枝、摘除黑果，带出园外烧毁或深埋。\n"
             "3. 保护伤口：冰雹、霜冻后先剪除伤枝，再及时喷铜制剂保护伤口。\n"
             "4. 药剂防治：发病初期喷 0.5%–1% 波尔多液；病害较重时，可选用咪鲜胺等内吸性药剂，按标签浓度使用，"
             "并与铜制剂交替，间隔 10–15 天，连喷 2–3 次。")
    question = "炭疽病黑果多的时候，药要隔几天打一回，连打几回？"
    assert unanchored_amount(question, _passages(lines, section="咖啡炭疽病的防治方法"), tok, stats) == ""
    assert unanchored_amount(question, _passages(lines, section="病害的防治方法"), tok, stats) == "具体数字"


def test_whether_a_defective_bean_is_safe_is_a_defect_question(hits):
    """霉豆能不能自己喝 asks whether a mouldy bean harms, which the grading manual's defects answer (霉变豆…可产生赭曲霉毒素
    等有害物质); 自家的豆子咋个煮 asks how to brew, which no passage does."""
    assert missing_fact("霉了的咖啡豆有没得毒哦，挑出来的霉豆能不能自己喝", hits) == ""
    assert missing_fact("虫蛀的豆子自己留着喝要得不？", hits) == ""
    assert missing_fact("自家的豆子咋个煮来喝？", hits) == "家庭烘焙和冲煮"


def test_tax_contracts_a_percentage_and_an_unknown_thing_to_fight_are_not_the_manuals(hits, sample_engine):
    """要交哪些税、开发票, a lease's 合同: the manual teaches growing and processing, not tax or law. 百分之好多 asks a share
    as 百分之几 does. 防松鼠: how to fight a thing the knowledge base never names."""
    assert missing_fact("我们合作社卖生豆给加工厂，要交哪些税，开发票咋个整", hits) == "税费和合同"
    assert missing_fact("租了别人家的地种咖啡，合同到期了地上的咖啡树算哪个的？", hits) == "税费和合同"
    assert missing_fact("生豆交给加工厂，含水率要好多？", hits) == ""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    honey = _passages(HONEY)
    assert unanchored_amount("蜜处理的黄蜜、红蜜、黑蜜，脱皮的时候分别要留百分之好多的果胶？", honey, tok, stats) == "具体数字"
    assert unknown_focus("咖啡果子一红就被松鼠啃，天天来偷，有哪样办法防松鼠", tok, stats) == "松鼠"
    assert unknown_focus("咖啡锈病咋个防？", tok, stats) == ""


def test_which_county_inside_a_named_place_is_not_answered_by_its_peers(sample_engine):
    """普洱下面哪个县 asks for a place inside 普洱: a sentence that lists 普洱 beside 临沧 and 保山 names its peers, not
    its counties; one naming a county (孟连县) answers, and so does the peers' list where no place is named."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    grown = _passages("云南咖啡的主产州（市）为普洱、临沧、保山、德宏和西双版纳，其中普洱的种植面积居全省首位；",
                      "文山、红河、怒江、大理等地也有较小规模种植。")
    assert unanchored_place("普洱下面哪个县咖啡种得最多？思茅还是孟连", grown, tok, stats) == "具体地名"
    assert unanchored_place("云南哪几个地州咖啡种得最多？", grown, tok, stats) == ""
    counties = _passages("普洱的孟连县、江城县咖啡种植面积最大。")
    assert unanchored_place("普洱下面哪个县咖啡种得最多？", counties, tok, stats) == ""


def test_what_the_document_says_it_leaves_out_is_not_answered(sample_engine):
    """近年 SCA 推出了新的咖啡价值评估体系…。本文介绍的是…百分制杯测表: the sentence that best matches the question
    is followed by the document's own word that it presents something else, so how the new form scores is not in it;
    the 100-point form, which it does present, is answered."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    cupping = _passages("SCA 百分制杯测表共有 10 个评分项目：干湿香、风味、余韵、酸质、醇厚度、一致性、平衡感、干净度、甜度和综合评价。",
                        "近年 SCA 推出了新的咖啡价值评估体系，各地收购方和比赛采用的表格可能不同。本文介绍的是长期通用、生产上最常见的百分制杯测表。")
    assert scoped_out("听说SCA出了个新的咖啡价值评估体系，那个是咋个打分的？", cupping, tok, stats) == "价值评估体系的细节"
    assert scoped_out("SCA杯测表一共打几项分？", cupping, tok, stats) == ""
    assert scoped_out("SCA杯测表是不是百分制？", cupping, tok, stats) == ""


def test_more_growers_words_are_no_unknown_topic(sample_engine):
    """青果果 and 黄果果 are 青果 and 黄果 said fondly (a doubled last character); 县上 says where, like 高头; 天热撒 is
    jieba's cut of 天热 and the verb 撒, no place."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    assert unknown_focus("前天下冰雹，青果果打得花里胡哨的，这些果子还要得不？要不要给树追点肥", tok, stats) == ""
    assert unknown_focus("我们合作社想拿一小块地试种黄果果那种波旁，摘果子的时候有哪样要注意的哦？", tok, stats) == ""
    assert unknown_focus("县上气象站在1000米，年均温20度，我家地在1600米，大概好多度？", tok, stats) == ""
    assert unknown_focus("天热撒碳铵要得不", tok, stats) == ""


def test_selling_online_and_cups_a_day_are_not_the_manuals(hits):
    assert missing_fact("想在抖音上直播卖自家的咖啡豆，小黄车咋个开通？", hits) == "网络销售"
    assert missing_fact("我血压有点高，一天喝两杯咖啡要不要紧哦", hits) == "喝咖啡与健康"
    assert missing_fact("鲜果卖给哪个加工厂好？", hits) != "网络销售"


def test_how_much_in_no_unit_is_refused_where_the_kb_declines_it_and_bundles_are_counted(sample_engine):
    """好多果胶 asks an amount the KB declines for red and black honey (7.2's clause number is no figure); 好多捆稻草
    counts bundles, which 5～8 个烟堆 does not state."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    assert unanchored_amount("蜜处理的豆子要留好多果胶？", _passages(HONEY), tok, stats) == ""  # 果胶 stands in 7.1, which declines nothing
    assert unanchored_amount("蜜处理的黄蜜、红蜜、黑蜜，各要留好多果胶哦", _passages(HONEY), tok, stats) == "具体数字"
    smoke = _passages("熏烟堆用稻草、秸秆和杂草堆成，每亩设 5～8 个烟堆，寒潮当晚 3 时前后点燃。", section="熏烟防霜")
    assert unanchored_amount("打霜那晚上要熏烟，一亩地一晚上要烧好多捆稻草才够", smoke, tok, stats) == "具体数字"
    assert unanchored_amount("熏烟的话一亩要设好多个烟堆？", smoke, tok, stats) == ""


def test_a_follow_ups_coverage_is_also_read_in_its_own_words(sample_engine):
    """那树要是冻了，要等好久才能动剪刀 carries 冷空气 冷湖 白霜 坡脚 from the turn before, which the frost-pruning
    passage does not use: its own words are covered."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    wait = _passages("咖啡树受冻后，受害部位的边界需要一段时间才能显现。霜冻后应等待 2–4 周，待活组织与死组织界限清楚后再修剪。",
                     section="受害后的恢复管理 不要急于修剪")
    asked = "那树要是冻了，要等好久才能动剪刀"
    coverage = assess("冷空气 冷湖 白霜 坡脚 早上 树要是冻了，要等好久才能动剪刀", wait, tok,
                      sample_engine.index.corpus_text, stats, asked=asked)
    assert coverage.covered, coverage


@pytest.mark.parametrize("question", ["装袋子的土咋个配", "请来的工人图快，一把捋下来一串串的，听他们说这样摘还多收些，是不是真的嘛"])
def test_a_question_in_the_kbs_words_is_not_refused_for_saying_them_its_own_way(sample_engine, question):
    """Few of a grower's words stand in the evidence (装袋子, 捋下来: the manual says 营养袋, 捋采), yet they are words
    the knowledge base uses: the rules that name what is missing judge it, not the share of words found."""
    answer = sample_engine.answer(question)
    assert answer.covered and answer.citations, answer.text


@pytest.mark.parametrize("question", ["我头疼怎么办", "微信怎么转账", "今天天气不错"])
def test_a_question_in_no_word_the_kb_uses_is_refused(sample_engine, question):
    assert not sample_engine.answer(question).covered


def test_where_the_grower_says_they_are_is_not_what_the_figure_is_of(sample_engine):
    """我在保山潞江坝，… says where the grower is; the figure asked (一亩…好多方水) is the season's water per mu, which
    the manual states without the place. A clause that points back to the place (那边, or the place again) asks of
    it, and the place stays an anchor."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    asked = "我在保山潞江坝，一整个旱季一亩咖啡地大概要准备好多方水？"
    hits = sample_engine.search(asked).evidence
    assert unanchored_amount(asked, hits, tok, stats) == ""
    of_place = "我在潞江坝，潞江坝一亩能收好多斤？"
    assert unanchored_amount(of_place, sample_engine.search(of_place).evidence, tok, stats) == "具体数字"


def test_how_much_of_a_chemical_to_mix_needs_a_dose_of_it(sample_engine):
    """草甘膦一桶水兑好多: the manual names 草甘膦 only to warn where it harms coffee, with no dose; 噻嗪酮 has its own
    (1000–1500 倍液). How often (兑几次) is no dose."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    warned = _passages("草甘膦是内吸性除草剂，沾到咖啡叶片或绿色树皮上会造成叶片畸形、发黄。")
    assert unanchored_dose("行间杂草多想打草甘膦，一桶水兑好多", warned, tok, stats) == "草甘膦的用量"
    dosed = _passages("若虫盛期喷 25% 噻嗪酮可湿性粉剂 1000–1500 倍液，或螺虫乙酯等。")
    assert unanchored_dose("噻嗪酮一桶水兑好多？", dosed, tok, stats) == ""
    assert unanchored_dose("草甘膦一年打几次？", warned, tok, stats) == ""
    # a concentration asked in growers' words (兑成好浓, 要多浓), and a salt mixed as a spray: 硫酸亚铁 is named for iron
    # deficiency without a strength
    named = _passages("缺铁多见于石灰施用过多、土壤偏碱的地块，叶面喷硫酸亚铁可以缓解。")
    assert unanchored_dose("缺铁了，硫酸亚铁要兑成好浓的喷？", named, tok, stats) == "硫酸亚铁的用量"
    assert unanchored_dose("噻嗪酮要多浓？", dosed, tok, stats) == ""
    strength = _passages("叶面喷 0.2%–0.3% 硫酸亚铁溶液，间隔 7–10 天。")
    assert unanchored_dose("硫酸亚铁要兑成好浓的喷？", strength, tok, stats) == ""
    # a chemical asked of in one sentence (whether it goes in the drip line), a strength in the next, of the fertiliser
    # water: no dose of the chemical is asked (round 27's colloquial26 was refused for 过磷酸钙的用量)
    assert unanchored_dose("滴灌管头能不能加硫酸亚铁？肥水最浓兑好多？", named, tok, stats) == ""
    assert unanchored_dose("滴灌管头能不能加点肥？硫酸亚铁最浓兑好多？", named, tok, stats) == "硫酸亚铁的用量"
    # a biological agent is sprayed by its dose too: the regulation names 白僵菌制剂 for the berry borer with none
    # (round 38's d38-070 asked it with no unit, 一亩用好多 兑好多水, and was answered)
    agent = _passages("可使用已登记的微生物农药和植物源农药等生物农药，如防治咖啡果小蠹的白僵菌制剂。")
    assert unanchored_dose("白僵菌防果小蠹 一亩用好多 兑好多水", agent, tok, stats) == "白僵菌的用量"
    assert unanchored_dose("白僵菌防果小蠹 一亩用好多 兑好多水",
                           _passages("白僵菌制剂每亩用 1–2 kg，兑水 50 升喷雾。"), tok, stats) == ""


def test_a_follow_up_that_names_its_chemical_is_held_to_that_chemicals_dose(sample_engine):
    """那苯醚甲环唑兑好多倍 after a reply naming 炭疽病: the follow-up's own words name the chemical, so its dose is
    judged as for any question (the manual says 苯醚甲环唑 按标签浓度: no dose)."""
    tok, stats, text = sample_engine.tokenizer, sample_engine.term_stats, sample_engine.index.corpus_text
    label = _passages("病重时用咪鲜胺、苯醚甲环唑等内吸性药剂，按标签浓度使用，与铜制剂交替，间隔 10–15 天。")
    coverage = assess("咖啡炭疽病 那苯醚甲环唑打炭疽兑好多倍嘛？", label, tok, text, stats,
                      asked="那苯醚甲环唑打炭疽兑好多倍嘛？")
    assert not coverage.covered and coverage.missing == "苯醚甲环唑的用量"


def test_a_head_that_opens_a_longer_word_ends_no_unknown_name(sample_engine):
    """时候病虫害 has no disease 候病, 看得到病斑 none called 到病: 病 opens the word jieba reads there. A head that is a
    word of its own still ends a name the KB lacks (抗线虫, 茶树病)."""
    tok, corpus = sample_engine.tokenizer, sample_engine.index.corpus_text
    assert unknown_topic("旱季的时候病虫害多久去园子查一次合适", corpus, tok.synonyms, tok) == ""
    assert unknown_topic("锈病的菌钻进叶子以后，要好久才看得到病斑哦？", corpus, tok.synonyms, tok) == ""
    assert unknown_topic("砧木用罗布斯塔抗线虫，用哪个品种好？", corpus, tok.synonyms, tok) == "抗线虫"
    assert unknown_topic("茶树病咋个治", corpus, tok.synonyms, tok) != ""


def test_a_name_the_kb_holds_whole_and_the_verb_after_it_are_no_unknown_name(sample_engine):
    """跟戊唑醇换到打算不算轮换: jieba tags the 换 after 戊唑醇 a noun, and the two read as one name the KB lacks
    (戊唑醇换), so an answerable question was refused. The KB's own name ends there; a name it lacks is still read
    from its pieces (啶/虫/脒)."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    assert unknown_words("三唑酮一年最多打得几回？跟戊唑醇换到打算不算轮换？", tok, stats) == []
    assert "啶虫脒" in unknown_words("啶虫脒兑多少水打咖啡蚜虫？", tok, stats)


def test_what_a_question_tells_is_not_what_it_asks(sample_engine):
    """A few cracks (裂开几道口子) before a clause that asks what to do, not many ladybirds (瓢虫也没得几个), a
    taste someone reported (咖啡馆的人说铁皮卡好喝) and fruit handed over (一亩能交好多鲜果) ask no figure, taste or
    price; asked, they still are."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    said = _passages("波尔多液要现配现用，喷后树皮开裂处要涂白保护，绿蚧的天敌有瓢虫和寄生蜂。")
    assert unanchored_amount("打了波尔多液，树皮上裂开几道口子，咋个整", said, tok, stats) == ""
    assert unanchored_amount("波尔多液要打几次？打完了咋个整", said, tok, stats) == "具体数字"
    assert unanchored_amount("绿蚧多得很，瓢虫也没得几个，该咋办", said, tok, stats) == ""
    assert unanchored_amount("绿蚧多得很，瓢虫要放几个", said, tok, stats) == "具体数字"
    hits = _passages("铁皮卡杯品质量好，但高感锈病，只适合在锈病轻的地方种。")
    assert missing_fact("咖啡馆的人说铁皮卡好喝价钱高，我想改种铁皮卡，要得不嘛", hits) == ""
    assert missing_fact("自己烘的铁皮卡好不好喝？", hits) == "家庭烘焙和冲煮"
    assert missing_fact("老板问我今年一亩能交好多鲜果，帮我估一下", hits) == ""
    assert missing_fact("交一车鲜果能拿好多钱", hits) == "价格"


def test_where_a_relative_lives_is_no_anchor_of_the_figure(sample_engine):
    """我亲戚在保山那边1500米的山上，咖啡一般好久开始采？ asks the harvest time at 1500 m, as 我在保山… would."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    asked = "我亲戚在保山那边1500米的山上，咖啡一般好久开始采？"
    # the harvest dates by altitude, which name no place (not the intercropping page's 保山 beside macadamia's harvest)
    hits = [h for h in sample_engine.search(asked).evidence if "保山" not in h.chunk.text]
    assert unanchored_amount(asked, hits, tok, stats) == ""
    assert unanchored_amount("保山那边1500米的山上，咖啡一般好久开始采？", hits, tok, stats) == "具体数字"
    # …and so when no passage names the place at all: the place asked of in the clause before must be in the evidence
    altitude = _passages("海拔 1500 m 左右的咖啡园一般 11 月开始采收。")
    assert unanchored_amount("保山那边1500米的山上，咖啡一般好久开始采？", altitude, tok, stats) == "具体数字"
    assert unanchored_amount(asked, altitude, tok, stats) == ""


def test_growers_words_for_young_trees_and_multi_stem_pruning_reach_the_kbs(sample_engine):
    tokens = sample_engine.tokenizer.query_tokens("想把小树整成几个干的，啥时候咋个截？")
    assert "幼树" in tokens and "多干" in tokens


def test_a_name_is_read_where_jieba_cuts_it(sample_engine):
    """有点蚜虫 is 蚜虫, which the KB names (有点, a word of everyday Chinese, ends before it); 藻斑病 is no 斑病 of
    褐眼斑病 (藻 stands alone before it), while 地锈病 is 锈病 of a plot. A crop's pest (香蕉线虫) is still the crop's,
    and a modifier jieba made up (黑枝/小蠹) still names an insect the KB lacks."""
    tok, corpus = sample_engine.tokenizer, sample_engine.index.corpus_text
    assert unknown_topic("开花那阵能打杀虫药不嘛？地头有点蚜虫", corpus, tok.synonyms, tok) == ""
    assert unknown_topic("叶子上一块块暗绿色毛绒绒的斑，别个说是藻斑病，咋个治", corpus, tok.synonyms, tok) == "藻斑病"
    assert unknown_topic("香蕉线虫咋个治", corpus, tok.synonyms, tok) != ""
    assert unknown_topic("是不是咖啡黑枝小蠹？咋个防", corpus, tok.synonyms, tok) != ""  # jieba's made-up 黑枝
    assert unknown_topic("有块地锈病重得很，先摘还是后摘", corpus, tok.synonyms, tok) == ""  # 地/锈病: a name of its own
    assert unknown_topic("叶子上有褐眼斑病咋个治", corpus, tok.synonyms, tok) == ""


def test_a_few_told_before_a_clause_that_asks_what_is_no_amount(sample_engine):
    """老辈子传下来几棵老咖啡树，…，这个是哪样品种？ asks the variety; 几棵 counts the trees it tells of. A 几 in the
    clause that asks still asks."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    hits = _passages("铁皮卡植株高大，一分枝较长而略下垂，顶端嫩叶多呈古铜色。")
    told = "我家在宾川，老辈子传下来几棵老咖啡树，长得高高大大的，嫩叶尖尖是古铜色，这个是哪样品种嘛？"
    assert unanchored_amount(told, hits, tok, stats) == ""
    assert unanchored_amount("铁皮卡一亩栽几棵，用哪样苗好？", hits, tok, stats) == "具体数字"
    # nor before a clause that asks whether (有没得办法, 要不要): …只有顶上结几颗果，…，有没得办法只换这一根？
    stems = "老园子是多干的，现在有一根干子下半截光秃秃的，只有顶上结几颗果，另外两根还好，有没得办法只换这一根？"
    assert unanchored_amount(stems, hits, tok, stats) == ""
    assert unanchored_amount("一年要打几次，要不要轮换？", hits, tok, stats) == "具体数字"  # 几次 asks, beside whether


def test_what_a_question_asks_of_its_topic_is_no_topic(sample_engine):
    """Signs (有哪些征兆) and a term's meaning (16目是哪样意思) are what is asked of a topic the KB has."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    assert unknown_focus("咋个看得出今晚会不会打霜？有哪些征兆", tok, stats) == ""
    assert unknown_focus("16目是哪样意思", tok, stats) == ""
    assert unknown_focus("办营业执照有啥讲究", tok, stats) == "营业执照"


def test_a_rate_asks_a_share_and_who_pays_a_fee_is_money(sample_engine):
    """成活率一般有好多 is answered by a per cent beside it, not by a sentence that names the rate; who pays the
    medical bill is money, which no passage of growing states."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    named = _passages("嫁接需要一定的技术，遇到天气不好成活率会降低，没成活的要补接。")
    stated = _passages("雨季嫁接成活率可达 85% 以上，没成活的要补接。")
    asked = "截干以后想嫁接，嫁接的成活率一般有好多？"
    assert unanchored_amount(asked, named, tok, stats) == "具体数字"
    assert unanchored_amount(asked, stated, tok, stats) == ""
    hits = _passages("采摘时注意安全，坡地要防滑。")
    assert missing_fact("请来摘果子的工人在坡上摔断了手，医药费该哪个出？", hits) == "价格"
    assert missing_fact("请来摘果子的工人在坡上摔断了手，该咋个处理伤口？", hits) == ""


def test_growers_words_for_the_dry_season_a_check_and_a_simple_way_reach_the_kbs(sample_engine):
    tokens = sample_engine.tokenizer.query_tokens("干季嘞时候多久去地头查一回病虫？有没得土办法")
    assert {"旱季", "调查", "简易"} <= set(tokens)


def test_who_a_grower_speaks_of_when_a_century_and_a_chemicals_interval_are_no_near_miss(sample_engine):
    """我媳妇怀起了 says who (the KB's 孕期 is what is asked); 大概好久种下的 is answered by 十九世纪末; 按哪个药的间隔期算
    asks which interval counts, not which chemical to spray."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    assert unknown_focus("家头打药的活路，哪些人不能去干？我媳妇怀起了", tok, stats) == ""
    assert unknown_focus("家头打药的活路，哪些人不能去干？我媳妇说的", tok, stats) == ""
    planted = _passages("十九世纪末至二十世纪初，外国传教士把咖啡带到大理宾川朱苦拉一带，那里的老咖啡树属于铁皮卡类型。")
    assert unanchored_amount("宾川朱苦拉的老咖啡树大概好久种下的", planted, tok, stats) == ""
    assert unanchored_amount("宾川朱苦拉的老咖啡树一年结好多斤", planted, tok, stats) == "具体数字"
    rules = _passages("锈病防治要遵守安全间隔期：同一地块先后用过几种药时，以间隔期最长的为准。")  # names no chemical
    assert unanchored_remedy("锈病打了两种药，摘果子要按哪个药的间隔期算？", rules, tok, stats) == ""
    assert unanchored_remedy("安全间隔期短一点的，换哪个药？", rules, tok, stats) == "防治药剂"


def test_growers_words_for_tools_a_hedge_and_early_spring_reach_the_kbs(sample_engine):
    tokens = set(sample_engine.tokenizer.query_tokens("坡上想种一道道的篱笆，开春要备哪样家什"))
    assert {"植物篱", "春季", "工具"} <= tokens


def test_an_amount_asked_of_words_the_evidence_never_uses_needs_a_figure_of_its_kind_there(sample_engine):
    # 灭字虎天牛 is the KB's 灭字脊虎天牛 misspelt, 母虫 its 雌虫: no word of the question stands in the evidence to hold
    # a figure to, and no count of eggs (颗, 粒) stands anywhere in it, so the count is not there to give
    question = "灭字虎天牛一只母虫一季要下好多颗卵？"
    hits = sample_engine.search(question).evidence
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    assert unanchored_amount(question, hits, tok, stats) == "具体数字"
    with_count = [Hit(dataclasses.replace(hits[0].chunk, text="每头雌虫产卵 30～50 粒。"), hits[0].score)]
    assert unanchored_amount(question, with_count, tok, stats) == ""


def test_the_pest_a_chemical_is_asked_for_stands_in_its_own_paragraph(sample_engine):
    """说是根结线虫，用啥药灌根: the nursery's copper spray for rust names the same seedlings, and the nematode's own
    line below it names no chemical; the nematode's own line with one answers."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    question = "育苗袋里的苗子根上起疙瘩，人家说是根结线虫，灌哪样药？"
    nursery = _passages("锈病：苗圃中发现病苗应拔除，喷铜制剂保护周围苗木和育苗袋。\n"
                        "根结线虫病：苗木矮小，根上有瘤状根结，病苗应销毁。", section="苗圃病虫害")
    assert unanchored_remedy(question, nursery, tok, stats) == "防治药剂"
    stated = _passages("根结线虫病：苗木矮小，根上有瘤状根结，可用 10% 噻唑膦颗粒剂拌入育苗土。", section="苗圃病虫害")
    assert unanchored_remedy(question, stated, tok, stats) == ""


def test_the_cups_ways_are_brewing_and_a_cupping_is_grading(hits, sample_engine):
    assert missing_fact("城里人爱喝冷萃，豆子要磨多粗？", hits) == "家庭烘焙和冲煮"
    assert missing_fact("买个摩卡壶在家煮咖啡，火开多大？", hits) == "家庭烘焙和冲煮"
    assert missing_fact("湿的带壳豆拿铁桶装起放要得不？", hits) == ""  # a tin bucket, no latte
    assert missing_fact("杯测的时候冲咖啡，粉要磨粗点还是细点？", hits) == ""  # the grading protocol's grind
    answer = sample_engine.answer("杯测要冲咖啡，水烧到好多度才对？")
    assert answer.covered and "93" in "".join(c.text for c in answer.citations)


def test_the_very_year_a_boundary_at_law_and_a_lines_name(sample_engine, hits):
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    assert missing_fact("宾川那些老树究竟是哪一年栽的？", _passages("十九世纪末至二十世纪初，传教士把咖啡带到宾川。")) == "具体年份"
    assert missing_fact("宾川那些老树是哪一年栽的？", _passages("十九世纪末至二十世纪初，传教士把咖啡带到宾川。")) == ""
    assert missing_fact("邻居种树越过了地界，遮了我家咖啡，我要去告他", hits) == "税费和合同"
    lines = _passages("萨奇姆各品系在云南不同海拔的表现差异较大，应选用经过当地试种的品系。")
    assert unanchored_code("萨奇姆的品系都叫哪样名字？", lines, tok, stats) == "具体编号"
    named = _passages("卡蒂姆在云南以 CIFC 7963 等品系为主，抗锈性强。")
    assert unanchored_code("卡蒂姆种的是哪个品系，叫啥名字？", named, tok, stats) == ""


def test_two_kb_words_put_together_and_an_insect_described_are_no_unknown_topic(sample_engine):
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    assert "防护林带" not in unknown_words("防护林带要种几行？", tok, stats)  # 防护 + 林带, both the KB's
    assert unknown_focus("叶子上趴起一条胖乎乎的大虫，嫩叶遭吃光了，咋个治？", tok, stats) == ""
    assert unknown_focus("叶子背后有毛虫，挨着就痛，咋个打？", tok, stats) == "毛虫"  # a kind of larva, named


# An amount asked of its own kind (issue 13's near misses): each case a question, evidence that names what it asks
# about with no such figure (or another thing's, or on another scale), and evidence that states it.
@pytest.mark.parametrize("question, near_miss, stated", [
    # minutes asked: the frost chapter's 2～4 周 beside the same shears is another wait on another scale
    ("剪子上沾了病，拿漂白水泡一下，要泡几分钟才算消好毒？",
     "霜冻后不要急于修剪剪子，应等待 2～4 周再剪。修剪工具用完要在消毒液中浸泡片刻，清水冲净擦干。",
     "修剪工具用完要在消毒液中浸泡 5～10 分钟，清水冲净擦干。"),
    ("种子播种前用温水泡几个钟头？", "种子播前用温水浸种，2～3 周后发芽。", "种子播前用温水浸种 12～24 h，捞出晾干再播。"),
    # the spacing of one plant from the next: a windbreak passage listing 银桦 states none, nor the coffee rows' spacing
    ("地头想栽一排银桦挡风，银桦一棵跟一棵要隔好远？",
     "林带宜选用高矮搭配、四季常绿的树种，当地常用银桦、旱冬瓜等。林带应与主风向垂直。\n咖啡行距 1.8～2.0 m，株距 1.0～1.5 m。",
     "林带常用银桦、旱冬瓜等，银桦株距 2～3 m，行距 3 m。"),
    # a place asked of as "there": the province's range two sentences on is not its figure
    ("潞江坝那边一年平均气温有好多度？",
     "保山潞江坝位于怒江干热河谷，热量充足但干季长，必须依靠灌溉。德宏海拔相对较低，雨量较足。小粒咖啡适宜在年平均气温 15～24 °C 的地区种植。",
     "保山潞江坝位于怒江干热河谷，年平均气温约 21 °C，干季长，必须依靠灌溉。"),
    # per day: a rate, which a picking standard's kilograms a basket is not
    ("请人摘咖啡，一个熟手一天摘得了好多公斤红果？",
     "采摘时只摘红熟果，每次采摘的鲜果中成熟果应达 90% 以上，每筐装 20～25 kg 红果。",
     "熟练工人采摘红熟果，每人每天可摘鲜果 60～100 kg。"),
    # the size of a thing bought: the KB names 防雹网 in a list of hail measures, with no mesh
    ("雹子打得凶，想搭防雹网，网眼选好大的？",
     "防雹措施：有条件的精品园可架设防雹网；雹后及时修剪断枝，喷铜制剂保护伤口，追施速效肥。",
     "防雹网宜选网眼 8～10 mm 的聚乙烯网，架设高度高出树冠 0.5 m。"),
    # a mesh asked (好多目): the beans' 16 目 screen is another thing's, and no millimetre is a mesh count
    ("雹子多，想架防雹网，网要用好多目的？",
     "防雹措施：有条件的精品园可架设防雹网。\n精品豆颗粒大小要求 16 目以上，缺陷豆少。",
     "防雹网宜选 20～40 目的聚乙烯网，架设高度高出树冠 0.5 m。"),
    # how often, where the passage says none: the hedge's height is no frequency
    ("香根草植物篱好久修一回？", "香根草植物篱高度控制在 50～100 cm，能拦截泥沙。", "植物篱每年修剪 2～4 次。"),
    # plant from plant with no 一 before it (一行里头棵跟棵): the hedge rows' spacing is not the plants'
    ("香根草做植物篱，一行里头棵跟棵隔好远种？",
     "香根草植物篱沿等高线每隔 3～5 行咖啡种植一道，每道种两行。",
     "香根草植物篱每道种两行，株距 10～15 cm。"),
    # how high a rate is (成活率有好高): a share, which 成活率高 in words is not (round 23's dev23)
    ("咖啡劈接的话成活率一般有好高？",
     "劈接一般在雨季 6～8 月，气温 20 度以上、空气湿润时成活率高。",
     "劈接在雨季 6～8 月进行，成活率一般可达 85%～95%。"),
    # two words before the amount (一般能有几成: dev32's d32-072 and dev29's d29-070 were answered from the FAQ's 成活率高)
    ("劈接嫁接咖啡 成活率一般能有几成",
     "劈接一般在雨季 6～8 月，气温 20 度以上、空气湿润时成活率高。",
     "劈接在雨季 6～8 月进行，成活率一般可达 85%～95%。"),
    # plants counted as a share of the plants planted (colloquial31's c31-016 was refused "具体数字")
    ("今年在新修的台地上准备栽四百来棵苗，预备苗要多准备好多棵？",
     "补植应在定植当年雨季结束前完成，补植苗用同龄预备苗。",
     "应按定植株数的 5 %～10 % 准备同龄预备苗，假植于园地附近，供补植使用。"),
])
def test_an_amount_asked_is_stated_only_by_a_figure_of_its_own_kind(sample_engine, question, near_miss, stated):
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    assert unanchored_amount(question, _passages(*near_miss.split("\n")), tok, stats) == "具体数字"
    assert unanchored_amount(question, _passages(stated), tok, stats) == ""


@pytest.mark.parametrize("question, evidence", [
    ("咖啡苗一棵和一棵隔好远栽？", "小粒咖啡矮秆品种行距 1.8～2.0 m，株距 1.0～1.5 m，每亩 250～400 株。"),  # coffee's spacing
    ("我家在潞江坝，咖啡适宜的年平均气温是好多度？",  # the grower's own place is no subject
     "保山潞江坝位于怒江干热河谷，热量充足但干季长。德宏海拔相对较低。小粒咖啡适宜在年平均气温 15～24 °C 的地区种植。"),
    ("打药的人一天最多打好久的药？", "施药人员每天连续施药时间不宜超过 6 h，施药后及时洗澡换衣。"),  # a duration, no rate
    ("滴灌前头的过滤器要买好多目的？", "滴灌系统首部应安装过滤器（一般 120 目）并经常清洗。"),  # a mesh, stated
    # how often (好久修一回): a count in a period answers it (round 22's o20-002 and dev19's d19-054 were refused)
    ("坡地上种了一道道香根草挡土，好久修一回？", "植物篱每年修剪 2～4 次，高度控制在 50～100 cm，修下的枝叶铺在行间。"),
])
def test_what_these_kinds_leave_alone_is_answered(sample_engine, question, evidence):
    assert unanchored_amount(question, _passages(evidence), sample_engine.tokenizer, sample_engine.term_stats) == ""


# 哪个国家: every such question of the gold sets was out of scope (round 22's o20-024 and o20-062 were answered with
# the introduction's 外国传教士 and the cultivar list); a passage naming the country answers it
@pytest.mark.parametrize("question, near_miss, stated", [
    ("帕卡马拉这个品种最早是哪个国家搞出来的？", "黄波旁、帕卡马拉等品质型品种目前仅处于引种试验阶段。",
     "帕卡马拉由萨尔瓦多育成，是帕卡斯与象豆的杂交种。"),
    ("宾川朱苦拉的咖啡是传教士带进来的，那个传教士是哪国人？", "十九世纪末，外国传教士把咖啡带到大理宾川朱苦拉一带。",
     "十九世纪末，法国传教士把咖啡带到大理宾川朱苦拉一带。"),
])
def test_which_country_needs_a_country_named_beside_what_is_asked(sample_engine, question, near_miss, stated):
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    assert unanchored_country(question, _passages(near_miss), tok, stats) == "具体国家"
    assert unanchored_country(question, _passages(stated), tok, stats) == ""
    assert unanchored_country("帕卡马拉的亲本是哪两个品种？", _passages("帕卡马拉是帕卡斯与象豆的杂交种。"), tok, stats) == ""


def test_money_in_what_the_grower_was_told_is_no_topic_when_another_clause_asks(sample_engine):
    """村里头说有补贴修水池 is why the grower asks; 要修好大的池子 is what (round 22's colloquial21 refused it as 补贴).
    Asked of itself, or only wanted (想申请…), the subsidy is still the topic."""
    tok, corpus = sample_engine.tokenizer, sample_engine.index.corpus_text
    told = "今年村里头说有补贴修水池，要修好大的池子才够？修在哪点好？"
    assert unknown_topic(told, corpus, tok.synonyms, tok) == ""
    assert unknown_topic("政府对种咖啡有没得补贴，新种一亩补好多钱", corpus, tok.synonyms, tok) == "政府"
    assert unknown_topic("听说有补贴，一亩补好多钱？", corpus, tok.synonyms, tok) == "补贴"
    assert unknown_topic("想申请补贴修水池，要修好大的池子？", corpus, tok.synonyms, tok) == "申请"
    # 冷气 is the KB's 冷空气, 冷窝窝 its 冷湖 (the same question refused as 冷气)
    assert unknown_focus("我那块地在箐底下，咋个晓得是不是积冷气的冷窝窝？", tok, sample_engine.term_stats) == ""


def test_a_space_parts_clauses_as_a_comma_does(sample_engine):
    """Growers type clauses apart with spaces (round 23's colloquial22): 没得收入 told in one clause is no price asked by
    有没有… three clauses on. With commas the same message was answered; with spaces it was refused as a price."""
    spaced = "我爹十几年前栽的咖啡 现在下半截枝子全部掉光了 想截干又怕一两年没得收入 一家人要吃饭 有没有不一下子全部截的办法"
    hits = sample_engine.search(spaced).evidence
    coverage = assess(spaced, hits, sample_engine.tokenizer, sample_engine.index.corpus_text, sample_engine.term_stats)
    assert coverage.missing == ""
    # a price asked in its own spaced clause still is one
    priced = "我家有几亩咖啡 今年鲜果好多钱一斤"
    coverage = assess(priced, sample_engine.search(priced).evidence, sample_engine.tokenizer,
                      sample_engine.index.corpus_text, sample_engine.term_stats)
    assert not coverage.covered


def test_the_trees_of_a_plant_the_kb_names_a_verb_glued_to_its_word_and_rent(sample_engine):
    """橡胶树 is the KB's 橡胶 (a shade tree for low, frost-free land), 结坚果 is 结 + 坚果 (jieba's cut of 开始结坚果),
    盐巴 is salt (涂白剂's 食盐); rent (租金) is money the manual never states, a licence (驾照) paperwork."""
    tok, stats, corpus = sample_engine.tokenizer, sample_engine.term_stats, sample_engine.index.corpus_text
    assert unknown_focus("我们在1400米，冬天偶尔有霜，拿橡胶树给咖啡遮荫要得不", tok, stats) == ""
    assert unknown_focus("咖啡地头想套澳洲坚果 栽下去几年才开始结坚果？", tok, stats) == ""
    assert unknown_focus("涂白剂里头生石灰、硫磺、盐巴各放好多？", tok, stats) == ""
    assert unknown_focus("拿柠檬树给咖啡遮荫要得不", tok, stats) == "柠檬树"  # a tree of a plant the KB never names
    assert unknown_topic("村里要流转我家的咖啡地，租金一亩一年咋个算合理", corpus, tok.synonyms, tok) == "租金"
    assert unknown_topic("拉鲜果的三轮车要考哪样驾照", corpus, tok.synonyms, tok) == "驾照"


def test_a_machine_the_kb_never_names_is_what_is_asked_of_it(sample_engine):
    """用无人机防锈病要得不 names rust, which the KB knows well, but asks whether a drone will do: the KB says nothing
    of drones (jieba tags 无人机 an idiom, l). A sprayer the KB names is answered."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    assert unknown_focus("现在好多人用无人机打药，咖啡地里用无人机防锈病要得不？一亩兑好多药", tok, stats) == "无人机"
    assert unknown_focus("背负式喷雾器打锈病的药，一亩兑好多药", tok, stats) == ""


def test_a_place_then_my_land_is_where_the_grower_is(sample_engine):
    """潞江坝我那块地海拔七百多米 says where the grower's land is; the months asked are the altitude band's (1000 m 以下
    10 月中下旬开始), which the manual states without the place."""
    tok = sample_engine.tokenizer
    assert _home("潞江坝我那块地海拔七百多米，咖啡一般几月开始采，几月采得完？", tok) == {"潞江坝"}
    assert _home("潞江坝那边一年平均气温好多度？", tok) == set()  # asked of the place itself


def test_a_five_character_word_is_put_right_too(sample_engine):
    """淋酸二氢钾 (lin, as 磷) is the KB's 磷酸二氢钾, also where jieba glues a verb to it (打淋酸二氢钾)."""
    fixed, corrections = sample_engine.homophones.correct("打淋酸二氢钾 一桶水十五公斤 要放好多克", sample_engine.tokenizer)
    assert "磷酸二氢钾" in fixed and ("淋酸二氢钾", "磷酸二氢钾") in corrections


def test_a_crop_that_shades_coffee_and_a_degree_of_sugar(sample_engine):
    """我家杧果树长大了 遮得有点密了 asks of mango as coffee's shade (round 23's conv23 refused it as 杧果); a degree
    of sugar (测糖…好多度) is a share (the harvest chapter's 18%–24%), no temperature."""
    from rag_core.relevance import asked_amounts

    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    assert other_crop("我家杧果树长大了 遮得有点密了 要是超过一半会咋样", tok, stats) == ""
    assert other_crop("我家杧果树长大了 要是超过一半会咋样", tok, stats) == "杧果"
    assert asked_amounts("买了个测糖的折光仪，完熟的红果一般测出来有好多度？") == [("好多度", "ratio")]
    assert asked_amounts("烘干的时候温度最高好多度？") == [("好多度", "temperature")]
    # and no fact is missing where the evidence states it in per cent (dev31's d31-030 was refused "具体数字")
    brix = _passages("有条件的可用折光仪测果汁糖度作参考，完熟果常见在 18%–24% 之间。")
    assert missing_fact("有人拿个折光仪测咖啡果子的糖度，熟透的红果一般有好多度", brix) == ""
    assert missing_fact("烘干的时候温度最高好多度？", brix) == "具体数字"


def test_a_manual_that_says_follow_the_product_instructions_gives_no_figure(sample_engine):
    """缓释、控释肥料…按产品说明使用 declines a controlled-release fertiliser's grams, as 按标签 declines a dose (three
    writers asked it: adversarial-oos18, 20, 22); a stated figure answers."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    asked = "控释肥一棵结果树一年放好多克？"
    declined = "硝酸钾等更适合旱季滴灌时使用，每株每次 20～30 g。缓释、控释肥料可减少淋失，按产品说明使用。"
    assert unanchored_amount(asked, _passages(declined), tok, stats) == "具体数字"  # the grams beside are another's
    assert unanchored_amount(asked, _passages("控释肥料每株结果树每年施 150～200 g，一次施入。"), tok, stats) == ""


def test_the_words_that_announce_another_question_anchor_no_figure(sample_engine):
    """还有个事，… says another question follows; its 还有 is no word a figure must stand beside (dev17's d17-070 was
    refused once the retrained ranker's evidence held 还有 elsewhere)."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    asked = "还有个事，临沧这边想新开块咖啡地，坡陡到好多度就不能开了"
    evidence = _passages("坡度超过 25 度的陡坡水土流失严重，都不宜再扩大种植。", "还有一些地块土层浅，石砾多。")
    assert unanchored_amount(asked, evidence, tok, stats) == ""
    assert unanchored_amount("坡陡到好多度就不能开了", _passages("还有一些地块土层浅，石砾多。"), tok, stats) == "具体数字"


@pytest.mark.parametrize("question", ["自家留了点生豆，想用铁锅炒来喝，火要好大，炒好久才得？",
                                      "那我留几斤在家里，脱了壳用铁锅炒来自己喝，要炒好久，火开多大？"])
def test_roasting_in_a_wok_to_drink_is_home_roasting_whatever_the_clause(hits, question):
    """自家 or 在家里 in one clause and the wok in the next (adversarial-oos16, 18): a kitchen's roast, which the manual
    (it stops at the green bean) does not teach; drying beans in the sun is not roasting."""
    assert missing_fact(question, hits) == "家庭烘焙和冲煮"
    assert missing_fact("带壳豆晒好以后要炒一下再卖吗？", hits) == ""


def test_the_story_told_before_a_question_asks_nothing(sample_engine, hits):
    """A grower types 。 after what happened and ？ (or nothing) after what is asked (round 24's colloquial23): 几户人家,
    a loan, 两百多斤 told in a closed sentence led to the question, they are not asked. Asked in the last sentence, or in
    a message of one sentence, they still are."""
    tok, corpus = sample_engine.tokenizer, sample_engine.index.corpus_text
    assert missing_fact("我家地在坡脚，旁边就是几户人家。昨晚下大雨，坡上冒浑水，树也歪了。现在要咋个整？", hits) == ""
    assert missing_fact("旁边就是几户人家，一共好多户？", hits) == "统计数字"
    assert unknown_topic("去年借贷款装了滴灌，今年滴头堵了。滴灌里头能放哪样肥？", corpus, tok.synonyms, tok) == ""
    assert unknown_topic("去年借贷款装了滴灌。贷款利息一年要还好多？", corpus, tok.synonyms, tok) == "贷款"
    assert asked_amounts("今天自家几个人摘了三百多斤红果，放了一夜。袋子里发热了，还要得不？") == []
    assert asked_amounts("今天摘的红果放了一夜。几个钟头以内要送去加工？") == [("几个钟头", "hours")]
    assert asked_amounts("一亩地施几斤肥。") == [("几斤", "mass")]  # one sentence: what it says is what it asks
    # a count after a done deed is what happened (留下来几棵, 打了几次), with or without a full stop; a count asked is not
    assert asked_amounts("老辈子留下来几棵高杆咖啡 分不清是铁皮卡还是波旁 看叶子能分得出来不") == []
    assert asked_amounts("锈病药打了几次都不见好，咋整") == []
    assert asked_amounts("锈病药一年要打几次") == [("几次", "count")]
    assert asked_amounts("一亩栽几棵合适") == [("几棵", "plants")]
    # 几 after 那么, 就, 只, 好, 没 is a few (就那么几棵: so few; 好几年: several), no ask (round 31's dev31 was refused
    # "具体数字" for 园子里就那么几棵有绿蚧，要不要整片园子都打一遍药)
    assert asked_amounts("园子里就那么几棵有绿蚧，要不要整片园子都打一遍药") == []
    assert asked_amounts("我家就几亩咖啡，有没得必要加入合作社嘛？") == []
    assert asked_amounts("截干以后要好几年才结果？") == []
    assert asked_amounts("一亩就栽这么些，还能多栽几棵不") == []
    assert asked_amounts("那么一亩地要栽几棵") == [("几棵", "plants")]


def test_a_one_character_noun_the_kb_never_holds_is_what_is_asked(sample_engine):
    """蛇, 猫, 奶 are in no passage, even inside a word: a snake bite's first aid, civet coffee and frothing milk are
    refused for them (round 25's adversarial-oos24 and three read sets answered them from the harvest or the grading
    passages). A KB character is known (锈 of 锈病), one after a question word or number measures (哪阵 is when), and a
    longer unknown name is named before it (白粉虱, not 虱)."""
    tok, stats, corpus = sample_engine.tokenizer, sample_engine.term_stats, sample_engine.index.corpus_text
    snake = "采咖啡的时候被蛇咬了一口 要咋个急救"
    assert assess(snake, sample_engine.search(snake).evidence, tok, corpus, stats).missing == "蛇"
    civet = "猫屎咖啡是咋个整出来的 我们这里能不能搞"
    assert assess(civet, sample_engine.search(civet).evidence, tok, corpus, stats).missing == "猫"
    assert unknown_words("结果的树一年上几回肥？各是哪阵？", tok, stats) == []
    assert unknown_words("咖啡叶子背面好多白粉虱，用啥药打？", tok, stats)[0] == "白粉虱"
    # the growers' passive 遭 (遭蛇咬了), which jieba glues to the snake, says who did it as 被 does
    snake_bit = "采咖啡的时候遭蛇咬了一口 要咋个急救"
    assert assess(snake_bit, sample_engine.search(snake_bit).evidence, tok, corpus, stats).missing == "蛇"


def test_a_limit_asked_in_no_unit_needs_a_number_beside_what_is_limited(sample_engine):
    """超过好多, 最多好多 with no unit asks a limit: the evidence must state a number beside the question's rarest word.
    The KB names 赭曲霉毒素 as what mould makes but gives no limit for it; figures beside 生豆 or 国家规定 (moisture, the
    standard's grades) are no answer (three writers asked it, rounds 19, 23 and 25). Moisture's limit it states."""
    tok, stats, corpus = sample_engine.tokenizer, sample_engine.term_stats, sample_engine.index.corpus_text
    toxin = "咖啡豆里的赭曲霉毒素，国家标准最高是多少？"
    assert assess(toxin, sample_engine.search(toxin).evidence, tok, corpus, stats).missing == "具体数字"
    moisture = "晒干的带壳豆含水率最高是多少？"
    assert asked_amounts(moisture) == [("最高是多少", "figure")]
    assert assess(moisture, sample_engine.search(moisture).evidence, tok, corpus, stats).missing == ""


def test_a_few_of_things_listed_asks_no_count():
    """几 after 跟/和/与 quantifies one of things listed (卡蒂姆跟几棵铁皮卡混起栽: with a few Typica), as 有几棵 tells a few:
    the question asks whether to take seed there, no count (round 25's colloquial24, refused for a "具体数字")."""
    assert asked_amounts("老园子卡蒂姆跟几棵铁皮卡混起栽，打算在这个园子头挑红果子留种，这样要得不？") == []
    assert asked_amounts("卡蒂姆和几棵铁皮卡混栽的园子能留种不？") == []
    assert asked_amounts("卡蒂姆混栽的园子一亩栽几棵？") == [("几棵", "plants")]


def test_water_run_over_the_plant_is_no_brewing(hits):
    """冲 washes leaves with water as well as it brews a cup: 打了霜拿水冲叶子…咋个冲 asks of the frost (the manual's
    spraying of water), not of the kitchen."""
    assert missing_fact("打了霜以后一早拿清水冲叶子，有用没得？咋个冲", hits) == ""
    assert missing_fact("自己在家烘的豆子咋个冲才好喝", hits) == "家庭烘焙和冲煮"


def test_a_list_typed_without_commas_names_the_kbs_own_things(sample_engine):
    """石灰硫磺盐 is 石灰, 硫磺 and 盐 (jieba joins the last two into a run that ends like a salt's name); 咖啡因 is no
    such list, its 因 is no noun."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    assert unknown_focus("刷树干的涂白剂咋个兑？石灰硫磺盐各放好多", tok, stats) == ""
    assert "咖啡因" in unknown_words("咖啡因低的豆子是咋个处理出来的", tok, stats)


def test_how_many_there_are_asked_with_a_question_mark_is_an_ask():
    """有几个 tells a few (园子里有几棵叶子黄了) unless its unit ends the question (锈菌的小种到底有几个？, dev24): then it
    asks how many, which a sentence without a count does not answer."""
    assert asked_amounts("这种病菌的生理小种到底有几个？") == [("几个", "items")]
    assert asked_amounts("坡上有几棵叶子黄了，是缺啥？") == []


def test_at_most_and_moisture_points_are_asked_amounts():
    """最多打几个钟头 asks at most how many hours: 最多 is no "a few more" (多买几棵 is); growers and traders give a
    bean's moisture in points (晒到 12 个水: 12 %), so 几个水分 asks a share, not a count of things; 占好多 asks a
    share of a whole."""
    assert asked_amounts("背起喷雾器打药，一个人一天最多打几个钟头？") == [("几个钟头", "hours")]
    assert asked_amounts("一塘最多放几棵苗？") == [("几棵", "plants")]
    assert asked_amounts("要不要多买几棵备起补缺？") == []
    assert asked_amounts("带壳豆晒到几个水分") == [("几个水", "ratio")]
    assert asked_amounts("生豆要晒到几个水才好卖？") == [("几个水", "ratio")]
    assert asked_amounts("一亩地要修几个水窖？") == [("几个", "items")]
    assert asked_amounts("锈病叶子占好多要打药") == [("占好多", "ratio")]  # a share of the leaves


def test_who_told_the_grower_and_a_while_after_that_are_no_topic(sample_engine):
    """老辈人讲… says who told the grower, not what is asked (round 33's colloquial32 refused it as 老辈); 那阵虫多 is
    jieba's 那 + 阵虫, a while and the insects (refused as 阵虫). A chemical the KB never names before its label's
    说明 is still what is asked."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    assert unknown_focus("老辈人讲在咖啡地下边栽一排密密的树挡起，冷风就进不来，霜就打不着，对不对嘛？", tok, stats) == ""
    assert unknown_focus("咖啡正开花那阵虫多，可以打杀虫药不？", tok, stats) == ""
    assert unknown_focus("吡虫啉说明书上讲兑1500倍，打咖啡要得不", tok, stats) == "吡虫啉"


@pytest.mark.parametrize("question", ["瑰夏卖得贵，我想把一大片都换成瑰夏，划不划算？",
                                      "家里就两亩地，水也时有时无，装滴灌划算不？"])
def test_whether_a_practice_pays_is_no_price_asked(sample_engine, question):
    """Whether a practice pays (划不划算) asks a judgement the manual's reasons give (瑰夏's low yield, drip's cost
    against hose watering); only the price itself is what the manual lacks."""
    hits = sample_engine.search(question).evidence
    assert missing_fact(question, hits) == ""
    priced = "今年鲜果收购价好多钱一公斤？卖鲜果给加工厂划不划算"
    assert missing_fact(priced, sample_engine.search(priced).evidence) == "价格"


def test_a_medicinal_crop_jieba_reads_as_a_number_and_an_animals_young(sample_engine):
    """三七 (notoginseng, grown under forest in Yunnan as coffee is) is a crop the KB never names, though jieba tags it a
    numeral: six writers' questions on it were answered from the nursery or shade chapters. 猪崽 is a piglet."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    assert unknown_focus("三七种子咋个催芽", tok, stats) == "三七"
    assert unknown_focus("三七的遮阳棚要搭好高，透光留好多合适", tok, stats) == "三七"
    assert unknown_focus("家里的猪崽子这几天老拉稀 咋个整", tok, stats) == "猪崽"
    assert unknown_focus("咖啡种子咋个催芽", tok, stats) == ""
    assert unknown_focus("海拔一千三四的园子，六七月份锈病要咋个防", tok, stats) == ""  # numbers stay numbers


def test_tea_leaves_are_a_crop(sample_engine):
    """茶叶 is how growers name tea, the crop (26 gold questions over 15 writers, all out of scope): it carries no crop
    ending (茶园, 茶树 do), and switching the coffee land to it (改种茶叶) was answered from the industry's history."""
    tok, stats = sample_engine.tokenizer, sample_engine.term_stats
    assert unknown_focus("咖啡价钱不好，想把咖啡地改种茶叶，哪个划算点", tok, stats) == "茶叶"
    assert unknown_focus("想把咖啡地改种澳洲坚果，要注意哪样", tok, stats) == ""  # an intercrop the KB teaches


@pytest.mark.parametrize("question", ["那今天纽约那个期货是好多？涨了还是跌了", "纽约咖啡期货今天好多美分一磅",
                                      "咖啡期货明年会不会涨？手头的豆子要不要囤着不卖",
                                      "期货这两天涨还是跌 现在好多美分一磅"])
def test_the_futures_price_and_next_years_rise_are_the_market(sample_engine, question):
    """The KB names the futures only as what the buying price follows: their level today (round 33's o32-004) or
    whether they rise next year is the market, which it cannot tell. How the price is set is answered."""
    answer = sample_engine.answer(question)
    assert not answer.citations
    assert sample_engine.answer("生豆收购价是咋个定出来的？为啥年年不一样").citations


def test_the_ask_word_is_not_what_is_asked_about(sample_engine):
    """好久 (how long), 啥时候, 哪样 are how a question asks, not what about, and no passage uses 好久: 冻了的树好久剪,
    whose other words are of one character (冻, 树, 剪), was refused with none of its words covered (round 34's
    c33-023). Over 1,663 gold single questions holding an ask word, no other decision changed."""
    tok = sample_engine.tokenizer
    assert content_words("冻了的树好久剪", tok) == []
    assert content_words("锈病啥时候打药", tok) == ["锈病", "打药"]
    assert sample_engine.answer("冻了的树好久剪").citations
