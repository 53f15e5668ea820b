"""Does the knowledge base cover the question? Offline there is no calibrated neural relevance score, so the
decision is lexical and explainable, from the corpus itself and the question's structure, and names what is missing:

1. a topical word of the question that occurs nowhere in the corpus, when the question names little the corpus does
   know, or whatever else it names when the word is a name: an agrochemical or pest (阿维菌素, 啶虫脒 even when jieba
   splits it, 卷叶虫), a crop (核桃, 沃柑), a farm animal (山羊, 鸭子), a machine or vehicle (无人机, 摩托), a Latin-letter
   brand, model or scheme (4C), cultivars given as bare numbers (695、788这些);
2. another crop the corpus mentions only in passing (甘蔗, 杧果), asked about in a question that does not name coffee
   or the crop's role beside it (shade, intercrop); or, whatever else the question names, that crop's own disease or
   input (香蕉这个叶斑病, 坚果树施复合肥): a domain term after it in its clause that no passage names together with it;
3. a time-bound or out-of-scope topic (subsidies, loans, compensation) or a named pest, disease, input or crop
   (红蜘蛛, 沼液 …) that the corpus lacks (character patterns, the older test);
4. the kind of fact the question asks for, read from the user's own words, absent from the best evidence: an amount
   of money, a forecast (会不会下霜, and the date a coming season arrives: 明年雨季哪天来), a brand or vendor, paperwork
   (named beside what it is for: 植物检疫手续 is moving seedlings', not an exporter's), a year (stated beside what it is
   asked of: 锈病是哪一年传到云南来的), a person, a total in a unit, a rate's share (成活率有百分之几: a sentence naming
   the rate must state it), a named period's length (安全间隔期是几天: likewise), an address, an insurer's payment,
   home roasting and brewing, how much coffee a person may drink and what it does to health, and an amount in a unit
   (几年, 好久, 零下几度) that no sentence states beside what the question asks it about: the near miss, where the
   knowledge base has the topic but not the fact;
5. the best evidence covers too little of what the question asks (weighted share of its content words).
The asks are the ways Chinese asks for a kind of fact (多少钱, 几个钱, 会不会下霜), not topics of a question set.
Tuned on dev, dev-multiturn and adversarial-oos (tests/data/eval); adversarial-oos2 and dev2 are kept for checking.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Callable, Mapping, Protocol, Sequence

from .history import new_topic_opening, topic_strength
from .lexical import WHAT_TO_DO, Tokenizer
from .records import Hit
from .sentences import TABLE_RULE, sentence_spans
from .termstats import TermStats

# Below this share of the question's words in the evidence, a question is refused when none of its words is one the
# knowledge base uses (我头疼怎么办, 微信怎么转账). A question in the KB's words is judged by the rules below instead:
# over every check set, coverage alone refused 17 answerable questions in growers' words (装袋子的土咋个配, 一把捋下来…)
# and 2 out-of-scope ones.
MIN_COVERAGE = 0.12

# Topics an agronomy manual does not answer (money and policy); refused on them only when the corpus lacks the word.
_SCOPE = re.compile(
    r"收购价|价格|多少钱|几块钱|行情|期货|市价|卖价|补贴|补助|补偿|赔偿|理赔|贷款|保险|政府|政策|申请|合同|租金|地租|驾照|执照"
)
# Named things: a pest, disease, pathogen, input or crop the question names by its head character.
_NAMED = re.compile(r"([\u4e00-\u9fff])(蜘蛛|螨|蚜虫|蚧|蛾|蝇|蓟马|线虫|小蠹|病|瘟|菌|液|灵)")
# 啥子病, 遭病, 查一回病虫, 查病虫, 说病叶率: grammar; 又灵, 很灵, 不灵: an adverb before 灵 (works well), no name
_NOT_A_NAME = set("这那啥么哪该此得有生发的了个种是样怎咋一防治患染传子遭回次遍场趟查看说讲又也都就很太挺最不")


# What kind of fact a question asks for, and what evidence answering it must contain. A manual that names the topic
# but holds no such fact (a price, a forecast, a brand, an office) does not answer the question: the near miss.
# The asks are the ways Chinese asks for that kind of fact (多少钱, 几个钱, 啥价 …), not the topics of any question set.
_NOT_NEGATED = r"(?<!没)(?<!没得)(?<!没有)"  # 没得好多钱: not much money, no ask
_ASK_HOW_MUCH = _NOT_NEGATED + r"(?:多少|好多|几个|几|啥|什么|哪样)"
# money (保险 ending its clause is "safe": 多晒几天保险, 咋个放才保险; insurance bought goes on: 上保险一亩要交多少)
_PRICE_NOUN = r"(?:钱|价格|价钱|价位|单价|工钱|工资|租金|利息|保费|保险(?![，,。？?！!；;\s]|$)|贷款|费用|收购价|卖价|市价|收入|利润|期货)"
_IN_CLAUSE = r"[^，,。？?；;！!]*?"
# the date a season or the weather arrives (哪天来, 几号下霜, 什么时候开始下雨; not 什么时候下肥, which is work)
_DATE_ASK = r"(?:哪天|哪一天|几号|几时|啥时候|啥时|什么时候|好久(?=[^，,。？?]{0,2}?(?:来|到|下|开始|结束)))"  # 好久来: when
_ARRIVES = _DATE_ASK + r"[^，,。？?]{0,3}?(?:来|到|下(?![肥药种苗])|停|开始|结束|过去)"
# (早来, 来得晚 and 预报 ask only in a clause that asks: 今年雨水来得晚，新苗还栽不栽 tells, then asks about planting)
_WILL_IT = (r"(?:会|有没有|有没得|下不下|冷不冷|来不来|早还是晚|早不早|晚不晚|迟不迟|多不多|大不大|重不重|"
            r"(?:预报|早来|晚来|迟来|来得早|来得晚|来得迟|推迟|提前)(?=[^，,。；;！!]{0,4}?(?:吗|么|嘛|不|没|呢|[？?]))|"
            + _ARRIVES + ")")
# a named coming day or week: whatever weather or market it is asked with is a forecast (下礼拜降温厉害不)
_COMING_DAY = r"(?:明天|后天|今晚|今天晚上|这几天|这两天|这一两天|过几天|过两天|这周|下周|这个?星期|这个?礼拜|下个?星期|下个?礼拜)"
# a coming day, or this or next year's season, weather or market (今年冬天, 明年行情; not 今年种的苗)
_COMING = (r"(?:" + _COMING_DAY + r"|近几天|近两天|最近几天|最近两天|近期|下个?月|这个月|这月|本月|月底|这个冬天|"
           r"这个雨季|未来|(?:今年|明年|今冬|明春)(?=[^，,。？?种栽]{0,4}?(?:冬|雨|旱|天气|霜|冷|热|行情|价|涨|跌|雪|冰雹)"
           r"|[^，,。？?]{0,2}?" + _DATE_ASK + r"[^，,。？?]{0,4}?(?:雨|霜|雪|冷|热|旱|降温|冰雹)))")
# one coming weather event, named as this one (这回台风, 这股寒潮): where it goes is a forecast
_THIS_EVENT = r"(?:这回|这次|这场|这轮|这股|这波)\s*(?:台风|寒潮|冷空气|暴雨|大雨|冰雹|冷子|降温)"
_PATH = r"(?:刮|来|到|吹|过来|下来|降)"
_WEATHER_OR_MARKET = r"(?:下雨|雨|霜|雪|冰雹|冷子|降温|寒潮|冷|热|旱|涨|跌|行情|价|台风|天气|气温|温度|怎么说)"
# the clause goes on to ask (今晚会不会下霜？下礼拜降温厉害不): 今晚看样子要下霜， and 广播里讲明天有暴雨， tell a forecast
# heard, then ask what to do about it
_CLAUSE_ASKS = r"(?=[^，,。；;！!]*?(?:吗|么|嘛|不|没|呢|会|几|多少|好多|啥|什么|哪|咋样|怎么样|怎样|[？?]))"  # 天气咋样
ASKED_FACTS: tuple[tuple[str, re.Pattern, re.Pattern | None], ...] = (
    # an amount of money (not how a price is set): the evidence must hold a currency amount
    ("价格", re.compile(_ASK_HOW_MUCH + r"\s*(?:钱|价|块钱|毛钱|元(?!素)|美元|美分)|(?:几|多少)\s*[十百千万]+\s*(?:块|元)"
                      r"|[\d一二三四五六七八九十百千万两]\s*(?:块钱|毛钱|元(?!素)|块(?=[不吗没呢每]|一[斤公])|毛(?=[不吗没呢每]|一[斤公]))"
                      # cheap or dear asks where the clause does not go on (碳铵价钱便宜点，天热的时候用要得不 tells),
                      # or of which (哪个价格便宜，…)
                      r"|" + _PRICE_NOUN + _IN_CLAUSE + r"(?:多少|好多|几|高不高|(?:便宜|贵)(?![点些了一多得]{0,3}[，,；;]))"
                      r"|哪" + _IN_CLAUSE + _PRICE_NOUN + _IN_CLAUSE + r"(?:便宜|贵)"
                      r"|" + _NOT_NEGATED + r"(?:多少|好多|几)" + _IN_CLAUSE + _PRICE_NOUN +
                      r"|(?:多少|好多|几)\s*(?:毛|角|分钱)"
                      # 值钱 asks only in a clause that asks (值不值钱, 赚钱不): 瑰夏那么值钱，能不能大片种 tells, then asks
                      r"|(?:卖钱|赚钱|挣钱|值钱|值不值钱|赚不赚钱)(?=[^，,。；;！!]{0,4}?(?:吗|么|嘛|不|没|呢|[？?]))"
                      r"|(?:能不能|能否|会不会)[^，,。？?]{0,4}?(?:卖钱|赚钱|挣钱|值钱)"
                      r"|一\s*(?:斤|公斤|kg|吨)[^，,。？?\d]{0,4}?(?:多少|好多|几个|几块|几毛)(?!倍|次|天|两|斤|公斤|kg|g|克|个|粒|颗|只|条|根|株|棵)"
                      # who pays a fee (医药费该哪个出, 谁出钱): money, which no manual of growing settles
                      r"|[\u4e00-\u9fff]费(?![工力时心劲事])" + _IN_CLAUSE + r"(?:哪个|谁|哪家|哪方|哪边)\s*来?\s*(?:出|付|掏|承担|报销|赔)"
                      r"|(?:哪个|谁|哪家|哪方|哪边)\s*来?\s*(?:出钱|掏钱|付钱|赔钱)"
                      # (whether a practice pays, 划不划算, asks a judgement the manual's reasons give: the price is what it lacks)
                      r"|行情|贵不贵|(?:卖|值|赔|贷|(?<!开)花|赚|挣|交|付)[^，,。？?\d]{0,3}"
                      # not an amount of produce (一亩能交好多鲜果): what is handed over is the fruit
                      r"(?:多少|好多|几个钱|几块|几毛)(?!倍|次|天|年|月|株|棵|米|厘米|公分|度|斤|公斤|kg|吨|户|亩|个|袋|包|车|筐|箱"
                      r"|鲜果|果|生豆|豆|咖啡)"),
     re.compile(r"\d\s*(?:元|块|角|毛|万元)|元/|￥|¥")),
    # a coming day or season, a "will it", and weather or the market
    # (not "how can I tell whether it will frost tonight", nor its signs: a method, which the manual has)
    ("天气和行情预测", re.compile(r"^(?!.*(?:判断|看[得不]?出|[咋怎][么个样]?(?:看|晓得)|知道|预防|防|预报[说讲]|苗头|征兆|兆头|迹象))[\s\S]*?(?:" + _COMING_DAY
                          + r"[^，,。？?]{0,8}?" + _WEATHER_OR_MARKET + _CLAUSE_ASKS + r"|" + _COMING + r"[^，,。？?]{0,12}?(?:"
                          + _WILL_IT + r"[^，,。？?]{0,6}?" + _WEATHER_OR_MARKET + r"|" + _WEATHER_OR_MARKET
                          + r"[^，,。？?]{0,8}?" + _WILL_IT + r")|" + _WEATHER_OR_MARKET
                          + r"[^，,。？?]{0,6}?(?:今年|明年|今冬|明春|下个?月)[^，,。？?]{0,4}?" + _WILL_IT
                          + r"|(?:今年|明年|这个|今冬|明春)[^，,。？?]{0,4}?(?:雨季|旱季|冬天|霜期)[^，,。？?]{0,4}?" + _ARRIVES
                          # where or when this one event goes (这回台风会不会刮到我们这边, 这股寒潮好久到): its path
                          + r"|" + _THIS_EVENT + r"[^，,。？?]{0,6}?(?:(?:会不会|要不要|" + _DATE_ASK + r")[^，,。？?]{0,4}?" + _PATH
                          + r"|(?:会|要)[^，,。？?]{0,4}?" + _PATH + _CLAUSE_ASKS + "))"),
     re.compile(r"(?!)")),  # a manual holds no forecast
    ("品牌和购买渠道", re.compile(r"哪个牌子|什么牌子|啥牌子|品牌|牌子|型号|哪家|哪个厂|厂家|哪里买|哪儿买|哪点买|哪里有卖|在哪买|去哪买|"
                          r"(?:哪里|哪儿|哪点|哪个(?:苗圃|店|地方|厂|公司|市场|网站|合作社))[^，,。？?]{0,6}?卖(?![钱价])|"
                          r"去哪里买|哪里能买|在哪里可以买|买得到|网上买|怎么买|咋个?买|如何买|联系方式|电话|微信号"),
     re.compile(r"品牌|牌子|型号|公司|厂家|商店|经销|电话|网站|地址|购买渠道")),
    # how to reach someone (有没有电话, 咋个联系他们, 打哪个电话报告): a number to call, which a manual of growing never prints
    ("联系电话", re.compile(r"(?:有没有|有没得|给个|留个|哪个|什么|啥子?|哪样)\s*电话|电话(?:号码|是多少|多少)|联系方式|微信号"
                               r"|手机号|(?:咋个?|怎么|怎样|如何|哪里|去哪)\s*联系"),
     re.compile(r"\d{3,4}\s*[-－]\s*\d{7,8}|(?<!\d)1[3-9]\d{9}(?!\d)|(?:电话|热线|手机|微信)\s*[：:]\s*\d")),
    # selling online: a shop, a live stream, a platform's checkout (the manual sells to buyers and processors)
    ("网络销售", re.compile(r"直播|电商|网店|淘宝|抖音|快手|拼多多|微店|小黄车|带货|网上卖|线上卖"), None),
    # tax, invoices, contracts and the law: the manual teaches growing and processing, none of them
    ("税费和合同", re.compile(r"(?:交|缴|纳|上|哪些|哪样|什么|啥子?|要不要)\s*税|税率|税务|发票|合同|协议书|犯法|违法|打官司|起诉|法院|告状|索赔|赔偿|(?:找|叫|要)[他她]赔"
                        r"|告(?:他|她|他们|她们|人家)|纠纷|地界|界桩"),
     None),  # None: the asked word itself must be there
    ("办理手续", re.compile(r"手续|办证|办[^，,。？?]{0,4}证|许可证|执照|认证|审批|备案|注册|流程|证书|商标|地理标志"), None),  # None: the asked word itself must be there
    # the very year (具体是哪一年): a century or a decade (十九世纪末) is no answer to it
    ("具体年份", re.compile(r"(?:具体|到底|究竟)[^，,。？?]{0,8}?(?:哪年|哪一年|几几年|哪个年份)"), re.compile(r"\d{4}\s*年")),
    ("年份", re.compile(r"哪年|哪一年|哪个年代|什么年代|几几年|哪个年份"), re.compile(r"\d{4}\s*年|\d{2}\s*世纪|[一二十]+世纪|\d{2}\s*年代")),
    # a person's name: who, or the name of someone (那个专家叫啥名字; not 有种瓢虫专门吃粉蚧，叫啥子名字, a thing's name)
    ("人名", re.compile(r"是谁|哪个人|哪位|哪个[\u4e00-\u9fff]{0,3}?(?:士|师|员|专家|老板)"
                      r"|(?:人|士|师|员|专家|老板|他|她)[^，,。？?]{0,10}?(?:叫什么名字|叫啥名字|叫啥子名字|名字叫)"),
     re.compile(r"先生|女士|博士|教授|专家")),
    # at home, for oneself, or for the cup: roasting, grinding, brewing and drinking are past the green bean, where
    # this manual stops; not whether a defective bean may be drunk (霉豆能不能自己喝), which its grading answers
    # (a cupping's water and dose are the grading protocol's, which the manual gives: 杯测的时候冲咖啡，水要烧到好多度)
    # (nor water run over the plant: 打了霜早上要拿水冲叶子…咋个冲 washes the leaves)
    ("家庭烘焙和冲煮", re.compile(r"^(?![^。]*?(?:霉|虫蛀|变质|瑕疵|缺陷))(?![\s\S]*杯测)(?![\s\S]*[冲泡淋](?:叶|树|苗|枝|根|种子|掉))[\s\S]*?(?:"
                          r"(?:^|[，,。？?])(?=[^，,。？?]*(?:咖啡|豆))[^，,。？?]*?(?:在家|家里|家用|自己|自家)"
                          r"[^，,。？?]{0,10}?(?:炒|烤|烘(?!干)|焙|磨|冲(?!洗|刷)|煮|喝|泡(?!水|种))"
                          # how it tastes, asked (好不好喝, 好喝不), not told (咖啡馆的人说铁皮卡好喝价钱高，…)
                          r"|好不好喝|(?:好喝|难喝)(?=[^，,。；;！!]{0,4}?(?:吗|么|嘛|不|没|呢|[？?]))|(?:冲|煮|泡)(?:一杯|杯)?咖啡|(?:泡水|泡茶|能不能|可不可以|可以)喝|(?:怎么|咋个?|如何)(?:冲|煮|泡)(?!洗|水|刷)"
                          # roasting in a wok to drink (用铁锅炒来喝, 炒好了泡来喝): a kitchen's roast, whoever's beans
                          r"|(?:铁锅|炒锅|平底锅|锅里|锅头)[^，,。？?]{0,4}?(?:炒|烘|焙)|炒[^，,。？?]{0,6}?喝"
                          # the cup's own ways and machines, which a grower meets in town (冷萃, 手冲, 摩卡壶)
                          r"|冷萃|冷泡|手冲|挂耳|速溶|拿铁咖啡|美式咖啡|卡布奇诺|意式|浓缩咖啡|摩卡壶|法压壶|咖啡机|虹吸壶)"),
     re.compile(r"(?!)")),
    # how much coffee a person may drink, and what it does to health: the cup is past the green bean too (杯测 tastes
    # a cup to grade beans, and 生豆霉了还能喝吗 asks about a defect, which the manual has: neither asks this)
    ("喝咖啡与健康", re.compile(r"喝[^，,。？?]{0,6}?(?:几|多少|好多|两三|一两|[一两三四五六七八九十\d])杯|(?:几|两三|一两)杯咖啡"
                          r"|喝[^，,。？?]{0,8}?(?:血压|身体|健康|孕妇|怀孕|怀娃娃|失眠|心脏|胃)"
                          r"|(?:血压|孕妇|怀孕|怀娃娃|失眠|心脏病)[^，,。？?]{0,10}?喝"),
     re.compile(r"(?!)")),
    # what an insurer pays: the manual says only that a loss is reported
    ("保险理赔", re.compile(r"保险[^。？?]{0,8}(?:赔|报销)|理赔"), re.compile(r"赔付|赔偿|理赔|赔多少|\d\s*元")),
    # where an organisation, market or shop is: an address
    ("地址", re.compile(r"(?:中心|公司|市场|局|站|所|厂|店|门市|网点)[^，,。？?]{0,3}(?:在哪|哪里|什么地方|啥地方|地址)"),
     re.compile(r"地址|[路街]\d|\d+号")),
)
# 几 that asks how many, not a few: 有几棵, 好几天, 十几年, 我们几户, 说几个名字 (name a few), 举几个例子, and one of
# things listed (卡蒂姆跟几棵铁皮卡混起栽: with a few Typica) …unless a question mark follows its unit at once
# (云南到底有几个？): a few is told, not asked
_HOW_MANY_JI = r"(?:(?<![有了好这那前头后过十们说讲举列没跟和与同])(?<!没得)几|(?<=有)几(?=[\u4e00-\u9fff]{1,2}\s*[？?]))"  # 没几个: not many
# A total asked in a unit ("一共多少户", "全省多少吨"): the evidence must hold a number in that unit.
_TOTAL = re.compile(r"(?:一共|总共|总计|全省|全国|全州|全市|全县|全世界|全球|每年|一年)[^，,。？?]{0,12}(?:多少|好多|"
                    + _HOW_MANY_JI + r")\s*(户|家|人|个人|吨|万吨|公斤|斤|亩|万亩|公顷)|(?:多少|好多|" + _HOW_MANY_JI
                    + r")\s*(户|吨|万吨)")
_UNIT_FORMS = {"户": "户", "家": "家", "人": "人", "个人": "人", "吨": "吨|t(?![a-z])", "万吨": "吨|t(?![a-z])",
               "公斤": "kg|公斤", "斤": "kg|公斤|斤", "亩": "亩", "万亩": "亩", "公顷": "公顷|hm"}


# An amount asked in a physical unit ("零下几度", "一亩收好多公斤", "调几毫米"): the evidence must hold a number in it.
_AMOUNT = re.compile(r"(?:多少|好多|" + _HOW_MANY_JI + r")\s*(度|公斤|斤|千克|克|毫升|升|毫米|厘米|公分|万亩|小时|个钟头|个月|尾|头|箱)")
_MASS, _VOLUME, _LENGTH, _TIME = "kg|g(?![a-z])|公斤|斤|克", "L|mL|ml|升|毫升|m³", "mm|cm|毫米|厘米|m(?![a-z²³])", "h(?![a-z])|小时"
_TEMPERATURE = "°C|℃|度|°"
_AMOUNT_FORMS = {"度": _TEMPERATURE, "公斤": _MASS, "斤": _MASS, "千克": _MASS, "克": _MASS,  # the same kind of unit:
                 "毫升": _VOLUME, "升": _VOLUME, "毫米": _LENGTH, "厘米": _LENGTH, "公分": _LENGTH,  # g per tree answers 几斤
                 "万亩": "万亩|亩", "小时": _TIME, "个钟头": _TIME, "个月": "个月|月", "尾": "尾", "头": "头", "箱": "箱"}


def missing_fact(question: str, hits: Sequence[Hit], top: int = 3) -> str:
    """The kind of fact the question asks for that the best evidence does not contain ("" when none is missing); the
    story told before the question (`told_spans`) asks nothing."""
    evidence = "".join(h.chunk.text for h in hits[:top])
    question = asked_part(question)
    for name, asks, answered_by in ASKED_FACTS:
        m = asks.search(question)
        if m and not (answered_by.search(evidence) if answered_by else _asked_word(m.group(0)) in evidence):
            return name
    total = _TOTAL.search(question)
    if total and not _has_number_in(_UNIT_FORMS[total.group(1) or total.group(2)], evidence):
        return "统计数字"
    amount = _AMOUNT.search(question)
    if amount and not _has_number_in(_SHARE if amount.group(1) == "度" and _of_sugar(question)
                                     else _AMOUNT_FORMS[amount.group(1)], evidence):
        return "具体数字"
    return ""


_SHARE = "%|°Bx"


def _of_sugar(question: str) -> bool:
    """Whether a degree the question asks is one of sugar (测糖…好多度, 糖度): a share (°Bx, stated in per cent: 完熟果常见
    在 18%–24%), no temperature."""
    return "糖" in question


# An amount asked in a unit of some kind (签几年, 隔好久, 打几回, 零下几度, 好多公斤, 一年发几代, 啥子比例) is answered by a number
# of that kind standing beside what the question asks it about, not by any such number in the passages: "澳洲坚果扛得住
# 零下几度" is not answered by the frost sentence's −2 °C for coffee, nor "旋皮天牛成虫好长" by the other beetle's length.
_KINDS = {"mass": _MASS + "|mg|两", "trace": "μg|µg|微克|ppb",  # a contaminant's limit: no kilogram states it
          "volume": _VOLUME + "|方|立方", "length": _LENGTH + "|km|米|公分|寸|尺",
          # seasons count years too (至少 3 个收获季 answers 要看几年); a standard writes minutes as min (静置 3～5 min)
          "temperature": _TEMPERATURE, "time": "h(?![a-z])|d(?![a-z])|min(?![a-z])|小时|个钟头|分钟|天|日|周|星期|礼拜|个月|月|年|个?[\u4e00-\u9fff]{0,2}季"
                  "|世纪|年代",  # 好久种下的: 十九世纪末 says when
          # days or hours asked (几天, 好多个小时) are a span, which a month of the year (成虫 4–6 月出来) does not state
          "days": "h(?![a-z])|d(?![a-z])|min(?![a-z])|小时|个钟头|分钟|天|日|周|星期|礼拜|个月|年",
          # minutes or hours asked (泡几分钟, 要泡几个钟头): a figure on that scale, not the weeks of another wait
          "minutes": "秒|分钟|min|s(?![a-z])|小时|h(?![a-z])", "hours": "分钟|min|小时|h(?![a-z])|个钟头|天|d(?![a-z])|昼夜",
          "area": "亩|公顷|hm|m²|平方", "count": "次|遍|回|道|轮", "plants": "株|棵|窝|丛", "grains": "粒|颗",
          "generations": "代", "items": "个|只|头", "ratio": r"倍|%|‰|成|[:：∶比]\s*\d", "level": "级", "buckets": "桶",
          "bundles": "捆", "mesh": "目",  # a net's or a filter's mesh (好多目的): 120 目, never the beans' screen beside it
          "ph": ""}
_KINDS["often"] = f"{_KINDS['days']}|月|{_KINDS['count']}"  # how often: a span, or a count in a period (每年 2～4 次)
_NUMBER = r"(?:\d|[一二两三四五六七八九十百半])[\d.]*\s*(?:万|千|百)?\s*"
# the number before a unit, where a kind reads it otherwise: 一个 is an article, not a count of things; generations
# may be many (一年可繁殖多代 answers 一年几代)
_NUMBER_OF = {"items": r"(?:\d|[两三四五六七八九十百])[\d.]*\s*(?:万|千|百)?\s*", "generations": r"(?:\d|[一二两三四五六七八九十多])\s*"}
_SAME_DAY = "当天|当日|立即|立刻|马上|随即|随采随|次日|第二天"  # how long, in words: 当天采摘的鲜果当天脱皮
_UNIT_KIND = {**dict.fromkeys(("斤", "公斤", "千克", "克", "两", "毫克"), "mass"), "微克": "trace", **dict.fromkeys(("升", "毫升", "方"), "volume"),
              **dict.fromkeys(("米", "厘米", "公分", "毫米", "寸", "尺", "公里"), "length"), "度": "temperature",
              **dict.fromkeys(("年", "个月", "月", "季"), "time"),
              **dict.fromkeys(("天", "日", "周", "星期", "礼拜"), "days"), **dict.fromkeys(("分钟", "秒"), "minutes"),
              **dict.fromkeys(("小时", "个钟头", "钟头"), "hours"),
              **dict.fromkeys(("亩", "万亩", "公顷"), "area"), **dict.fromkeys(("次", "遍", "回", "道", "轮"), "count"),
              **dict.fromkeys(("株", "棵", "窝", "丛"), "plants"), **dict.fromkeys(("粒", "颗"), "grains"),
              "代": "generations", "目": "mesh", "个": "items", "倍": "ratio", "成": "ratio", "级": "level", "桶": "buckets",
              "捆": "bundles", "个水": "ratio"}  # 晒到几个水: moisture points, as growers and buyers say (12 个水: 12 %)
_UNIT_GUARD = {"个": "(?![月钟小])(?<!哪几个)",  # 个 counts things: not 几个月, 几个小时 (times), nor 哪几个 (which)
               "个水": "(?=分|[才就的了吗嘛呢哦啊，,。？?！!\\s]|$)"}  # moisture points, not 几个水窖 (a count)
_ASKED_UNIT = re.compile(r"(?:好多|多少|" + _HOW_MANY_JI + r")\s*(?P<unit>"
                         + "|".join(re.escape(u) + _UNIT_GUARD.get(u, "")
                                    for u in sorted(_UNIT_KIND, key=len, reverse=True))
                         # how often (好久修一回, 多久打一次): a span, or a count in a period (每年修剪 2～4 次)
                         + r")|(?P<often>(?:多长时间|多久|好久)[^，,。？?]{0,6}?一[回次遍道轮])"
                         r"|(?P<time>多长时间|多久|好久)"
                         # the spacing of one plant from the next (一棵和一棵隔好远, 一丛跟一丛之间, 棵跟棵隔好远): a length
                         r"|(?:[一每](?:棵|株|丛|窝|蔸)[^，,。？?]{0,10}?(?:和|跟|与|同|隔|到|离)[^，,。？?]{0,6}?[一每另](?:棵|株|丛|窝|蔸)"
                         r"|树(?:跟|和|与)树|(?:棵|株|丛|窝|蔸)(?:跟|和|与)(?:棵|株|丛|窝|蔸))[^，,。？?]{0,10}?(?P<spacing>好远|多远|好宽|多宽|几米|多少米|好多米)"
                         # the size of a thing made or bought (网眼要选好大的, 支架架好高, 管子要好粗): a length
                         r"|(?:网眼|网孔|孔径|管子|管径|支架|架子)[^，,。？?]{0,6}?(?P<size>好大|多大|好粗|多粗|好宽|多宽|好高|多高)"
                         r"|(?:啥子?|什么|哪样|多少|好多|有没有个?|有没得个?)\s*(?P<share>比例)|(?P<percent>百分之(?:几|好多|多少))"
                         r"|占\s*(?:到\s*)?(?P<portion>好多|多少)"  # 病叶占好多要打药: a share of the whole
                         r"|(?P<ph>pH)\s*值?[^，,。？?\d]{0,6}?(?:好多|多少|几)"  # pH 降到好多: a pH figure
                         # a limit asked in no unit (国家规定不能超过好多): a figure in whatever unit
                         r"|(?:超过|超出|最多|最高|上限|限量|限值)\s*(?:是|为|有|能有)?\s*(?P<limit>好多|多少)(?=\s*(?:[？?。，,！!]|$))"
                         # a rate (成活率一般有好多, 发芽率能有几成, 成活率一般能有几成, 成活率有好高): a share, stated in per cent or tenths
                         r"|[\u4e00-\u9fff](?P<rate>率)\s*(?:(?:一般|大概|大约|通常|能|会|要|可以)\s*){0,2}(?:有|是|在|达到|到)?\s*(?:好多|多少|几成|好高|多高)")
# what each kind of ask but an amount in a unit is answered by
_ASKED_KIND = {"often": "often", "time": "time", "spacing": "spacing", "size": "length", "share": "ratio", "percent": "ratio", "rate": "ratio",
               "portion": "ratio",
               "ph": "ph", "limit": "figure"}
_NOT_ORDINAL = r"(?<!第)(?<!第\d)(?<!第\d\d)(?<!第[一二三四五六七八九十])"  # 第一天 is a day's place, no span of days
_FIGURES = {kind: re.compile(_NOT_ORDINAL + _NUMBER_OF.get(kind, _NUMBER) + "(?:" + units + ")"
                             + ("|" + _SAME_DAY if kind in ("time", "days") else "")) for kind, units in _KINDS.items()}
_ANY_NUMBER = re.compile(r"\d")
# plants counted as a share of the plants (按定植株数的 5 %～10 % 准备预备苗 answers 预备苗要多准备好多棵)
_FIGURES["plants"] = re.compile(_FIGURES["plants"].pattern + r"|(?:株|棵)数的?\s*(?:约\s*)?\d[\d.]*\s*%")
_FIGURES["figure"] = _ANY_NUMBER  # a limit in no unit asked: any number states it
_FIGURES["ph"] = re.compile(r"pH\s*值?\s*(?:为|在|约|降至|降到|[<>≤≥＜＞]|低于|高于|小于|大于)?\s*\d")
# one plant's distance from the next (一丛跟一丛隔好远): a length stated as a spacing (株距 1.0～1.5 m, 间隔 1 m, 8–10 ×
# 8–10), not a plant's height beside it (植物篱…高度控制在 50～100 cm)
_SPACING = re.compile(r"距|间距|间隔|相隔|隔\s*[\d约]|之间|相邻|[×xX＊*]")


class _Beside:
    """A figure of the asked kind in a sentence that also says what it is a figure of (a spacing, a rate's time)."""

    def __init__(self, figure: _Figure, said: re.Pattern):
        self.figure, self.said = figure, said

    def search(self, sentence: str) -> bool:
        return bool(self.figure.search(sentence) and self.said.search(sentence))


_FIGURES["spacing"] = _Beside(_FIGURES["length"], _SPACING)
_CLAUSE_ENDS = "，,。？?！!；;：:"
_CLAUSE_SPLIT = re.compile("[" + _CLAUSE_ENDS + "、 ]")  # the clauses of a question, as the anchored tests read them
EVERYDAY_VERB_FREQ = 5000  # a verb this common in general Chinese (jieba's dictionary: 放在, 出来) anchors no figure
ANCHOR_SHARE = 0.1  # a word in more of the passages than this (咖啡, 鲜果) anchors no figure
MIN_AMOUNT_SUPPORT = 0.3  # of the IDF weight of the question's anchors in the evidence, beside the number
_ANCHOR_POS = ("n", "nz", "nr", "ns", "nt", "vn", "v")


# a later clause that asks what to do (…裂开几道口子，坡脚还冒浑水，咋个整): 几 before it tells a few, asks nothing
_ASKED_WHAT_TO_DO_AFTER = re.compile(r"[^，,。；;！!？?]*[，,。；;！!\s][^？?]*?(?:" + WHAT_TO_DO + r")[^，,。；;！!？?]{0,3}[？?]?\s*$")
# …or asks with a question word of its own, which no amount is (老辈子传下来几棵老咖啡树，…，这个是哪样品种？), or whether
# (…只有顶上结几颗果，…，有没得办法只换这一根？): the last clause asks, and the 几 two clauses or more before it describes
_ASKED_OTHER_AFTER = re.compile(r"[^，,。；;！!？?]*[，,。；;！!\s][^？?]*[，,。；;！!\s][^，,。；;！!？?]*?"
                                r"(?:哪样|什么|啥子?|哪个|哪种|哪一种|为什么|为啥|咋回事|咋个回事|是不是|对不对"
                                r"|有没得|有没有|能不能|可不可以|行不行|要不要|得不得|好不好)"
                                r"[^，,。；;！!？?]*[？?]?\s*$")
_WISH = re.compile(r"想[^，,。？?！!；;]{0,3}$")  # 想整几亩, 想养成几个杆杆: a few wanted, no amount asked
_A_FEW_MORE = re.compile(r"(?<![最至顶])多[\u4e00-\u9fff]$")  # 多买几棵, 多灌几回: a few more, whether to is asked (最多打几个钟头: at most)
_A_FEW = re.compile(r"(?:那么|这么|就|只有?|才|好|没)$")  # 就那么几棵, 好几年, 没几天: so few, several, hardly any: no ask
# a count after a done deed (留下来几棵高杆咖啡, 打了几次都不见好, 死了几棵): what happened, told; not asked of the bot
_DONE = re.compile(r"[\u4e00-\u9fff](?:了|下来|下了)$")
# a count that describes a kind (整成几个杆杆的那种多干树: the kind with a few stems), asked of nobody
_OF_A_KIND = re.compile(r"[\u4e00-\u9fff]{0,3}的(?:那种|这种|那样|这样)")


def asked_amounts(question: str) -> list[tuple[str, str]]:
    """The amounts a question asks, each as (its words, the kind of figure that answers it: "count", "mass" …)."""
    told = told_spans(question)  # 自家几个人摘了两百多斤。…还要得不: a few people, no ask
    return [(m["spacing"] or m["size"] or m[0], _kind_asked(m, question)) for m in _ASKED_UNIT.finditer(question)
            if not _in(told, m.start())
            # a clause that opens on 几棵, 几次 (or a place: 旁边几棵) counts its subject ("几棵咖啡树长得矮小": a few
            # trees); 几年能结果 asks. What one wants to do (想整几亩, 想种几棵) is a few, no ask, and so is a few more
            # (要不要多买几棵: whether to is asked).
            and not (m["unit"] and _UNIT_KIND[m["unit"]] in ("count", "plants")
                     and (question[:m.start()].rstrip()[-1:] in ("", *_CLAUSE_ENDS, "边", "头", "里", "上", "下")
                          or _DONE.search(question[:m.start()])))
            and not (m.group(0).startswith("几") and (_WISH.search(question[max(0, m.start() - 5):m.start()])
                                                       or _A_FEW_MORE.search(question[:m.start()])
                                                       or _A_FEW.search(question[:m.start()])
                                                       or _OF_A_KIND.match(question, m.end())
                                                       or _ASKED_WHAT_TO_DO_AFTER.match(question, m.end())
                                                       or _ASKED_OTHER_AFTER.match(question, m.end())))]


def _kind_asked(ask: re.Match, question: str) -> str:
    """The kind of figure an ask is answered by (a degree of sugar is a share: `_of_sugar`)."""
    if not ask["unit"]:
        return _ASKED_KIND[ask.lastgroup]
    kind = _UNIT_KIND[ask["unit"]]
    return "ratio" if kind == "temperature" and _of_sugar(question) else kind


def states_asked_amount(question: str, text: str) -> bool:
    """Whether `text` states a figure of each kind the question asks (要打几次 → 连喷 2 次); False when it asks none."""
    return amount_stated(question)(text)


def amount_stated(question: str) -> Callable[[str], bool]:
    """`states_asked_amount` for one question, its asks read once: an extractive answer tests every sentence."""
    kinds = [kind for _, kind in asked_amounts(question)]
    return lambda text: bool(kinds) and all(_FIGURES[kind].search(text) for kind in kinds)


# An amount asked per day or hour (一个熟手一天能采好多公斤, 微喷头一个钟头出好多升水): a rate, which a sentence states
# only with its time (每天, /h, 一天): a kilogram figure of a picking standard or a litre of a watering is none.
_PER_TIME_ASKED = re.compile(r"(?:一|每)\s*(?:天|日|个?小时|个?钟头)[^，,。？?]{0,8}?$")
_PER_TIME = re.compile(r"每\s*(?:天|日|个?小时|个?钟头|人|工)|/\s*(?:d|h|天|日|小时)(?![a-z])|(?:一|1)\s*(?:天|日|个?小时|h(?![a-z]))"
                       r"|24\s*(?:h|小时)(?![a-z])|日(?:处理|产|采|工作)|台时|工日")


def _figure_for(question: str, words: str, kind: str) -> _Figure:
    at = question.find(words)
    rate = kind not in ("time", "days", "hours", "minutes") and at > 0 and _PER_TIME_ASKED.search(question[:at])
    return _Beside(_FIGURES[kind], _PER_TIME) if rate else _FIGURES[kind]  # (how long within a day is a duration, no rate)


def asked_figures(question: str) -> list[_Figure]:
    """What states each amount the question asks (好多克: a mass; 几个钟头: hours; 一天好多公斤: a mass per day), in the
    question's order; [] when it asks none."""
    return [_figure_for(question, words, kind) for words, kind in asked_amounts(question)]


def figure_windows(text: str, figure: _Figure) -> list[str]:
    """Each sentence of a passage that states the figure, with its neighbours (a table's bare figures read with their
    columns' units, as prose states them)."""
    text = _with_column_units(text)
    sentences = [text[a:b] for a, b in sentence_spans(text)]
    return ["".join(sentences[max(0, i - 1):i + 2]) for i, s in enumerate(sentences) if figure.search(s)]


def unanchored_amount(question: str, hits: Sequence[Hit], tokenizer: Tokenizer, stats: TermStats) -> str:
    """"具体数字" when the question asks an amount in a unit and no sentence of the evidence (with its neighbours and
    heading) states a number of that kind beside at least MIN_AMOUNT_SUPPORT of the question's words that the
    evidence uses (IDF-weighted; a growers' word counts through the synonym table's KB words); "" otherwise."""
    asks = asked_amounts(question)
    if not hits:
        return ""
    figures = asked_figures(question)
    if not asks:
        return "具体数字" if _declined_bare(question, hits, tokenizer, stats) else ""
    if any(kind == "figure" for _, kind in asks) and not _rarest_beside_a_number(question, hits, tokenizer, stats,
                                                                                 [a for a, _ in asks]):
        return "具体数字"
    return "具体数字" if _support(question, hits, tokenizer, stats, [a for a, _ in asks], figures) < MIN_AMOUNT_SUPPORT else ""


def _rarest_beside_a_number(question: str, hits: Sequence[Hit], tokenizer: Tokenizer, stats: TermStats,
                            asks: Sequence[str]) -> bool:
    """Whether a sentence of the evidence states a number beside the question's rarest anchor: a limit asked in no
    unit (赭曲霉毒素…不能超过好多) is the limit of that thing, not a figure of the words around it (生豆, 国家规定)."""
    anchors = _anchors(question, tokenizer, stats, list(asks))
    if not anchors:
        return True
    _, forms, _ = max(anchors, key=lambda a: a[2])
    return any(any(f in h.chunk.text[a:b] for f in forms) and _ANY_NUMBER.search(h.chunk.text[a:b])
               for h in hits for a, b in sentence_spans(h.chunk.text))


# How much of a thing, in no unit (各要留好多果胶): asked only where the knowledge base declines the figure for it.
_BARE_AMOUNT = re.compile(_NOT_NEGATED + r"(?:好多|多少)(?=[\u4e00-\u9fff])(?!钱|天|年|次|个|倍)")
_CLAUSE_NUMBER = re.compile(r"^\s*\d+(?:\.\d+)*\s*")  # 7.2 of a standard's clause: no figure


def _declined_bare(question: str, hits: Sequence[Hit], tokenizer: Tokenizer, stats: TermStats) -> bool:
    """Whether the question asks how much of something (好多果胶) that the evidence declines to state (_declined)."""
    ask = _BARE_AMOUNT.search(question)
    if not ask:
        return False
    anchors = _held_anchors(question, hits, tokenizer, stats, [ask.group(0)])
    clause = next((c for c in _clauses(question) if ask.group(0) in c), question)
    sentences = [_CLAUSE_NUMBER.sub("", h.chunk.text[a:b]) for h in hits for a, b in sentence_spans(h.chunk.text)]
    return bool(anchors) and _declined(ask.group(0), _ANY_NUMBER, clause, anchors, sentences)


# "用什么药", "打啥子药": the evidence must name a chemical (a name chemistry coins, a formulation, a dilution) beside
# what the question asks it for: "香蕉得了枯萎病用什么药" is not answered by a sentence naming 香蕉枯萎病 without one,
# nor by the fungicides the manual gives for coffee's own diseases.
# (not a chemical's attribute: 按哪个药的间隔期算, 间隔期按哪个药算 ask which interval counts)
_ASKED_REMEDY = re.compile(r"(?:啥子?|什么|哪样|哪种|哪个|哪些|哪一种)\s*(?:农药|药剂|药水|药)(?!\s*(?:的|来?算))")


def unanchored_remedy(question: str, hits: Sequence[Hit], tokenizer: Tokenizer, stats: TermStats) -> str:
    """"防治药剂" when the question asks which chemical to use and no sentence of the evidence (with its neighbours
    and heading) names one beside at least MIN_AMOUNT_SUPPORT of the question's words that the evidence uses; ""
    otherwise (the same test as an amount's, with a chemical for the figure). A pest or disease the question names
    is what the chemical is for: it must stand in the chemical's own sentence or paragraph (说是根结线虫，用哪样药灌根
    is not answered by the copper spray of the rust line above the nematode's, however much of the nursery it
    shares)."""
    return _unheld("防治药剂", _ASKED_REMEDY.search(question), _REMEDY, question, hits, tokenizer, stats,
                   subject=_PEST_OR_DISEASE)


class _Figure(Protocol):
    """What an anchored test looks for in a sentence: a pattern, or a test of its own (_PlacesNamed, _CodesBesides)."""

    def search(self, sentence: str, /) -> object: ...


def _unheld(missing: str, ask: re.Match | None, figure: _Figure, question: str, hits: Sequence[Hit],
            tokenizer: Tokenizer, stats: TermStats, subject: re.Pattern | None = None) -> str:
    """`missing` when the question makes the `ask` and no sentence of the evidence matching `figure` holds
    MIN_AMOUNT_SUPPORT of the question's anchors beside it (`_support`, with `subject`); "" otherwise, or when nothing
    is asked."""
    if not ask or not hits:
        return ""
    return missing if _support(question, hits, tokenizer, stats, [ask.group(0)], [figure], subject) < MIN_AMOUNT_SUPPORT else ""


# How long an insect's stage lasts (卵要几天才孵出来, 蛹期有好多天, 从若虫孵出来到长成要好多天): a span of days stated
# with the stage in one clause (卵期 7–10 天), which 若虫孵化盛期喷…，间隔 10–15 天 (a spraying interval) is not.
_STAGE = r"(?:孵|羽化|化蛹|蛹|卵期|若虫期|幼虫期|成虫期|蜕皮|长成)"
_DAYS_ASKED = r"(?:" + _HOW_MANY_JI + r"|好多|多少)\s*(?:天|日|周|个?星期|个?礼拜)"  # not 这几天: these days, told
_ASKED_STAGE = re.compile(_STAGE + r"[^。？?！!]{0,20}?" + _DAYS_ASKED + "|" + _DAYS_ASKED + r"[^，,。？?]{0,6}?" + _STAGE)
_STAGE_SPAN = re.compile(_STAGE + r"[^，,；;。]{0,15}?\d[\d.–~～-]*\s*(?:天|日|周|d(?![a-z]))"
                         r"|\d[\d.–~～-]*\s*(?:天|日|周)[^，,；;。]{0,10}?" + _STAGE)
_STAGE_NAMES = {"孵": "孵化", "化蛹": "蛹期", "蛹": "蛹期", "长成": "发育"}  # what the refusal calls the stage asked


def unanchored_stage(question: str, hits: Sequence[Hit], tokenizer: Tokenizer, stats: TermStats) -> str:
    """"孵化的天数" (the stage named) when the question asks how many days an insect's stage lasts and no sentence
    of the evidence states a span of days with a stage in one clause beside at least MIN_AMOUNT_SUPPORT of its
    words; "" otherwise."""
    ask = _ASKED_STAGE.search(question)
    stage = re.search(_STAGE, ask.group(0)).group(0) if ask else ""
    return _unheld(f"{_STAGE_NAMES.get(stage, stage)}的天数", ask, _STAGE_SPAN, question, hits, tokenizer, stats)


# How to treat or control something (香蕉枯萎病咋个治): a control measure (spraying, a chemical, removing, burning,
# trapping …) stated beside what is asked, which a passing mention does not give (不从香蕉枯萎病发生区调苗).
_ASKED_CONTROL = re.compile(r"(?:咋个?|怎么|怎样|如何|啷个)\s*(?:治|防治|防控|防|控制|根治)|(?:治|防)得(?:好|住|了)")
_PEST_OR_DISEASE = re.compile(r"(?:病|虫|螨|蚧|蛾|蝇|蠹|蓟马|天牛|菌)$")  # a name the control is asked for
_CONTROL = re.compile(r"防治|防控|药剂|农药|杀菌剂|杀虫剂|倍液|喷|施药|用药|铜制|清除|剪除|拔除|挖除|烧毁|销毁|摘除|捕杀|诱杀"
                      r"|涂白|轮换|隔离|处理|措施|控制")


def unanchored_control(question: str, hits: Sequence[Hit], tokenizer: Tokenizer, stats: TermStats) -> str:
    """"香蕉枯萎病的防治方法" when the question asks how to treat or control a named pest or disease and no sentence
    of the evidence states a control measure beside at least MIN_AMOUNT_SUPPORT of its words (and beside the name it
    asks of); "" otherwise."""
    named = [t for t in tokenizer.entities(question) if t in tokenizer.names and _PEST_OR_DISEASE.search(t)]
    if not named:
        return ""  # 咋个防雨水冲, 提前咋个防 (霜): frost and erosion have measures of their own
    return _unheld(f"{named[0]}的防治方法", _ASKED_CONTROL.search(question), _CONTROL, question, hits, tokenizer, stats)


# "哪几个编号", "哪几号生理小种": a line's or a race's designation, which the evidence must state (a code: CIFC 7963, 3 号)
# beside what the question asks it of; 几号 alone is mostly a date.
_ASKED_CODE = re.compile(r"编号|型号|代号|哪几号|哪一号|哪一?个(?:品系|品种|小种)?号|几号(?=[^，,。？?]{0,4}(?:小种|品系|品种))")
# a line's name (萨奇姆有哪些品系，具体叫啥名字): lines are named by their codes, as CIFC 7963 is
_ASKED_LINE_NAME = re.compile(r"品系[^。？?]{0,24}?(?:叫(?:啥子?|什么|哪样|哪个)|(?:啥子?|什么|哪样)名(?:字|称))")
_CODE = re.compile(r"(?<![A-Za-z])(?!pH)[A-Za-z]+\s*-?\s*\d+|\d+\s*号(?!文)")  # T5296, CIFC 7963, 3 号; not pH 5.5


class _CodesBesides:
    """A sentence states a code of what the question asks, other than one it gives itself: 卡蒂姆除了 CIFC 7963，还有
    哪几个品系编号 is not answered by CIFC 7963, nor 像卡蒂姆那个7963一样的 (its digits given). A code is the thing's
    it stands beside (CIFC 7963 等品系: a line's, not a rust race's: 哪几号生理小种) and a name's that the sentence gives before
    it (卡蒂姆（以 CIFC 7963 等品系为主）: Catimor's, not the 萨奇姆 the question names)."""

    def __init__(self, question: str, tokenizer: Tokenizer):
        self.given = re.sub(r"\s+", "", question).lower()
        self.digits = set(re.findall(r"\d{3,}", question))
        self.kinds = [kind for kind in _CODED_KINDS if kind in question]
        self.names = tokenizer.names
        self.named = {term for term in tokenizer.entities(question) if term in self.names}

    def search(self, sentence: str) -> bool:
        return any(self._new(m, sentence) for m in _CODE.finditer(sentence))

    def _new(self, code: re.Match, sentence: str) -> bool:
        if re.sub(r"\s+", "", code.group(0)).lower() in self.given or set(re.findall(r"\d{3,}", code.group(0))) & self.digits:
            return False
        around = sentence[max(0, code.start() - 4):code.end() + 4]
        if self.kinds and not any(kind in around for kind in self.kinds):
            return False
        owners = {n for n in self.names if n in sentence[:code.start()]}
        return not (self.named and owners and not owners & self.named)


_CODED_KINDS = ("小种", "品系")  # what a code names, where the question asks of one: a rust race, a cultivar's line


def unanchored_code(question: str, hits: Sequence[Hit], tokenizer: Tokenizer, stats: TermStats) -> str:
    """"具体编号" when the question asks a designation and no sentence of the evidence states one (other than those
    the question gives) beside at least MIN_AMOUNT_SUPPORT of the question's words that the evidence uses; ""
    otherwise (the amount's test)."""
    ask = _ASKED_CODE.search(question) or _ASKED_LINE_NAME.search(question)
    return _unheld("具体编号", ask, _CodesBesides(question, tokenizer), question, hits, tokenizer, stats)


# How long a thing lives or lasts (成虫能活好多天, 滴灌管用得了几年): a lifespan, which the evidence must state as one
# (寿命, 存活, 可用 with a number) beside what it is asked of; a beetle's months of emergence or a drip line's flow
# state none.
_ASKED_LIFESPAN = re.compile(r"能活|活(?:多久|好久|几天|好多天|多少天|几年|好多年|多少年)|寿命|用得了(?:几|好多|多少)年"
                             r"|能用(?:几|好多|多少)年|管(?:几|好多|多少)年"
                             r"|用(?:好久|多久)(?:就|才)?(?:要)?换|用得了好久")
_LIFESPAN = re.compile(r"(?:寿命|存活|可活|能活|可用|能用|使用年限|使用寿命|更换)[^。；;]{0,10}?\d")  # 寿命短，2–4 年后


def unanchored_lifespan(question: str, hits: Sequence[Hit], tokenizer: Tokenizer, stats: TermStats) -> str:
    """"具体寿命" when the question asks how long a thing lives or lasts and no sentence of the evidence states a
    lifespan beside at least MIN_AMOUNT_SUPPORT of the question's words that the evidence uses; "" otherwise."""
    return _unheld("具体寿命", _ASKED_LIFESPAN.search(question), _LIFESPAN, question, hits, tokenizer, stats)


# "哪几个县已经发现了": which counties, prefectures or townships, which the evidence must name beside what the question
# asks it of; not 哪些地方 (which spots: 低洼地、风口), a kind of place the manual describes.
_ASKED_PLACE = re.compile(r"哪(?:几|一)?个(?:县|州|市|乡|镇|地州)|哪些(?:县|州|市|乡|镇|地州)")
# a place by its suffix (孟连县, 德宏州); not 主产州, 同一个县, 上市, 市场, 县级
_PLACE_SUFFIX = re.compile(r"[\u4e00-\u9fff]{2,4}(?<![产个各全本该外邻每上])(?:县|州|市|乡|镇)"
                           r"(?![\u4e00-\u9fff]{0,1}(?:级|场|民|面|政))")
_BELOW_PREFECTURE = re.compile(r"县|乡|镇")


class _PlacesNamed:
    """A sentence names places: one with an administrative suffix (孟连县), or two places jieba tags (普洱、临沧),
    other than the asker's own and the province every passage is about (one tag alone may be a mistake: 亚科)."""

    def __init__(self, question: str, tokenizer: Tokenizer, stats: TermStats, ask: re.Match | None = None):
        self.question, self.tokenizer, self.stats = question, tokenizer, stats
        # a county inside a place the question names (普洱下面哪个县): only a county's own name answers; the places a
        # passage lists beside that place (普洱、临沧、保山) are its peers
        named = {w for w, flag in tokenizer.tagged(question) if flag == "ns" and stats.share(w) <= ANCHOR_SHARE}
        self.inside = bool(ask and _BELOW_PREFECTURE.search(ask.group(0)) and named)

    def search(self, sentence: str) -> bool:
        if any(m.group(0) not in self.question for m in _PLACE_SUFFIX.finditer(sentence)):
            return True
        if self.inside:
            return False
        places = {w for w, flag in self.tokenizer.tagged(sentence) if flag == "ns" and len(w) >= 2
                  and w not in self.question and self.stats.share(w) <= ANCHOR_SHARE}
        return len(places) >= 2


def unanchored_place(question: str, hits: Sequence[Hit], tokenizer: Tokenizer, stats: TermStats) -> str:
    """"具体地名" when the question asks which administrative places and no sentence of the evidence names them
    beside at least MIN_AMOUNT_SUPPORT of the question's words that the evidence uses; "" otherwise."""
    ask = _ASKED_PLACE.search(question)
    return _unheld("具体地名", ask, _PlacesNamed(question, tokenizer, stats, ask), question, hits, tokenizer, stats)


# Which country (哪个国家育成的, 传教士是哪国人): a sentence naming a country beside what is asked of. 外国 (a foreign
# country) names none.
_ASKED_COUNTRY = re.compile(r"哪(?:一|个)?国(?:家|人)?")
_COUNTRY = re.compile(r"(?![外各全本该他两])[\u4e00-\u9fff]国(?![内家际产标营企]|[\u4e00-\u9fff]?标准)|我国|中国"
                      r"|埃塞俄比亚|也门|巴西|哥伦比亚|越南|印度|印尼|萨尔瓦多|危地马拉|哥斯达黎加|洪都拉斯|尼加拉瓜|巴拿马"
                      r"|肯尼亚|坦桑尼亚|卢旺达|牙买加|秘鲁|墨西哥|葡萄牙|老挝|缅甸|泰国")


def unanchored_country(question: str, hits: Sequence[Hit], tokenizer: Tokenizer, stats: TermStats) -> str:
    """"具体国家" when the question asks which country and no sentence of the evidence names one beside the question's
    words (帕卡马拉是哪个国家育成的: the KB gives its parents, not where; the missionary who brought coffee is only
    外国); "" otherwise."""
    return _unheld("具体国家", _ASKED_COUNTRY.search(question), _COUNTRY, question, hits, tokenizer, stats)


# "锰含量好多算正常", "铜、锰正常该是好多": a nutrient's content, which the evidence must state for that element (锌约
# 10–30 mg/kg); not the element inside a compound (代森锰锌, 硫酸铜 1 公斤, 氢氧化铜 77%). The element is itself what
# the figure is of: no other word need stand beside it.
_ELEMENT = "[氮磷钾钙镁硫铁锰锌铜硼钼]"
_IN_COMPOUND = r"(?<![酸化亚氯氧代森·])"
_ASKED_ELEMENT = re.compile(_IN_COMPOUND + "(" + _ELEMENT + r")(?![肥料素])(?=[^，,。？?]{0,10}?(?:好多|多少|几))")
_CONTENT_CONTEXT = re.compile(r"含量|正常|范围|偏低|偏高|化验|检测|测出|标准")
_ELEMENT_STATED = {element: re.compile(_IN_COMPOUND + element + r"\s*(?:[A-Z][a-z]?\s*)?(?:[（(][^）)]{0,8}[）)])?\s*(?:含量)?"
                                       r"(?:约|为|在|低于|高于|不低于)?\s*\d") for element in _ELEMENT[1:-1]}


def unstated_element(question: str, hits: Sequence[Hit]) -> str:
    """"锰的含量" (the element named) when the question asks the content of a nutrient element (in a question about a
    test, a content or a normal range) and the evidence states no figure for one of the elements asked; "" otherwise."""
    if not hits or not _CONTENT_CONTEXT.search(question):
        return ""
    evidence = "".join(h.chunk.text for h in hits)
    for element in dict.fromkeys(m.group(1) for m in _ASKED_ELEMENT.finditer(question)):
        if not _ELEMENT_STATED[element].search(evidence):
            return f"{element}的含量"
    return ""


_YEAR_ASKED, _YEAR = next((asks, by) for name, asks, by in ASKED_FACTS if name == "年份")


def unanchored_year(question: str, hits: Sequence[Hit], tokenizer: Tokenizer, stats: TermStats, top: int = 3) -> str:
    """"具体年份" when the question asks in which year (咖啡锈病是哪一年传到云南来的) and no sentence of the best evidence
    states a year beside MIN_AMOUNT_SUPPORT of the question's anchors, as for an amount (`missing_fact` asks only that
    some year be stated: 2020年前后 of the province's planted area is not the year rust came); "" otherwise. Over every
    gold set's 27 questions asking a year, this refuses 2 more out of scope (the same question, in two sets) and none
    of the 6 answerable, whose anchors' least support is 0.65 (潞江坝那一带是哪个年代开始成规模种咖啡的)."""
    return _unheld("具体年份", _YEAR_ASKED.search(asked_part(question)), _YEAR, question, hits[:top], tokenizer, stats)


# A rate is a share of a whole (成活率, 病叶率, 含水率, 出米率): not a speed, a frequency or an efficiency.
_RATE = re.compile(r"[\u4e00-\u9fff]{2}(?<![频效功速])率")


def unstated_rate(question: str, hits: Sequence[Hit], top: int = 3) -> str:
    """"成活率的具体数字" when the question asks a rate's share (成活率一般有几成, 百分之几) and no sentence of the best
    evidence names that rate with a figure in per cent or tenths; "" otherwise. The rate is itself what the figure is
    of, as an element is its content's: the KB's 天气不好成活率会降低 beside 嫁接后第 2 年 states no 成活率. Over every
    gold set's 44 questions asking a rate's share, this refuses 6 more of the 30 out of scope and none of the 14
    answerable (病叶率到好多要打药, 含水率好多才算干, 保存率要达到好多)."""
    ratio = [question.find(ask) for ask, kind in asked_amounts(question) if kind == "ratio"]
    if not hits or not ratio:
        return ""
    rate = next((m.group() for m in reversed(list(_RATE.finditer(question))) if m.start() < max(ratio)), "")
    if not rate:
        return ""
    return "" if _named_with(hits[:top], [rate[-2:]], [_FIGURES["ratio"]]) else f"{rate}的具体数字"


def _named_with(hits: Sequence[Hit], forms: Sequence[str], figures: Sequence[_Figure]) -> bool:
    """Whether a sentence of the passages names one of `forms` (a rate, a period) with a figure of one of `figures`:
    what is measured is itself what the figure is of, so no other word need stand beside it."""
    return any(any(f in h.chunk.text[a:b] for f in forms) and any(fig.search(h.chunk.text[a:b]) for fig in figures)
               for h in hits for a, b in sentence_spans(h.chunk.text))


_PAPERWORK_ASKED = next(asks for name, asks, _ in ASKED_FACTS if name == "办理手续")


def unanchored_paperwork(question: str, hits: Sequence[Hit], tokenizer: Tokenizer, stats: TermStats, top: int = 3) -> str:
    """"办理手续" when the question asks what paperwork a thing needs (出口到国外卖 报关要办些啥子手续) and no sentence of
    the best evidence names that paperwork beside MIN_AMOUNT_SUPPORT of the question's anchors, as for an amount
    (`missing_fact` asks only that the word be there: the nursery regulation's 跨县调运苗木应按规定办理植物检疫手续 is the
    seedlings' paperwork, not an exporter's); "" otherwise. Over every gold question asking paperwork (140), this
    refuses 1 more out of scope (round 38's o37-043) and none of the 8 answerable, all of moving seedlings between
    counties: 6 answered, whose anchors the regulation's sentence holds all of, and 2 refused before it (从普洱拉…到保山,
    places the sentence does not name)."""
    ask = _PAPERWORK_ASKED.search(asked_part(question))
    if ask is None:
        return ""
    return _unheld("办理手续", ask, re.compile(re.escape(_asked_word(ask.group(0)))), question, hits[:top], tokenizer, stats)


# A period named for what happens in it (安全间隔期, 潜育期, 转换期), its length asked just after its name
_SPANS = ("days", "time", "minutes", "hours")
_PERIOD_TO_ASK = re.compile(r"[^，,。？?！!；;\s]{0,6}")  # 安全间隔期 | 到底是 | 几天: within the clause


def unstated_period(question: str, hits: Sequence[Hit], tokenizer: Tokenizer, top: int = 3) -> str:
    """"安全间隔期的具体时长" when the question asks how long a named period lasts (这个药的安全间隔期到底是几天, 锈病潜伏期
    好久) and no sentence of the best evidence names that period (itself or the synonym table's word for it: 潜伏期,
    潜育期) with a figure of the span asked; "" otherwise. The period is itself what the length is of, as a rate is
    its share's: 采收期喷药必须遵守安全间隔期 beside 每 7–10 天一轮 (the picking round) states none. Every gold set
    has 16 questions asking a named period's length: of the 15 out of scope, 14 were refused already and this refuses
    the last (round 38's o37-001); the one answerable (锈病潜伏期好久) is answered by the KB's 潜育期 with 3–5 周."""
    asks = [(m.start(), kind) for ask, kind in asked_amounts(question) if kind in _SPANS
            for m in re.finditer(re.escape(ask), question)]
    if not hits or not asks:
        return ""
    named = [word for word in dict.fromkeys(tokenizer.words(question)) if len(word) >= 3 and word.endswith("期")
             and any(_PERIOD_TO_ASK.fullmatch(question[m.end():start]) for m in re.finditer(re.escape(word), question)
                     for start, _ in asks if start >= m.end())]
    if not named:
        return ""
    period = max(named, key=len)  # 安全间隔期, not jieba's 间隔期 inside it
    forms = [period] + [t for k, terms in tokenizer.synonyms.items() if k in period for t in terms if t.endswith("期")]
    return "" if _named_with(hits[:top], forms, [_FIGURES[kind] for _, kind in asks]) else f"{period}的具体时长"


def _support(question: str, hits: Sequence[Hit], tokenizer: Tokenizer, stats: TermStats, asked: Sequence[str],
             figures: Sequence[_Figure], subject: re.Pattern | None = None) -> float:
    """For each figure asked, the largest IDF-weighted share of the question's anchors (those the evidence uses) that
    a sentence matching it has beside it; the smallest of these (every figure asked must be stated), or 1.0 when the
    evidence uses none of the anchors (nothing to hold a figure to). A word of the asking clause must stand in the
    sentence, its neighbours or its heading; a word of another clause describes what the question is about (树干上鼓
    起一圈圈…的那种天牛，成虫哪几个月出来) and may stand anywhere in the sentence's paragraph too (an FAQ answer's with
    its question), which it identifies. A name the asking clause gives must itself stand beside the figure:
    Catimor's yield does not state Geisha's (瑰夏…一亩能收好多斤), nor coffee's −2 °C what 澳洲坚果 withstands. Each
    anchor `subject` matches (a pest: what a chemical is asked for) must stand in the figure's own sentence or
    paragraph."""
    every = _anchors(question, tokenizer, stats, asked)
    anchors = _held(every, hits)
    subjects = [forms for word, forms, _ in anchors if subject is not None and subject.search(word)]
    clauses = _clauses(question)
    own = {ask: next((c for c in clauses if ask in c), question) for ask in asked}  # each ask's own clause
    # what the asking clause names (瑰夏, 澳洲坚果: a proper name of the lexicon or a crop grown beside coffee) is what
    # the figure is of: it must stand beside it, not only somewhere in the passage. Not a thing the KB may call
    # otherwise (红果: 鲜果), nor a place, mostly where the grower lives (我们普洱这边一亩种好多棵)
    # A place the question asks of (潞江坝那边一年平均气温好多度) is named too, where it is not the grower's own (_home)
    # and is asked of as "there" (那边, 那一带): the figure must be the place's, not the province's range beside it.
    home = _home(question, tokenizer)
    there = {w for w, f in tokenizer.tagged(question) if f == "ns" and w not in home and stats.known(w)
             and stats.share(w) <= ANCHOR_SHARE and re.search(re.escape(w) + r"[^，,。？?]{0,4}?(?:那边|那一带|那里|那点|那儿|那头)", question)}

    def names(text: str) -> list[str]:
        return [term for term in tokenizer.entities(text) if stats.share(term) <= ANCHOR_SHARE
                and (term in tokenizer.names or _CROP.search(term) and stats.share(term) <= CROP_SHARE)] + [
                    w for w in there if w in text]

    named = {ask: names(clause) for ask, clause in own.items()}
    # a name stands beside the figure in any of the KB's words for it (遮荫树: the KB writes 荫蔽树)
    spelled = {word: forms for word, forms, _ in every}

    def stands_in(term: str, text: str) -> bool:
        return any(f in text for f in spelled.get(term, [term]))

    # a name another clause of the ask's sentence gives (戊唑醇打了以后，要隔几天才能摘) says what the figure is of
    # too: it must stand in the figure's paragraph (not one an earlier sentence gives: 试种瑰夏，整好多面积？要看几年？;
    # nor what the grower plants or grafts: 嫁接萨奇姆，几月份接好, `_handled`)
    sentences = [question[a:b] for a, b in sentence_spans(question, ends="。！？!?")]
    named_elsewhere = {ask: [t for t in names(next((s for s in sentences if clause in s), question))
                             if t not in clause and t not in named[ask] and not _handled(t, question)]
                       for ask, clause in own.items()}
    chemicals = [t for t in names(question) if _CHEMISTRY.search(t)]
    if not anchors:  # nothing to hold a figure to, unless what it is asked of is named and absent (in the asking
        # clause or another of its sentence: 保山那边…，咖啡一般好久开始采), or the evidence states no figure of a kind
        # asked at all (灭字虎天牛…下好多颗卵, a name the KB spells otherwise: no count of eggs)
        return 0.0 if any(named.values()) or any(named_elsewhere.values()) or not all(
            any(figure.search(_with_column_units(h.chunk.text)) for h in hits) for figure in figures) else 1.0
    total = sum(weight for _, _, weight in anchors)
    windows = []  # (a sentence, it with its neighbours and heading, its paragraph and heading)
    named_anywhere = names(question)
    for h in hits:
        text = _with_column_units(h.chunk.text)
        spans = sentence_spans(text)
        sentences = [text[a:b] for a, b in spans]
        paragraphs = _paragraphs(text)
        # a heading that names what the question names (咖啡炭疽病的防治方法) makes the passage's lines one account of it:
        # 黑果 two list items up identifies the spraying line's 间隔 10–15 天 as well as its own paragraph would
        about = any(term in h.chunk.section for term in named_anywhere)
        windows += [(s, h.chunk.section + "".join(sentences[max(0, i - 1):i + 2]),
                     h.chunk.section + (text if about else
                                        next((p for start, p in reversed(paragraphs) if start <= spans[i][0]), "")))
                    for i, s in enumerate(sentences)]
    if any(_declined(ask, figure, own[ask], anchors, [s for s, _, _ in windows]) for ask, figure in zip(asked, figures)):
        return 0.0

    def share(ask: str, sentence: str, around: str, paragraph: str, figure: _Figure) -> float:
        if named[ask] and not any(stands_in(term, around) for term in named[ask]):
            return 0.0
        if not all(any(f in sentence or f in paragraph for f in forms) for forms in subjects):
            return 0.0
        # a chemical asked (咪鲜胺兑好多倍): a figure stated with another chemical and not it is the other's dose, and
        # so is one that follows another chemical named after it (噻嗪酮 1000–1500 倍液，或螺虫乙酯等…按标签浓度使用)
        if chemicals and _REMEDY.search(sentence) and not any(
                _doses(sentence, c, figure, tokenizer) if figure in _DOSES else c in sentence for c in chemicals):
            return 0.0
        if named_elsewhere[ask] and not all(stands_in(term, around) for term in named_elsewhere[ask]) and (
                # each in the paragraph at least, and there not beside a figure of another name (卡蒂姆以 CIFC 7963 等
                # 品系为主 gives Catimor's line, not Sarchimor's); a chemical named there is what is sprayed, no other
                # subject (a named chemical's own dose is the test above)
                not all(stands_in(term, paragraph) for term in named_elsewhere[ask])
                or any(term not in question for term in names(sentence)
                       if term in tokenizer.names and not _REMEDY.search(term))):
            return 0.0
        return sum(w for word, forms, w in anchors
                   if any(f in around or word not in own[ask] and f in paragraph for f in forms)) / total

    return min(max((share(ask, sentence, around, paragraph, figure) for sentence, around, paragraph in windows
                    if figure.search(sentence)), default=0.0) for ask, figure in zip(asked, figures))


# What the grower plants, grafts or buys (嫁接萨奇姆，几月份接好; 准备栽四百来棵卡蒂姆苗，预备苗要多准备好多棵): the
# work's figure is the work's, whatever variety it is done with
_HANDLED = re.compile(r"(?:栽|种|试种|嫁接|接|换|改种|引|引种|买|育)\s*(?:[\d一二两三四五六七八九十百千万几来多点些]+\s*[棵株亩]?\s*)?$")


def _handled(name: str, question: str) -> bool:
    """Whether `name` (no chemical: a dose is its own) is what the question's action is done with (栽…卡蒂姆苗)."""
    return not _CHEMISTRY.search(name) and any(_HANDLED.search(question[:m.start()])
                                               for m in re.finditer(re.escape(name), question))


# The knowledge base says it gives no such figure: 黄蜜、红蜜、黑蜜等，本文件不作统一规定; 螺虫乙酯…按标签浓度使用; 控释肥料…按产品说明使用
_DECLINES = re.compile(r"不作统一规定|不作规定|不做统一规定|没有统一的?(?:标准|规定)|无统一标准|按(?:产品)?(?:标签|说明书?)")


def _declined(ask: str, figure: _Figure, clause: str, anchors: Sequence[tuple[str, list[str], float]],
              sentences: Sequence[str]) -> bool:
    """Whether the evidence declines the figure asked: every sentence holding the rarest word of the asking clause
    (of the question, when that clause has none), or the rarest word of the question, says the KB gives none
    (不作统一规定, 按标签) and states no figure of the kind itself. Its neighbours' figures are then about something else (7.1's and 7.3's, beside 7.2's 红蜜、黑蜜…
    不作统一规定)."""
    ranked = sorted(anchors, key=lambda a: -a[2])
    own = [(w, forms) for w, forms, _ in ranked if w in clause] or [(w, forms) for w, forms, _ in ranked]  # 有没得个比例
    if not own:
        return False
    # the asking clause's rarest word, and the question's (红蜜、黑蜜，脱皮的时候要留百分之好多的果胶: what it is of)
    for forms in {own[0][0]: own[0][1], ranked[0][0]: ranked[0][1]}.values():
        holding = [s for s in sentences if any(f in s for f in forms)]
        if holding and all(_DECLINES.search(s) and not figure.search(s) for s in holding):
            return True
    return False


_JUST_BEFORE = re.compile(r"[^，,；;、。或和与及]{0,4}")  # 99% 矿物油; not 1000 倍液，或螺虫乙酯
_DOSES = {_FIGURES[kind] for kind in ("ratio", "mass", "volume")}  # how much of a chemical; not how often, nor when


def _doses(sentence: str, chemical: str, figure: re.Pattern, tokenizer: Tokenizer) -> bool:
    """Whether a figure of the sentence is the chemical's: the first one after it, with no other chemical named in
    between (25% 噻嗪酮可湿性粉剂 1000–1500 倍液), or one just before it (99% 矿物油)."""
    at = sentence.find(chemical)
    if at < 0:
        return False
    others = [t for t in tokenizer.entities(sentence) if t != chemical and chemical not in t and _CHEMISTRY.search(t)]
    for m in figure.finditer(sentence):
        between = sentence[at + len(chemical):m.start()] if m.start() >= at else sentence[m.end():at]
        if (m.start() >= at or _JUST_BEFORE.fullmatch(between)) and not any(o in between for o in others):
            return True
    return False


# How much of a chemical, in no unit (草甘膦一桶水兑好多, 波尔多液配多少): a dose of it must stand in the evidence.
_DOSE_ASKED = re.compile(r"(?:兑|配|对水|放|用|加)\s*(?:成|到|得)?\s*(?:好多|多少|几)(?![天年次回遍月号点时])"
                         r"|(?:好|多|啥子?|什么|哪样)\s*(?:浓度|浓|稀)")  # 兑成好浓, 要多浓: a concentration asked
# a salt or acid mixed as a spray or drench (硫酸亚铁, 硼酸, 氯化钙): a chemical whose dose is asked, like the pesticides
_SALT = re.compile(r"硫酸|硝酸|磷酸|氯化|碳酸|氢氧化|硼砂|硼酸|高锰酸")
# a biological agent or an antibiotic the lexicon names (白僵菌, 苏云金杆菌, 春雷霉素): sprayed by the dose, as a pesticide is
_AGENT = re.compile(r"僵菌|杆菌|霉素|菌素$")


def unanchored_dose(question: str, hits: Sequence[Hit], tokenizer: Tokenizer, stats: TermStats, top: int = 3) -> str:
    """"<chemical>的用量" when the question asks how much of a chemical it names to mix (兑好多, 配多少) and no sentence
    of the best evidence states a dose of it (a ratio, mass or volume that is its own: `_doses`); "" otherwise. The
    knowledge base names 草甘膦 only to warn where it harms coffee: no dose of it is an answer's. A chemical counts
    when the sentence that asks the dose names it: 滴灌管头能不能加过磷酸钙？肥水最浓兑好多？ asks whether, then the
    fertiliser water's strength, no dose of 过磷酸钙."""
    asking = "".join(question[a:b] for a, b in sentence_spans(question, ends="。！？!?")
                     if _DOSE_ASKED.search(question[a:b]))
    if not asking:
        return ""
    chemicals = [t for t in tokenizer.entities(asking) if (_CHEMISTRY.search(t) or _SALT.search(t) or _AGENT.search(t)
                                                            and t in tokenizer.names) and stats.known(t)]
    sentences = [h.chunk.text[a:b] for h in hits[:top] for a, b in sentence_spans(h.chunk.text)]
    for chemical in chemicals:
        if not any(_doses(sentence, chemical, figure, tokenizer) for sentence in sentences for figure in _DOSES):
            return f"{chemical}的用量"
    return ""


_TABLE_ROW = re.compile(r"^\|(.*)\|\s*$", re.M)
_PARENTHESES = re.compile(r"[（(]\s*([^）)]{1,8}?)\s*[）)]")
_UNIT_WORD = re.compile(r"[A-Za-z%‰°℃]|株|棵|丛|亩|次|天|年|月|粒|倍|克|斤|升|米")
_CELL_FIGURE = re.compile(r"^(?:约|≤|≥|<|>|＜|＞)?\s*\d[\d.]*(?:\s*[～~–\-—至到]\s*\d[\d.]*)?$")


def _with_column_units(text: str) -> str:
    """A passage whose Markdown tables state each bare figure with its column's unit, as prose would: the row
    "| 卡蒂姆…矮秆紧凑型 | 单干 | 1.8 | 1.0 | 370 |" under "行距（m）… 每亩株数（约）" reads "… 1.8 m … 370 株", a
    figure of the asked kind beside its row's name. Other text is unchanged."""
    rows = list(_TABLE_ROW.finditer(text))
    if not rows:
        return text
    out, header, last = [], None, 0
    for m in rows:
        cells = [c.strip() for c in m.group(1).split("|")]
        if m.start() > last + 1 and text[last:m.start()].strip():  # prose between two tables: a new table
            header = None
        out.append(text[last:m.start()])
        last = m.end()
        if TABLE_RULE.match(m.group(0)):
            out.append(m.group(0))
            continue
        if header is None or len(cells) != len(header):
            # a table's first row names its columns; a passage that opens inside a table has its rows of figures
            # first, whose columns are not known
            header = None if any(_CELL_FIGURE.match(c) for c in cells) else cells
            out.append(m.group(0))
            continue
        units = [_column_unit(name) for name in header]
        out.append("| " + " | ".join(f"{c} {u}" if u and _CELL_FIGURE.match(c) else c for c, u in zip(cells, units)) + " |")
    out.append(text[last:])
    return "".join(out)


def _column_unit(name: str) -> str:
    """The unit of a table column: in its parentheses (行距（m）, 纯氮 N（g/株）), else the last unit word of its name
    (每亩株数（约） counts 株)."""
    paren = _PARENTHESES.search(name)
    if paren and _UNIT_WORD.search(paren.group(1)):
        return paren.group(1)
    words = _UNIT_WORD.findall(_PARENTHESES.sub("", name))
    return words[-1] if words else ""


def _paragraphs(text: str) -> list[tuple[int, str]]:
    """(start, paragraph) of a passage's lines; an answer line (答：) is read with the question line (问：) above it."""
    out: list[tuple[int, str]] = []
    start = 0
    for line in text.split("\n"):
        if out and re.match(r"\s*答\s*[:：]", line):
            out[-1] = (out[-1][0], out[-1][1] + "\n" + line)
        else:
            out.append((start, line))
        start += len(line) + 1
    return out


def _clauses(question: str) -> list[str]:
    return [c for c in _CLAUSE_SPLIT.split(question) if c]


_MODAL_VERB = re.compile(r"[要会能该想可][\u4e00-\u9fff]")  # 要除 (一年要除几回草): jieba's cut of a modal and a verb
# (and a particle's: 洗干净了要阴干 cuts 了要)


# people a grower speaks of: who, never what the question is about (我媳妇怀起了, 我亲戚在保山)
_KIN = (r"亲戚|朋友|老表|老乡|邻居|兄弟|哥哥|姐姐|弟弟|妹妹|表哥|表姐|舅舅|叔叔|娘家|老丈人|媳妇|老婆|老公|丈夫|婆娘"
        r"|娃娃|娃儿|孩子|儿子|女儿|老人|老妈|老爹|爹妈|父母|婆婆|公公|岳父|岳母")
_I = r"(?:我|我们|我家|咱|咱们|俺)"
_WHERE_I_AM = re.compile(r"^\s*" + _I + r"的?(?:" + _KIN + r")?(?:家|这边|那边|这里|那里)?(?:在|住在|是)")
# a place and then the grower's own land in it (潞江坝我那块地海拔七百多米, 保山我家那片): where they are, as above
_MINE_IN = re.compile(r"^\s*[\u4e00-\u9fff]{2,6}?(?:这边|那边|这里|那里)?" + _I + r"家?(?:的|那|这)")
_PERSON = re.compile(f"(?:{_KIN})家?")  # a relative, or a relative's home (舅舅家: where, not what is asked)
_PLACE_WORD = re.compile(r"[州市县乡镇村坝山河江]$")
_THERE = re.compile(r"那边|那里|这边|这里|当地|那点|这点|那儿|这儿|那头|这头|那一带|这一带")


def _home(question: str, tokenizer: Tokenizer) -> set[str]:
    """Where the grower says they are (我在保山潞江坝，…): their place, not what a figure is of (我在潞江坝，那边一年平均
    气温好多度？ asks of the place itself: 那边 points back to it, and it is no home)."""
    clauses = _clauses(question)
    mine = [c for c in clauses if _WHERE_I_AM.match(c) or _MINE_IN.match(c)]
    home = {w for clause in mine
            for w, f in tokenizer.tagged(clause) if f == "ns" or w in tokenizer.entities(clause) and _PLACE_WORD.search(w)}
    if any(_THERE.search(c) or any(w in c for w in home) for c in clauses if c not in mine):
        return set()
    return home


def _anchors(question: str, tokenizer: Tokenizer, stats: TermStats,
             asked: Sequence[str], everyday: bool = False) -> list[tuple[str, list[str], float]]:
    """The question's topical words a figure would be stated beside, each with the KB words standing for it (itself,
    and the synonym table's words for a growers' word) and its IDF in the knowledge base. Not a verb of everyday
    Chinese (放在, 出来, 起来: rare in the KB's written style, so of a high IDF, and no figure is of them) unless
    `everyday`: what the question names in a run of words (价值评估体系) keeps them."""
    keys = [k for k in tokenizer.synonyms if k in question]
    home = _home(question, tokenizer)
    out = {}
    # the words that announce another question (还有个事, 对了) say nothing of what a figure is of
    body = question.strip()[len(new_topic_opening(question)):]
    for word, flag in tokenizer.tagged(body):
        # a unit (一个钟头出好多升) gives the figure's scale, and an everyday verb (放在) no thing: neither is what it is of
        if len(word) < 2 or word.isascii() or flag not in _ANCHOR_POS or word in tokenizer.stopwords \
                or any(word in a for a in asked) or _MODAL_VERB.fullmatch(word) or word[0] in "了的" or word in home \
                or word in _UNIT_KIND \
                or not everyday and flag == "v" and tokenizer.general_frequency(word) >= EVERYDAY_VERB_FREQ:
            continue
        mapped = [t for k in keys if word in k or k in word for t in tokenizer.synonyms[k] if stats.known(t)]
        forms = ([word] if stats.known(word) else []) + mapped
        if not forms:
            continue
        share = stats.share(word) or max(stats.share(t) for t in mapped)
        if share <= ANCHOR_SHARE:
            out[word] = (word, forms, math.log(1 / share))
    return list(out.values())


def _held_anchors(question: str, hits: Sequence[Hit], tokenizer: Tokenizer, stats: TermStats,
                  asked: Sequence[str]) -> list[tuple[str, list[str], float]]:
    """The question's anchors (`_anchors`) that the evidence, its headings included, uses."""
    return _held(_anchors(question, tokenizer, stats, asked), hits)


def _held(anchors: Sequence[tuple[str, list[str], float]], hits: Sequence[Hit]) -> list[tuple[str, list[str], float]]:
    """The anchors that the evidence, its headings included, uses."""
    evidence = "".join(h.chunk.section + h.chunk.text for h in hits)
    return [(word, forms, weight) for word, forms, weight in anchors if any(f in evidence for f in forms)]


def _has_number_in(units: str, evidence: str) -> bool:
    """Whether the evidence states a number in one of `units` (a regex alternation)."""
    return bool(re.search(r"\d\s*(?:万|千|百)?\s*(?:" + units + ")", evidence))


def _asked_word(match: str) -> str:
    """The word a paperwork ask names (认证, 许可证), without the verb."""
    return match[1:] if match.startswith("办") else match  # 办植物检疫证 asks for a 植物检疫证(明)


@dataclass(frozen=True)
class Coverage:
    covered: bool
    score: float
    missing: str = ""  # the topic the knowledge base does not know, when that is the reason


# the words a question asks with (好久, 啥时候): how it asks, not what about; no passage uses most of them. The stopwords
# (tokenizer.words) already drop the others (什么, 多少, 哪样, 咋个, 怎么 …)
_ASK_WORD = re.compile(r"^(?:好久|好多|多久|多长|啥时候|什么时候|几时|哪点|为什么)$")


def content_words(question: str, tokenizer: Tokenizer) -> list[str]:
    words = [w for w in tokenizer.words(question) if len(w) >= 2 and not w.isascii()]
    # search-mode segmentation yields a long word and its parts: keep the longest, drop the parts inside it
    return [w for w in dict.fromkeys(words) if not any(w != o and w in o for o in words) and not _ASK_WORD.match(w)]


def coverage_score(question: str, hits: Sequence[Hit], tokenizer: Tokenizer, top: int = 3) -> float:
    """The weighted share of the question's content words found in the top evidence; a growers' word counts as
    found when the knowledge base's word for it (the synonym table's) is there ("黄粉" → "锈病")."""
    words = content_words(question, tokenizer)
    if not words:
        return 1.0
    evidence = "".join(h.chunk.section + h.chunk.text for h in hits[:top])
    keys = [k for k in tokenizer.synonyms if k in question]

    def found(word: str) -> bool:
        if word in evidence:
            return True
        return any(t in evidence for k in keys if word in k or k in word for t in tokenizer.synonyms[k])

    total = sum(min(len(w), 4) for w in words)
    return sum(min(len(w), 4) for w in words if found(w)) / total


def unknown_topic(question: str, corpus_text: str, synonyms: Mapping[str, Sequence[str]] = {},
                  tokenizer: Tokenizer | None = None) -> str:
    """A topic of the question that the corpus never mentions ("" when there is none). Money or paperwork in what
    the grower was told (村里头说有补贴修水池，要修好大的池子才够？) is what led to the question, not its topic, when a
    clause after it asks of something the corpus has."""
    for m in _SCOPE.finditer(question):
        if m.group(0) not in corpus_text and not _told_before_an_ask(question, m.start(), corpus_text, tokenizer):
            return m.group(0)
    keys = [k for k in synonyms if k in question]
    # where each word of the question starts, and how long it is: a head that opens a longer word (病虫害, 病斑)
    # ends no name (时候病虫害 has no 候病, 看得到病斑 no 到病)
    opening, at = {}, 0
    word_from, noun_char = {}, set()  # where each word of two characters or more ends: its start; lone noun characters
    ending = {}  # where each word ends: the word and its tag
    for word, flag in tokenizer.tagged(question) if tokenizer is not None else ():
        opening[at] = len(word)
        ending[at + len(word)] = (word, flag)
        if len(word) >= 2:
            word_from[at + len(word)] = at
        elif flag in ("ng", "n", "nz", "g") and word not in _NOT_A_NAME:
            noun_char.add(at)
        at += len(word)
    for m in _NAMED.finditer(question):
        # the shortest name, one character before the head ("红蜘蛛", "沼液"); unknown when even that is absent, and
        # when it is no growers' name the synonym table maps (黄粉病 is 锈病: 黄粉 ends at the head; 毛病 is a key)
        name, at = m.group(0), m.start(1)
        before = question[word_from.get(m.start(2), at):m.start(2)]
        if _grammar_before(ending.get(m.start(2)), tokenizer):
            # the character before the head ends a word of grammar (嫩梢上/蚜虫, 看得到/病): the head stands alone, a
            # name of its own (蚜虫) or the everyday word (病: the disease told of before)
            if len(m.group(2)) < 2:
                continue
            name, at = m.group(2), m.start(2)
        elif (len(m.group(2)) >= 2 and len(before) >= 2 and not _CROP.search(before)
                and tokenizer.general_frequency(before) >= MIN_WORD_FREQ):
            # the character before a name of its own ends a word of everyday Chinese (有点/蚜虫), not a crop (香蕉/线虫)
            # nor a modifier jieba made up (黑枝/小蠹)
            name, at = m.group(2), m.start(2)
        elif opening.get(at) == len(name) and at - 1 in noun_char and name not in tokenizer.lexicon_set:
            # a noun character jieba left alone before a fragment (藻/斑病), not before a name of the lexicon (地/锈病)
            name, at = question[at - 1:m.end()], at - 1
        if (question[at] not in _NOT_A_NAME and name not in corpus_text
                and opening.get(m.start(2), 0) <= len(m.group(2))
                and not any(name in k or question.find(k) + len(k) == m.start(2) for k in keys)):
            return name
    return ""


_GRAMMAR_POS = ("f", "p", "d", "u", "r", "c", "m", "q")  # locatives, prepositions, adverbs, particles, pronouns …


def _grammar_before(word: tuple[str, str] | None, tokenizer: Tokenizer) -> bool:
    """Whether a word jieba cut (its text and tag) is grammar, no part of a name after it: a function word, or an
    everyday verb of two characters or more (得到, not the rare 蔓枯 of 蔓枯病 nor the 杀 of 速杀灵)."""
    if word is None:
        return False
    text, flag = word
    return flag[:1] in _GRAMMAR_POS or (flag.startswith("v") and len(text) >= 2
                                        and tokenizer.general_frequency(text) >= EVERYDAY_VERB_FREQ)


_ASKING = re.compile(r"[？?]|吗|呢|咋|怎|如何|啥|什么|哪|多少|好多|几|有没|能不能|要不要|得不得|行不行|可不可以|要得不")
_REPORTED = re.compile(r"说|讲|听人|据说")  # 村里头说…, 听人讲…: what someone said


def _told_before_an_ask(question: str, at: int, corpus_text: str, tokenizer: Tokenizer | None) -> bool:
    """Whether the clause at `at` reports what someone said or tells what happened (a told sentence: `told_spans`),
    asking nothing, and a later clause asks in words of its own that the corpus has."""
    if tokenizer is None:
        return False
    before = _CLAUSE_START.search(question[:at]).group(0)  # the clause up to the word
    rest = _CLAUSE_REST.match(question, at)  # … and on to its end, with its mark
    later = question[rest.end():]
    return not _ASKING.search(before + rest.group(0)) and bool(
        _REPORTED.search(before) or _in(told_spans(question), at)) and bool(
        _ASKING.search(later)) and any(len(w) >= 2 and w in corpus_text and not _SCOPE.search(w)
                                       for w in tokenizer.content_words(later))


_CLAUSE_START = re.compile(r"[^，,。；;！!？?]*$")
_CLAUSE_REST = re.compile(r"[^，,。；;！!？?]*[，,。；;！!？?]?")
_SENTENCE = re.compile(r"[^。！!？?]+[。！!？?]*")
_PARTICLE = re.compile(r"吗|呢|么|嘛")


def told_spans(question: str) -> list[tuple[int, int]]:
    """Where the story before a question is told: each sentence closed by 。 or ！ without a question particle, when a
    later sentence asks (昨天自家几个人摘了两百多斤红果子…。这些果子还要得不？). A grower types 。 after what happened,
    not after what is asked, so an amount or a loan in such a sentence (底下就是几户人家。 去年贷款装了滴灌…。) is
    what led to the question, not what it asks. [] for a message of one sentence, or with nothing asked after."""
    sentences = [(m.start(), m.end(), m.group(0)) for m in _SENTENCE.finditer(question)]
    told = []
    for i, (start, end, text) in enumerate(sentences):
        if text.rstrip()[-1:] in "。！!" and not _PARTICLE.search(text) and any(
                _ASKING.search(later) for _, _, later in sentences[i + 1:]):
            told.append((start, end))
    return told


def _in(spans: Sequence[tuple[int, int]], at: int) -> bool:
    return any(start <= at < end for start, end in spans)


def asked_part(question: str) -> str:
    """The question without its told sentences (`told_spans`)."""
    spans = told_spans(question)
    return "".join(ch for at, ch in enumerate(question) if not _in(spans, at)) if spans else question


_TOPICAL_POS = ("n", "nr", "nrt", "nrfg", "ns", "nz", "nt", "vn", "j")  # nrt, nrfg: transliterated names (卡布奇诺)
# Growers' grammar, not a topic, wherever jieba cuts it: 遭 as the passive (遭虫, 遭灾: "by insects", "hit by a
# disaster"), the 子 of 树子/啥子 glued to the next word (子病), 啥 (what), the intensifier 得很, months (八九月份), and
# a verb done once (试一下, 看一哈).
_GRAMMAR = re.compile(r"^遭|^子|^啥|得很$|^[一二三四五六七八九十]+月份?$|一[下哈]$|^[县乡镇村街寨]上$")  # 县上: at the county
# what a question asks of its topic, no topic of its own: its signs (打霜有哪些征兆), what a term means (16目是哪样意思),
# the knack of it (有啥窍门)
_ASPECT = re.compile(r"征兆|迹象|苗头|预兆|兆头|意思|道理|讲究|门道|窍门|诀窍|说法|名堂")
# a doubled last character (虫虫, 筋筋, 青果果): a growers' diminutive of the word without it, no name (蝈蝈)
_DOUBLED = re.compile(r"(.)\1$")
# a word jieba cut out of a question word or demonstrative and what follows it (咋个数法 → 咋/个数/法: 个数 is no topic)
_QUESTION_WORD_TAIL = re.compile(r"[咋哪这那几啥][个样]")
MIN_WORD_FREQ = 10  # in jieba's general dictionary: a real word, not a fragment of a bad segmentation
UNKNOWN_FOCUS_STRENGTH = 2.0  # below this much known topic, an unknown word is what the question is about
# the amount of a word (marked \0) asked by a clause ending in a question mark, whose only question word it is: 一年
# 要有好多\0才够？ \0有好多？ (not 根上长了好多\0，是啥子病？: "many", in a clause that tells before the one that asks;
# nor \0要扣好多分？, which asks an amount of something else)
_CONTENT_OF = r"\s*(?:的\s*)?含量"  # a thing's content in something (咖啡因含量): an amount of it, asked or compared
_MEASURE_ASKED = re.compile(r"(?:好多|多少|几多)\s*(?:的\s*)?\0(?!" + _IN_CLAUSE + r"(?:什么|啥|哪|咋|怎|吗|不|没|么))"
                            + _IN_CLAUSE + r"[？?]|\0[^，,。？?！!；;]{0,3}?(?:好多|多少|几多)\s*[呢啊嘛]?\s*[？?]")


def unknown_words(question: str, tokenizer: Tokenizer, stats: TermStats) -> list[str]:
    """Topical words of the question (nouns, names, nominal verbs) that occur nowhere in the knowledge base and
    are not growers' words the synonym table maps onto it: 贷款, 茶叶, 星巴克, 吡虫啉 …; also a name jieba broke
    into single characters (啶/虫/脒, 沃/柑) when the joined characters read like a name and the KB lacks them."""
    tagged = tokenizer.tagged(question)
    out: list[str] = []
    unseen: list[str] = []  # one character the KB never holds (蛇, 猫): after the words, which say more
    at, before = 0, ""
    for word, flag in tagged:
        at += len(word)
        after_amount, before = before == "m" and word[0] in _UNIT_KIND, flag  # 好多/天才: the unit asked, glued to 才
        if len(word) == 2 and word[0] == "遭":  # the passive glued to what did it (遭蛇 of 遭蛇咬了): the doer
            doer, doer_flag = tokenizer.tagged(word[1])[0]
            if _unseen_character(doer, doer_flag, word[0], tokenizer, stats):
                unseen.append(doer)
                continue
        if len(word) < 2 and _unseen_character(word, flag, question[at - 2:at - 1], tokenizer, stats):
            unseen.append(word)
            continue
        if (len(word) < 2 and not _CHEMICAL_OR_PEST.search(word)) or word.isascii() \
                or not _topical(word, flag) \
                or word in tokenizer.stopwords or after_amount:
            continue
        if stats.known(word) or _GRAMMAR.search(word) or _ASPECT.fullmatch(word) or _PERSON.fullmatch(word) \
                or _QUESTION_WORD_TAIL.match(question[at - len(word) - 1:at]) \
                or flag in ("n", "nr") and _SAID_BY.match(question, at) \
                or _after_a_while(word, question[at - len(word) - 1:at - len(word)], stats) \
                or _diminutive(word, tokenizer, stats) or _verb_glued(word, flag, tokenizer, stats):
            continue
        freq = tokenizer.general_frequency(word)
        if freq < MIN_WORD_FREQ and not (len(word) >= 3 and freq) and not _looks_like_a_name(word, flag, freq > 0 or len(word) == 2):
            continue  # a fragment of a bad segmentation, not a word (dictionary words of 3+ characters are: 咖啡壶)
        if _mapped_by_synonyms(word, tokenizer) or _of_known_words(word, stats, tokenizer):
            continue
        out.append(word)
    for run in _noun_runs(tagged, tokenizer, stats):
        if run[-1] in _NAME_END and not stats.known(run) and not _mapped_by_synonyms(run, tokenizer):
            out.append(run)
    for run in _single_character_runs(tagged, stats):
        if _NAME_ENDING.search(run) and not stats.known(run) and not _mapped_by_synonyms(run, tokenizer) \
                and not _diminutive(run, tokenizer, stats) and not _of_known_words(run, stats, tokenizer):  # 青果/果: 青果果; 硫磺/盐
            out.append(run)
    return list(dict.fromkeys(out + unseen))


def _topical(word: str, flag: str) -> bool:
    """A word that can be what a question is about: a noun or name (_TOPICAL_POS), a machine jieba tags an idiom
    (无人机), or a crop it tags a numeral (三七)."""
    return flag in _TOPICAL_POS or flag == "l" and bool(_MACHINE.search(word)) or flag == "m" and bool(_CROP.search(word))


# who said it (老辈人讲…, 邻居说…, 收购的人讲): the one who tells the grower, not what is asked (not 说明, 说法)
_SAID_BY = re.compile(r"(?:人|们|家)?(?:讲|说)(?![明法])")
# a span of time after a demonstrative or 一 (那阵, 这会, 一阵): the measure word, not a word with what follows it
_WHILE = "阵会"


def _after_a_while(word: str, before: str, stats: TermStats) -> bool:
    """A measure word of time glued to the word after it (那阵虫多: 那阵 + 虫; 这会叶子黄了): jieba's cut, no name."""
    return len(word) >= 2 and word[0] in _WHILE and before in _MEASURED_BY and stats.known(word[1:])


def _unseen_character(word: str, flag: str, before: str, tokenizer: Tokenizer, stats: TermStats) -> bool:
    """A noun of one character that no passage holds anywhere, even inside a word (被蛇咬了, 猫屎咖啡, 奶要热到好多度):
    the knowledge base can say nothing of it. Everyday Chinese only (a dictionary word), and not counted after a
    question word, demonstrative or number, where it measures (哪阵 is when, 一阵 a while)."""
    return (flag == "n" and not stats.known(word) and tokenizer.general_frequency(word) >= MIN_WORD_FREQ
            and before not in _MEASURED_BY)


_MEASURED_BY = tuple("哪这那啥几一每两半")


def _of_known_words(word: str, stats: TermStats, tokenizer: Tokenizer) -> bool:
    """A compound of two words the knowledge base uses, each of two characters or more (防护林带: 防护 + 林带), or the
    tree or seedling of a plant it names (橡胶树 of 橡胶); or a KB word and a noun of one character the KB uses on its
    own, a list typed without its commas (石灰硫磺盐各放好多: 硫磺 + 盐; not 咖啡因, whose 因 is no noun): the KB's own
    things, put together as the grower says it."""
    return any(stats.known(word[:i]) and stats.known(word[i:]) for i in range(2, len(word) - 1)) or (
        len(word) >= 3 and word[-1] in "树苗" and stats.known(word[:-1])) or (
        len(word) >= 3 and stats.known(word[:-1]) and stats.known(word[-1])
        and tokenizer.tagged(word[-1]) == [(word[-1], "n")])


def _diminutive(word: str, tokenizer: Tokenizer, stats: TermStats) -> bool:
    """A word with its last character doubled (虫虫, 青果果) whose stem is a word of the KB or of general Chinese."""
    return bool(_DOUBLED.search(word)) and (stats.known(word[:-1])
                                            or tokenizer.general_frequency(word[:-1]) >= MIN_WORD_FREQ)


def _verb_glued(word: str, flag: str, tokenizer: Tokenizer, stats: TermStats) -> bool:
    """A place or person jieba's HMM made of characters and the verb after them (天热撒 of 天热撒碳铵: 天热 + 撒), no
    name; or a character glued before a word the KB uses, into a word rare in general Chinese (结坚果 of
    开始结坚果: 结 + 坚果)."""
    if len(word) < 3:
        return False
    freq = tokenizer.general_frequency(word)
    if flag in ("ns", "nr") and not freq and any(f == "v" for _, f in tokenizer.tagged(word[-1])):
        return True
    return freq < MIN_WORD_FREQ and stats.known(word[1:])


def _mapped_by_synonyms(word: str, tokenizer: Tokenizer) -> bool:
    """A growers' word the synonym table maps onto the KB; a name ending like a pest or crop only when it is itself
    (part of) a key: 卷叶 maps a symptom, 卷叶虫 is an insect the KB does not name."""
    if _NAME_ENDING.search(word) or word.endswith("虫"):
        return any(word in key for key in tokenizer.synonyms)
    return any(word in key or key in word for key in tokenizer.synonyms)


# unknown (x), morphemes (g, ng, vg, and zg: the 蕉 of 皇帝/蕉, the 剂 of 生根/剂), nouns and names
_FRAGMENT_POS = ("x", "g", "ng", "vg", "zg", "n", "nr", "nz", "ns")


def _noun_runs(tagged: Sequence[tuple[str, str]], tokenizer: Tokenizer, stats: TermStats) -> list[str]:
    """Nouns that follow one another, each before the last a dictionary word the KB never uses: where jieba cut a
    name it has no word for into words it has (枯草/芽孢/杆菌: 枯草芽孢杆菌). Not a fragment of a verb (灌点/多菌灵)."""
    runs, current = [], []
    for word, flag in [*tagged, ("", "")]:
        if len(word) >= 2 and flag in ("n", "nz") and all("\u4e00" <= ch <= "\u9fff" for ch in word):
            current.append(word)
            continue
        while len(current) >= 2 and (stats.known(current[0]) or tokenizer.general_frequency(current[0]) < MIN_WORD_FREQ):
            current = current[1:]  # the run starts at its first unknown dictionary word
        if len(current) >= 2 and not any(stats.known(w) or tokenizer.general_frequency(w) < MIN_WORD_FREQ
                                         for w in current[:-1]):
            runs.append("".join(current))
        current = []
    return runs


def _single_character_runs(tagged: Sequence[tuple[str, str]], stats: TermStats) -> list[str]:
    """A noun or character followed by single CJK characters tagged as unknown (x), morphemes or nouns: where
    jieba's dictionary had no word for a name (啶虫脒 → 啶/虫/脒, 白粉虱 → 白粉/虱). A name of three characters the
    KB holds whole opens no run: what follows it is what the grower says of it (跟戊唑醇换: 戊唑醇 + 换)."""
    runs, current, singles = [], "", 0
    for word, flag in [*tagged, ("", "")]:
        cjk = bool(word) and all("\u4e00" <= ch <= "\u9fff" for ch in word)
        if cjk and flag in _FRAGMENT_POS and len(word) == 1 and current:
            current, singles = current + word, singles + 1
            continue
        if singles:
            runs.append(current)
        opens = cjk and flag in _FRAGMENT_POS and len(word) <= 3 and not (len(word) == 3 and stats.known(word))
        current, singles = (word, 0) if opens else ("", 0)
    return runs


# How the names of agrochemicals and pests end (吡虫啉, 噻虫嗪, 毒死蜱, 啶虫脒, 甲维盐, 叶蝉, 白粉虱 …; not bare 虫:
# 大肉虫 describes, it does not name) and how
# the names of crops and fruit trees end (核桃, 沃柑, 魔芋, 柠檬树 …): a word the KB lacks that ends so is a thing
# the question is about, whatever else it names.
_NAME_END = "啉嗪磷膦酯胺醇酮菌灵威素碱蜱脲腈唑脒盐剂蝇螨蚜蛾虱蚧蝽蝉蚁螟蛆"
_CHEMICAL_OR_PEST = re.compile(r"^..+[" + _NAME_END + r"]$|^.?[蝉虱螟蛆蛾螨蚧蚜蝽蝇蚁]$|^.{1,2}甲$")
# X果 is a kind of fruit unless X says what state a coffee fruit is in (鲜果, 青果, 落果, 坐果 …).
_CROP = re.compile(r"(?!杂)(?:^.+[树柑橘桃梨瓜菜茶薯芋麦蔗椒菇笋莓枣蕉稻粱]$|^(?:烤烟|烟草|烟叶|茶叶)$"
                   # Yunnan's medicinal crops, grown under forest as coffee is, whose names carry no crop's ending
                   # (jieba reads 三七 as a number)
                   r"|^(?:三七|天麻|石斛|重楼|砂仁|黄精|白及)$|^.*[^厘毫千百平方立公里\d一二三四五六七八九十两半几多每]米$|^.*[^鲜青红黄绿黑干落浮病虫熟烂僵坐挂结采幼小大好单双空瘪整咖啡过了着]果$)")  # 杂树, 杂草: a mix of kinds, no crop
# Characters coined for organic chemistry (吡, 啶, 嗪, 膦 …): a word holding one names an agrochemical even when jieba
# split the name (打草/铵膦 for 打草铵膦).
_CHEMISTRY = re.compile(r"[啶脒膦嗪啉唑肟酰胺酯铵烷烯醚醛酚苯吡噻嘧哌咪呋喃腈脲砜]")
# names a chemical; a percentage only with a name after it (77% 氢氧化铜), not a share (荫蔽度保持 30%–40%, 40% 左右)
_REMEDY = re.compile(_CHEMISTRY.pattern + r"|倍液|剂|波尔多|硫酸铜|铜制|石灰|菌素|霉素|\d\s*%\s*(?![左以的])[\u4e00-\u9fff]")
_CHEMICAL_OR_PEST = re.compile(_CHEMICAL_OR_PEST.pattern + "|" + _CHEMISTRY.pattern)
_NAME_ENDING = re.compile(_CHEMICAL_OR_PEST.pattern + "|" + _CROP.pattern)
# Farm animals (土鸡, 山羊, 鸭子, 黄牛, 蜜蜂 …): one the KB never names is kept beside coffee, not taught by it.
# 养鸡: raising, no animal named; 猪崽, 鸡仔: the young of one
_ANIMAL = re.compile(r"^.?[鸡鸭鹅猪牛羊兔鱼蜂]子$|^(?![养喂放])..*[鸡鸭鹅猪牛羊兔鱼蜂]$|^[鸡鸭鹅猪牛羊兔狗][崽仔]")
# A Latin-letter name: a model number, a brand, a certification scheme (4C, GAP, UTZ …), when the KB never uses it.
_LATIN_NAME = re.compile(r"(?<![a-z0-9])(?:[a-z]+\d+[a-z0-9-]*|\d+[a-z]+[a-z0-9-]*|[a-z]{2,})(?![a-z0-9])")


def _looks_like_a_name(word: str, flag: str, in_dictionary: bool) -> bool:
    """A word jieba's dictionary lacks is a segmentation fragment, unless jieba's HMM took it for a name (拉花, 冷萃,
    孟连), it ends like the chemical and pest names the KB does use (吡虫啉, 噻虫嗪), or it is a dictionary word that
    ends like a crop or names an insect (柠檬树, 卷叶虫), or two characters its HMM joined that end like a crop (沃柑;
    not 子死树, which it made of 老园子死树)."""
    if flag in ("nr", "ns", "nz") or _CHEMICAL_OR_PEST.search(word):
        return True
    return in_dictionary and (bool(_CROP.search(word)) or word.endswith("虫"))


def unknown_latin_name(question: str, corpus_text: str) -> str:
    """A Latin-letter name in the question (4C, UTZ, 2WD …) that the knowledge base never writes ("" when none); a
    measure the KB writes, typed with its value (pH4.7), is no name."""
    lowered = corpus_text.lower()
    for m in _LATIN_NAME.finditer(question.lower()):
        measure = re.fullmatch(r"([a-z]+)\d+", m.group(0))
        if measure and re.search(rf"(?<![a-z]){measure.group(1)}(?![a-z])", lowered):
            continue
        if m.group(0) not in lowered:
            return m.group(0).upper()
    for m in _LISTED_CODES.finditer(question if _CULTIVAR_ASKED.search(question) else ""):  # 品种…695、788这些
        if not any(re.search(rf"(?<![\d.]){code}(?![\d.])", corpus_text) for code in m.groups()):
            return m.group(1)
    return ""


_CULTIVAR_ASKED = re.compile(r"品种|品系|编号")
# Two bare numbers listed as names (听人说有695、788这些; 695还是344): a cultivar's or a line's codes, no figure (a
# figure has its unit after it: 1500到1800米, 400片叶子)
_LISTED_CODES = re.compile(r"(?<![\d.])(\d{3,})\s*(?:、|，|,|还是|跟|和|或者?|\s)\s*(\d{3,})(?![\d.])"
                           r"(?!\s*(?:[A-Za-z%℃°]|[米亩斤克株棵片颗粒个元块度天年月日次倍号升吨分毫厘公千万百多来左]))")


OTHER_CROP_SHARE = 0.015  # a crop the KB names in at most this share of passages is mentioned beside coffee, not taught
_BESIDE_COFFEE = re.compile(r"荫蔽|遮|间作|间种|套种|混种")  # the crop's role beside coffee
# planted (种, 栽; 点 as growers sow maize and beans: 点几行苞谷, not 一点/有点 = a little), a quantity between
_PLANTED_BESIDE = re.compile(r"(?:种|栽|(?<![一有])点|套种|间种|间作|混种|种上|种点)(?:[几一两三四五六\d]+[行亩片块窝棵株塘排])?$")


def other_crop(question: str, tokenizer: Tokenizer, stats: TermStats) -> str:
    """A crop other than coffee that the question is about ("" when none): the question does not name coffee at all,
    and names a crop the knowledge base mentions only in passing (甘蔗, 杧果 as intercrops or shade), not as what is
    planted beside coffee (种玉米, 套种花生: that the manual does teach), and named before any coffee-growing term
    (荫蔽树选杧果 asks about shade). The manual says how to grow them beside coffee, not how to grow, feed or
    protect them."""
    if "咖啡" in question or _BESIDE_COFFEE.search(question):
        return ""
    entities = tokenizer.entities(question)
    words, at = [], 0  # (word, where it starts)
    for word, _flag in tokenizer.tagged(question):
        words.append((word, at))
        at += len(word)
    for key, targets in tokenizer.synonyms.items():  # a growers' name for a crop (包谷 → 玉米)
        if key in question:
            words += [(target, question.index(key)) for target in targets]
    for word, start in words:
        crop = word[:-1] if word.endswith("树") else word  # 芒果树 is a 芒果 tree; 幼树, 荫蔽树 are no crop
        if (len(crop) >= 2 and _CROP.search(crop) and not crop.endswith("树") and not _DOUBLED.fullmatch(crop)  # 果果: fruit
                and word not in tokenizer.synonyms  # a growers' word the table reads (种果 → 留种): its targets are checked
                and not _PLANTED_BESIDE.search(question[max(0, start - 5):start])
                and stats.share(crop) <= OTHER_CROP_SHARE and (stats.known(crop) or tokenizer.general_frequency(crop))
                and not any(e != word and e not in word and 0 <= question.find(e) < start for e in entities)):
            return word
    return ""


CROP_SHARE = 0.05  # a crop in at most this share of passages is grown beside coffee (intercrop, shade), not taught
_CLAUSE = re.compile(r"[，,。！!？?；;\s]+")


def other_crops_care(question: str, tokenizer: Tokenizer, stats: TermStats) -> str:
    """Another crop's own care that the knowledge base never discusses ("" when none): in one clause, a crop other than
    coffee (香蕉, 澳洲坚果: grown beside it, named in a few passages) and after it, with no 咖啡 between, a domain term
    (叶斑病, 复合肥) that no passage names together with that crop. The question asks about that crop's disease or
    fertiliser ("咖啡地里遮荫的香蕉…香蕉这个叶斑病要打哪样药？"), which the manual, teaching coffee, never says,
    even where it teaches how to plant the crop beside coffee. Named as "香蕉的叶斑病"."""
    crops = []
    for word in dict.fromkeys([w for w, _ in tokenizer.tagged(question)] + list(tokenizer.entities(question))):
        crop = word[:-1] if word.endswith("树") else word
        if (len(crop) >= 2 and _CROP.search(crop) and not crop.endswith("树") and "咖啡" not in crop
                and 0.0 < stats.share(crop) <= CROP_SHARE):
            crops.append(crop)
    for clause in _CLAUSE.split(question):
        for crop in crops:
            # the crop, or the last two characters it is called by for short (澳洲坚果 → 坚果树)
            at = next((i for i in (clause.find(crop), clause.find(crop[-2:])) if i >= 0), -1)
            if at < 0:
                continue
            for term in tokenizer.entities(clause):
                where = clause.find(term, at)
                if (where > at and term not in crop and crop not in term and "咖啡" not in clause[at:where]
                        and not _BESIDE_COFFEE.search(term)  # 香蕉遮阴: its role beside coffee, not its own care
                        and stats.known(term) and stats.together(crop, term) == 0):
                    return f"{crop}的{term}"
    return ""


_ANIMAL_ALONE = set("鸡鸭鹅猪牛羊兔鱼蜂")
_ANIMAL_CARE = re.compile(r"喂|饲料|吃食|食量|病|瘟|疫苗|打针|针|发烧|拉稀")


def animal_care(question: str, tokenizer: Tokenizer) -> str:
    """A farm animal's own feeding or health ("" when none): in one clause, an animal (猪, 牛, 土鸡 as a word of its
    own, not the 猪 of 猪粪 or 猪屎豆) and after it a word of feeding or sickness (一头猪一天喂好多, 养的猪不吃食、发烧,
    放养的鸡…是不是鸡瘟). The manual teaches coffee; what it says of animals is their manure, or that a cover crop is
    no fodder (拿去喂牛喂猪: the feeding comes first, and asks about the crop)."""
    for clause in _CLAUSE.split(question):
        at = 0
        for word, flag in tokenizer.tagged(clause):
            fed = clause[:at].endswith("喂")  # 拿去喂牛: what is fed is asked about, not the animal
            if not fed and (word in _ANIMAL_ALONE or flag.startswith("n") and _ANIMAL.search(word)):
                if _ANIMAL_CARE.search(clause, at + len(word)):
                    return f"{word}的饲养和疾病"
            at += len(word)
    return ""


_FIGHT = r"(?:防|治|杀|赶|灭|驱|打)"


# a machine, instrument or vehicle (无人机, 割草机, 测糖仪, 摩托车): the KB cannot say how to use one it never names
_MACHINE = re.compile(r"^..+[机器仪车]$|^摩托")
# an insect described by its size, colour or body (大虫虫, 绿虫, 肉虫), which the grower cannot name: no name to look for
_DESCRIBED_INSECT = re.compile(r"[大小绿黑白红黄灰青花肉长胖]虫")


def unknown_focus(question: str, tokenizer: Tokenizer, stats: TermStats) -> str:
    """What the question is about that the knowledge base never mentions, when that is most of what it names
    ("" otherwise): a question naming a word the knowledge base has never seen, and little that it knows well,
    is about that word."""
    unknown = unknown_words(question, tokenizer, stats)
    if not unknown:
        return ""
    tokens = {w for w, _ in tokenizer.tagged(question)}
    # a crop or an X虫: a dictionary word (柠檬树, 卷叶虫), characters jieba could not join (沃/柑) or two its HMM
    # joined (沃柑), not a longer word its HMM made by swallowing a neighbour (能见果, 子死树) nor a description (大肉虫)
    named = [w for w in unknown if _CHEMICAL_OR_PEST.search(w) or _ANIMAL.search(w) or _MACHINE.search(w)
             or (_CROP.search(w) or w.endswith("虫") and not _DESCRIBED_INSECT.fullmatch(w))
             and (tokenizer.general_frequency(w) > 0 or w not in tokens
                                                          or len(w) == 2 and _CROP.search(w))
             # a tree or seedling of a word the KB never uses (茶叶树, jieba cutting 茶叶/树): another crop
             or tokenizer.general_frequency(w) >= MIN_WORD_FREQ and re.search(re.escape(w) + "(?:树|苗)", question)]
    if named:  # an agrochemical, pest or crop the KB never names: it cannot say how to use, fight or grow it
        return named[0]
    fought = [w for w in unknown if tokenizer.general_frequency(w) >= MIN_WORD_FREQ
              and re.search(_FIGHT + re.escape(w), question)]
    if fought:  # how to keep off or kill a thing the KB never names (防松鼠, 赶野猪)
        return fought[0]
    measured = [w for w in unknown if tokenizer.general_frequency(w) >= MIN_WORD_FREQ  # a word (not 张有病 of 好多张有病)
                and (_MEASURE_ASKED.search(question.replace(w, "\0")) or re.search(re.escape(w) + _CONTENT_OF, question))]
    if measured:  # how much of a thing the KB never names (要有好多积温才够, 哪个咖啡因含量高): nothing to state it in
        return measured[0]
    kinds = [w for w in unknown if _kind_of_known(w, tokenizer, stats)]
    if kinds:  # a kind of a thing the KB knows, named by what it never says (厌氧发酵: its 发酵 is not that one)
        return kinds[0]
    strength = (topic_strength(question, tokenizer, stats, grammar=True)
                + len(_growers_topic_words(question, tokenizer, stats)))
    return unknown[0] if strength < UNKNOWN_FOCUS_STRENGTH else ""


_REDUPLICATED = re.compile(r"(.)\1(.)\2")  # 枝枝叶叶, 斑斑点点: a grower's way of saying 枝叶, no kind of anything


def _kind_of_known(word: str, tokenizer: Tokenizer, stats: TermStats) -> bool:
    """Whether a dictionary word the KB lacks is a known word of two characters or more (发酵, 保险) qualified by one
    the KB never uses nor maps (厌氧, 工伤): a kind of the thing the KB has, which is not the kind it describes."""
    if not tokenizer.general_frequency(word) or _REDUPLICATED.fullmatch(word):
        return False
    return any(stats.known(word[i:]) and not stats.known(word[:i]) and not _mapped_by_synonyms(word[:i], tokenizer)
               for i in range(2, len(word) - 1))


def _growers_topic_words(question: str, tokenizer: Tokenizer, stats: TermStats) -> list[str]:
    """The growers' words of the question that the KB does not use and the synonym table maps onto a topic of it
    (开荒: 开垦; 怀着娃, over jieba's 怀着/娃娃: 孕期): each names that topic as the KB's own word would. A key is a word
    (two characters or more), not the 药 of 医药费; a key inside a longer key found is that word again, not counted twice."""
    found = [key for key, targets in tokenizer.synonyms.items()
             if len(key) >= 2 and key in question and not stats.known(key) and any(stats.specific(t) for t in targets)]
    return [key for key in found if not any(key != other and key in other for other in found)]


# The document says it presents something else (本文介绍的是…, 本文件不涉及…) right after naming what the question asks
# about: 近年 SCA 推出了新的咖啡价值评估体系…。本文介绍的是长期通用的百分制杯测表.
_SCOPED_OUT = re.compile(r"本文件?(?:介绍的是|只介绍|仅介绍|主要介绍|不涉及|不包括|不适用|不讨论|不展开)")


def scoped_out(question: str, hits: Sequence[Hit], tokenizer: Tokenizer, stats: TermStats, top: int = 3) -> str:
    """"<what it names>的细节" when the evidence sentence holding the most of the question's anchors (IDF-weighted,
    the only one to hold that much) is followed by the document's own word that it presents something else; ""
    otherwise."""
    anchors = _anchors(question, tokenizer, stats, [], everyday=True)
    best: tuple[float, list[str], int] | None = None
    tied = False
    for h in hits[:top]:
        sentences = [h.chunk.text[a:b] for a, b in sentence_spans(h.chunk.text)]
        for i, sentence in enumerate(sentences):
            weight = sum(w for _, forms, w in anchors if any(f in sentence for f in forms))
            if best is None or weight > best[0]:
                best, tied = (weight, sentences, i), False
            elif weight == best[0]:
                tied = True
    if best is None or tied or not best[0]:
        return ""
    _, sentences, i = best
    if _SCOPED_OUT.search(sentences[i]) or i + 1 >= len(sentences) or not _SCOPED_OUT.search(sentences[i + 1]):
        return ""
    # named by the run of held words around the rarest (价值评估体系), not by every word the sentence shares
    held = sorted((question.find(word), word, w) for word, forms, w in anchors if any(f in sentences[i] for f in forms))
    k = max(range(len(held)), key=lambda j: held[j][2])
    first = last = k
    while first > 0 and held[first - 1][0] + len(held[first - 1][1]) >= held[first][0]:
        first -= 1
    while last + 1 < len(held) and held[last][0] + len(held[last][1]) >= held[last + 1][0]:
        last += 1
    return question[held[first][0]:held[last][0] + len(held[last][1])] + "的细节"


_SPACED = re.compile(r"(?<=[\u4e00-\u9fff])\s+(?=[\u4e00-\u9fff])")


def assess(question: str, hits: Sequence[Hit], tokenizer: Tokenizer, corpus_text: str,
           stats: TermStats | None = None, asked: str | None = None) -> Coverage:
    """`question` is what was searched (rewritten from the history for a follow-up); `asked`, when given, is the
    user's own words: the kind of fact asked for and the crop asked about are read from them, so that a word carried
    from an earlier turn does not turn a follow-up into a price or another crop's question."""
    if not hits:
        return Coverage(False, 0.0)
    # growers typing on a phone part clauses with a space (我爹十几年前栽的咖啡 现在下半截枝子全部掉光了): a comma
    question, asked = _SPACED.sub("，", question), _SPACED.sub("，", asked or question)
    # a follow-up's carried words (冷空气 冷湖 白霜 …) are the previous turn's: its own words may be what the evidence covers
    score = max(coverage_score(question, hits, tokenizer),
                coverage_score(asked, hits, tokenizer) if asked != question else 0.0)
    # whole words first (阿维菌素, not the 维菌 the character patterns of unknown_topic would name)
    missing = ((unknown_focus(question, tokenizer, stats) or other_crop(asked, tokenizer, stats)
                or other_crops_care(asked, tokenizer, stats) if stats else "") or animal_care(asked, tokenizer)
               or unknown_latin_name(question, corpus_text)
               or unknown_topic(question, corpus_text, tokenizer.synonyms, tokenizer) or missing_fact(asked, hits)
               # a follow-up's own words name too little to anchor a figure: judged only for a question as asked
               or (unanchored_amount(asked, hits, tokenizer, stats) or unanchored_remedy(asked, hits, tokenizer, stats)
                   or unanchored_code(asked, hits, tokenizer, stats) or unstated_element(asked, hits)
                   or unanchored_place(asked, hits, tokenizer, stats) or unanchored_country(asked, hits, tokenizer, stats)
                   or unanchored_lifespan(asked, hits, tokenizer, stats) or unanchored_year(asked, hits, tokenizer, stats)
                   or unanchored_paperwork(asked, hits, tokenizer, stats)
                   or unanchored_stage(asked, hits, tokenizer, stats) or unanchored_control(asked, hits, tokenizer, stats)
                   or scoped_out(asked, hits, tokenizer, stats)
                   if stats and asked == question else "")
               # a chemical the follow-up names itself anchors its dose (那苯醚甲环唑打炭疽兑好多倍), and a rate its share
               # (那劈接一般成活率有好多): judged as for any question
               or (unanchored_dose(asked, hits, tokenizer, stats) if stats else "") or unstated_rate(asked, hits)
               or unstated_period(asked, hits, tokenizer))
    covered = not missing and (score >= MIN_COVERAGE or stats is not None  # in words the knowledge base uses
                               and any(stats.known(w) for w in content_words(asked, tokenizer)))
    return Coverage(covered=covered, score=score, missing=missing)
