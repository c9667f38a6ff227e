"""Social's seeded content (users, posts, comments, trends) and the formatting that
pages and tasks share (snippets, counts, ages, topic tags)."""

from __future__ import annotations

import re

# -- seeded content ----------------------------------------------------------------
# (id, display name, handle, bio, verified)
USERS = {
    "en": [
        ("u1", "Maya Chen", "mayaruns", "Marathoner, coffee snob, bad at puns.", False),
        ("u2", "Leo Park", "leocodes", "Backend dev. Rust and Python. Opinions are my cat's.", False),
        ("u3", "Priya Nair", "priyabakes", "Home baker. Sourdough every Sunday.", False),
        ("u4", "Sam Rivera", "samrivera_photo", "Street photographer.", False),
        ("u5", "Jonas Weber", "jonas_w", "Cycling to work since 2015.", False),
        ("u6", "Olivia Reed", "oliviareads", "Reading 52 books this year.", False),
        ("u7", "Noah Kim", "noahplays", "Indie games, retro consoles, pixel art.", False),
        ("u8", "Zoe Martin", "zoegardens", "Balcony gardener. Tomatoes are life.", False),
        ("u9", "City Transit", "citytransit", "Official service updates.", True),
        ("u10", "Tech Daily", "techdaily", "Tech news, every day.", True),
        ("u11", "Hana Sato", "hanasketches", "Sketchbook and travel.", False),
        ("u12", "Carlos Diaz", "carlos_cooks", "Cooking for friends on weekends.", False),
    ],
    "zh": [
        ("u1", "跑步的小林", "xiaolin_run", "马拉松爱好者，每天5公里", False),
        ("u2", "程序员老张", "laozhang_dev", "后端开发，写代码也写生活", False),
        ("u3", "烘焙日记Amy", "amy_bake", "周末烘焙，欧包爱好者", False),
        ("u4", "摄影师阿杰", "ajie_photo", "街头摄影，记录城市", False),
        ("u5", "骑行的大熊", "daxiong_bike", "通勤骑行第八年", False),
        ("u6", "读书笔记君", "dushu_jun", "一年读完52本书", False),
        ("u7", "游戏少年小K", "xiaok_game", "独立游戏、像素风、怀旧主机", False),
        ("u8", "植物系女孩", "zhiwu_girl", "阳台种菜，番茄自由", False),
        ("u9", "城市地铁", "metro_city", "地铁官方账号，发布运营信息", True),
        ("u10", "科技前线", "keji_qianxian", "每日科技资讯", True),
        ("u11", "旅行的猫", "lvxing_mao", "背着画本去旅行", False),
        ("u12", "吃货小分队", "chihuo_team", "周末做饭给朋友吃", False),
    ],
}
ME = {
    "en": ("me", "Alex Morgan", "alexm", "Just here for the memes."),
    "zh": ("me", "小鹿同学", "xiaolu", "热爱生活，记录日常"),
}

# (author, topic or None, keyword (a word of the text), text)
POSTS = {
    "en": [
        (
            "u1",
            "MarathonTraining",
            "marathon",
            "Just finished my first half marathon in 1:52! Legs are jelly but I'm so happy. #MarathonTraining",
        ),
        (
            "u1",
            "MarathonTraining",
            "intervals",
            "Intervals at 6am in the rain. Who else is training for the city race? #MarathonTraining",
        ),
        (
            "u11",
            "MarathonTraining",
            "cheering",
            "Sketched the runners from the cheering zone today, what an atmosphere #MarathonTraining",
        ),
        (
            "u3",
            "SourdoughSunday",
            "loaf",
            "This week's loaf has the best ear I've ever managed. Recipe in the replies #SourdoughSunday",
        ),
        (
            "u3",
            "SourdoughSunday",
            "starter",
            "My starter is three years old today. Happy birthday, Doughbert #SourdoughSunday",
        ),
        (
            "u12",
            "SourdoughSunday",
            "pizza",
            "Used Priya's dough recipe for pizza night and it was a hit #SourdoughSunday",
        ),
        (
            "u2",
            "RustLang",
            "borrow checker",
            "The borrow checker and I have reached an understanding. It wins. #RustLang",
        ),
        (
            "u2",
            "RustLang",
            "log parser",
            "We rewrote the log parser and it's 8x faster, no other changes #RustLang",
        ),
        (
            "u10",
            "RustLang",
            "survey",
            "Developer survey: Rust is the most admired language for another year #RustLang",
        ),
        (
            "u5",
            "CityCycling",
            "bike lane",
            "The new bike lane on Harbor Street is finally open. Commute went from 25 to 15 minutes #CityCycling",
        ),
        (
            "u5",
            "CityCycling",
            "puncture",
            "Third puncture this month. Tips for tougher tires welcome #CityCycling",
        ),
        (
            "u4",
            "CityCycling",
            "sunrise",
            "Caught the sunrise over the bridge on my morning ride #CityCycling",
        ),
        (
            "u6",
            "BookClub",
            "River Between Us",
            "Finished The River Between Us last night and I'm still thinking about the ending #BookClub",
        ),
        ("u6", "BookClub", "library", "The library book sale is on this weekend, bring a tote bag #BookClub"),
        ("u8", "GardenLife", "tomatoes", "First tomatoes of the season from a tiny balcony! #GardenLife"),
        ("u8", "GardenLife", "basil", "Basil is thriving, mint is trying to take over the world #GardenLife"),
        ("u4", "PhotoOfTheDay", "neon", "Neon reflections after the rain downtown #PhotoOfTheDay"),
        ("u11", "PhotoOfTheDay", "harbor", "Fog rolling over the harbor this morning #PhotoOfTheDay"),
        (
            "u7",
            "IndieGames",
            "pixel",
            "Three years of work: my pixel art platformer demo is out today! #IndieGames",
        ),
        ("u7", "IndieGames", "soundtrack", "The soundtrack in this little puzzle game is unreal #IndieGames"),
        (
            "u9",
            "TransitUpdate",
            "delays",
            "Line 2 has delays of about 10 minutes due to a signal fault. Thanks for your patience #TransitUpdate",
        ),
        (
            "u9",
            "TransitUpdate",
            "weekend",
            "Weekend service: Line 4 trains run every 8 minutes from Saturday #TransitUpdate",
        ),
        ("u10", None, "phone", "Hands-on with the new foldable phone: lighter, brighter, still pricey."),
        ("u12", None, "taco night", "Taco night for twelve people. Send help (and limes)."),
        ("u2", None, "flat white", "Nothing like a flat white before a deploy."),
    ],
    "zh": [
        (
            "u1",
            "春日跑步挑战",
            "半马",
            "#春日跑步挑战# 今天终于跑完了人生第一个半马，1小时52分！腿已经不是自己的了",
        ),
        ("u1", "春日跑步挑战", "间歇跑", "#春日跑步挑战# 早上六点下雨也去练了间歇跑，有一起备赛的吗？"),
        ("u11", "春日跑步挑战", "加油", "#春日跑步挑战# 在加油区画了一下午跑者，气氛太好了"),
        ("u3", "周末烘焙", "欧包", "#周末烘焙# 这周的欧包开口终于成功了！配方放评论区"),
        ("u3", "周末烘焙", "酵种", "#周末烘焙# 我的酵种今天满三岁啦，生日快乐"),
        ("u12", "周末烘焙", "披萨", "#周末烘焙# 用Amy的面团方子做了披萨，朋友们都说好吃"),
        ("u2", "程序员的日常", "编译器", "#程序员的日常# 和编译器斗争了一下午，最后还是它赢了"),
        ("u2", "程序员的日常", "重构", "#程序员的日常# 把日志解析重构了一遍，速度快了8倍"),
        ("u10", "程序员的日常", "调查", "#程序员的日常# 最新开发者调查：Rust连续多年成为最受喜爱的语言"),
        ("u5", "城市骑行", "自行车道", "#城市骑行# 滨江路的新自行车道终于开通了，通勤从25分钟缩短到15分钟"),
        ("u5", "城市骑行", "爆胎", "#城市骑行# 这个月第三次爆胎了，求推荐耐扎的外胎"),
        ("u4", "城市骑行", "日出", "#城市骑行# 晨骑的时候拍到了大桥上的日出"),
        ("u6", "读书打卡", "山海之间", "#读书打卡# 昨晚读完了《山海之间》，结尾让我想了一整天"),
        ("u6", "读书打卡", "图书馆", "#读书打卡# 这周末图书馆有旧书义卖，记得带个袋子"),
        ("u8", "阳台种菜", "番茄", "#阳台种菜# 小阳台今年收获的第一批番茄！"),
        ("u8", "阳台种菜", "薄荷", "#阳台种菜# 罗勒长得很好，薄荷已经要占领整个花盆了"),
        ("u4", "今日摄影", "霓虹", "#今日摄影# 雨后街头的霓虹倒影"),
        ("u11", "今日摄影", "雾", "#今日摄影# 今早港口起雾了，像在画里"),
        ("u7", "独立游戏推荐", "像素", "#独立游戏推荐# 做了三年的像素风平台跳跃游戏，试玩版今天上线！"),
        ("u7", "独立游戏推荐", "配乐", "#独立游戏推荐# 这款解谜小游戏的配乐太绝了"),
        (
            "u9",
            "地铁出行提示",
            "延误",
            "#地铁出行提示# 受信号故障影响，2号线列车延误约10分钟，请乘客合理安排出行",
        ),
        ("u9", "地铁出行提示", "周末", "#地铁出行提示# 本周六起，4号线周末行车间隔缩短至8分钟"),
        ("u10", None, "折叠屏", "上手新款折叠屏手机：更轻更亮，但价格依旧不便宜"),
        ("u12", None, "火锅", "周末在家给十二个人做火锅，洗菜洗到手软"),
        ("u2", None, "澳白", "上线前来一杯澳白，稳了"),
    ],
}
# Topics that trend without any seeded post (news of the day).
EXTRA_TRENDS = {
    "en": ["FoldablePhone", "RainyMonday", "ChampionsLeague", "NationalPetDay", "JobsReport"],
    "zh": ["新款折叠屏发布", "周一下雨了", "欧冠半决赛", "世界读书日", "五一假期出行预测"],
}
COMMENTS = {
    "en": [
        "Congrats!",
        "This is great!",
        "Where is this?",
        "Same here, haha",
        "Love it",
        "Need the recipe!",
        "So true",
        "Thanks for sharing",
    ],
    "zh": [
        "恭喜恭喜！",
        "太厉害了",
        "这是在哪里？",
        "哈哈哈同款",
        "好喜欢",
        "求配方！",
        "说得太对了",
        "感谢分享",
    ],
}
NEW_POST_SOURCE = {"en": "Web", "zh": "微言网页版"}
SOURCES = {"en": ["iPhone", "Android", "Web"], "zh": ["iPhone 15", "HUAWEI Mate 60", "小米14", "微言网页版"]}


# -- formatting shared by pages and tasks ------------------------------------------
def snippet(text: str, lang: str) -> str:
    """The start of a post, used in the names of its buttons and in instructions."""
    if lang == "zh":
        body = text.split("# ", 1)[1] if text.startswith("#") and "# " in text else text
        return body[:14]
    return " ".join(text.split()[:6])


def count_label(n: int, lang: str) -> str:
    if lang == "zh" and n >= 10000:
        return f"{n / 10000:.1f}万"
    return f"{n:,}" if lang == "en" else str(n)


def age_label(minutes: int, lang: str) -> str:
    if minutes <= 0:
        return "刚刚" if lang == "zh" else "now"
    if minutes < 60:
        return f"{minutes}分钟前" if lang == "zh" else f"{minutes}m"
    if minutes < 24 * 60:
        return f"{minutes // 60}小时前" if lang == "zh" else f"{minutes // 60}h"
    return f"{minutes // 1440}天前" if lang == "zh" else f"{minutes // 1440}d"


def topic_tag(topic: str, lang: str) -> str:
    return f"#{topic}#" if lang == "zh" else f"#{topic}"


_TAG_RE = {"en": re.compile(r"#(\w+)"), "zh": re.compile(r"#([^#\s]+)#")}


def text_parts(text: str, lang: str) -> list[tuple[str, str]]:
    """A post's text cut into ("text", s) and ("topic", name) parts, to link the topics."""
    parts, pos = [], 0
    for m in _TAG_RE[lang].finditer(text):
        if m.start() > pos:
            parts.append(("text", text[pos : m.start()]))
        parts.append(("topic", m.group(1)))
        pos = m.end()
    if pos < len(text):
        parts.append(("text", text[pos:]))
    return parts
