"""Mobile social's seeded content (creators, notes, comments, places) and the
accessible names its pages and task templates share (see `sandbox.apps.mobile_social`)."""

from __future__ import annotations

APP = "mobile_social"

# -- seeded content ----------------------------------------------------------------
# (id, display name, handle, bio)
USERS = {
    "en": [
        ("u1", "Maya Chen", "mayawanders", "Slow travel, cheap flights, good coffee."),
        ("u2", "Leo Park", "leo.eats", "Eating my way through the city."),
        ("u3", "Priya Nair", "priyabakes", "Home baker. Sourdough every Sunday."),
        ("u4", "Sam Rivera", "samshoots", "Street and harbor photography."),
        ("u5", "Zoe Martin", "zoegardens", "Balcony gardener. Tomatoes are life."),
        ("u6", "Noah Kim", "noahfits", "Short workouts for busy people."),
        ("u7", "Hana Sato", "hanasketches", "Sketchbook and travel."),
        ("u8", "Carlos Diaz", "carlos_cooks", "Cooking for friends on weekends."),
        ("u9", "Olivia Reed", "oliviareads", "Reading 52 books this year."),
        ("u10", "Jonas Weber", "jonas.rides", "Cycling to work since 2015."),
        ("u11", "Ava Brooks", "avastyle", "Capsule wardrobes and thrift finds."),
        ("u12", "Ben Ortiz", "benhikes", "Up before the sun."),
    ],
    "zh": [
        ("u1", "爱旅行的阿May", "amay_travel", "慢旅行｜穷游攻略｜咖啡续命"),
        ("u2", "吃货小胖", "xiaopang_eat", "城市探店，只说真话"),
        ("u3", "烘焙日记Amy", "amy_bake", "周末烘焙，欧包爱好者"),
        ("u4", "摄影师阿杰", "ajie_photo", "手机摄影｜街头扫街"),
        ("u5", "阳台种菜的小园", "xiaoyuan_garden", "阳台种菜第三年，番茄自由"),
        ("u6", "健身打卡的Kevin", "kevin_fit", "打工人的20分钟健身"),
        ("u7", "画画的猫", "huahua_mao", "背着画本去旅行"),
        ("u8", "厨房里的老陈", "laochen_cook", "下班半小时，做饭给家人吃"),
        ("u9", "读书的鱼", "dushu_yu", "一年读完52本书"),
        ("u10", "骑行的大熊", "daxiong_bike", "通勤骑行第八年"),
        ("u11", "穿搭博主Lily", "lily_ootd", "胶囊衣橱｜古着爱好者"),
        ("u12", "爬山的阿坤", "akun_hike", "周末不是在爬山，就是在去爬山的路上"),
    ],
}
# The spam account whose comments carry a phone number (report targets).
SPAMMER = {
    "en": ("u13", "Deals4U", "deals4u_official", "DM for deals"),
    "zh": ("u13", "兼职日结小助手", "jianzhi_rijie", "日结｜在家可做"),
}
ME = {
    "en": ("me", "Alex Morgan", "alexm", "Here for the food pics."),
    "zh": ("me", "小鹿同学", "xiaolu", "热爱生活，记录日常"),
}

# (author, title, caption, topics, [what each photo of the carousel shows])
NOTES = {
    "en": [
        (
            "u1",
            "3 days in Kyoto on a budget",
            "Temples at sunrise, tofu for lunch and no crowds if you go early. Full route below!",
            ["Kyoto", "TravelTips"],
            [
                "Red torii gates at Fushimi Inari",
                "Bamboo grove in Arashiyama",
                "Matcha at a tea house",
                "Kiyomizu-dera at dusk",
            ],
        ),
        (
            "u2",
            "Best ramen in town, ranked",
            "Five bowls in one week. Number one surprised me.",
            ["FoodDiary"],
            ["Tonkotsu ramen with a soft egg", "Pan-fried gyoza", "Shoyu ramen close-up"],
        ),
        (
            "u3",
            "My sourdough finally has an ear",
            "Higher hydration and a colder proof did it. Recipe in the comments.",
            ["Sourdough"],
            ["Loaf with a tall ear", "Open crumb cross-section", "Bubbly starter in a jar"],
        ),
        (
            "u4",
            "Golden hour on the harbor",
            "Shot on my phone, no filter. Go 20 minutes before sunset.",
            ["PhotoOfTheDay"],
            ["Sunset over the harbor", "Sailboat silhouette", "Bridge lights coming on"],
        ),
        (
            "u5",
            "Balcony tomato harvest",
            "Two plants, one tiny balcony, a whole bowl of cherry tomatoes.",
            ["GardenLife"],
            [
                "A bowl of cherry tomatoes",
                "Basil next to the tomatoes",
                "The whole balcony setup",
                "A bee on a tomato flower",
            ],
        ),
        (
            "u6",
            "20-minute morning workout",
            "No gym needed: swings, squats, planks, stretch. Save it for tomorrow.",
            ["HomeWorkout"],
            ["Kettlebell swings", "Cool-down stretch", "Timer set to 20 minutes"],
        ),
        (
            "u7",
            "Sketchbook tour: Lisbon",
            "One sketchbook, one city, ten days.",
            ["Sketching", "TravelTips"],
            ["Yellow tram sketch", "Alfama rooftops", "Sardines at the market", "Belem tower watercolor"],
        ),
        (
            "u8",
            "Weeknight pasta in 15 minutes",
            "Garlic, chili, olive oil, done before the water gets bored.",
            ["FoodDiary"],
            ["Garlic and chili spaghetti", "Garlic slices in olive oil", "Parmesan on top"],
        ),
        (
            "u9",
            "What I read in March",
            "Five novels, one I couldn't put down.",
            ["BookClub"],
            ["Stack of five novels", "Reading corner with coffee", "Favourite quote bookmarked"],
        ),
        (
            "u10",
            "Coastal ride, 80 km",
            "Tailwind all the way out, headwind all the way back. Worth it.",
            ["CityCycling"],
            ["Riding along the coast road", "Route map", "Croissant stop halfway"],
        ),
        (
            "u11",
            "Spring capsule wardrobe",
            "Ten pieces, thirty outfits. List in the photos.",
            ["OOTD"],
            ["Linen dress", "White sneakers", "Trench coat", "Canvas tote"],
        ),
        (
            "u12",
            "Sunrise hike to Eagle Peak",
            "Started at 4 am, worth every step.",
            ["Hiking"],
            ["Summit at sunrise", "Muddy boots on the trail", "An eagle above the ridge"],
        ),
        (
            "u1",
            "Packing list for a week in Iceland",
            "Layers, layers, layers. Everything fits in a carry-on.",
            ["TravelTips"],
            ["Suitcase packed flat", "Wool gloves and hat", "Volcano view from the road"],
        ),
        (
            "u3",
            "Cinnamon rolls for a crowd",
            "Makes 24. Freeze half, thank me later.",
            ["Baking"],
            ["Cinnamon rolls in the pan", "Cream cheese icing", "Rolls with coffee"],
        ),
        (
            "u8",
            "Tacos for twelve",
            "Taco night for twelve people. Send help (and limes).",
            ["FoodDiary"],
            ["Tray of tacos", "Limes and salsa", "Fresh guacamole"],
        ),
        (
            "u4",
            "Neon nights downtown",
            "Rainy nights are the best nights for photos.",
            ["PhotoOfTheDay"],
            ["Neon signs in the rain", "Taxi light trails", "Umbrella on a crosswalk"],
        ),
    ],
    "zh": [
        (
            "u1",
            "京都三日游｜人少景美的小众路线",
            "早上7点去伏见稻荷，几乎没人！附上三天的详细路线，照着走就行～",
            ["京都旅行", "旅行攻略"],
            ["伏见稻荷的千本鸟居", "岚山竹林小径", "茶屋里的抹茶", "黄昏的清水寺"],
        ),
        (
            "u2",
            "本地拉面大测评｜这家汤头绝了",
            "一周吃了五家，第一名真的没想到",
            ["探店"],
            ["豚骨拉面配溏心蛋", "金黄的煎饺", "酱油拉面特写"],
        ),
        (
            "u3",
            "欧包终于开口了！附配方",
            "提高含水量+冷藏发酵，开口稳了，配方放评论区",
            ["烘焙"],
            ["开口漂亮的欧包", "切面组织", "冒泡的酵种"],
        ),
        (
            "u4",
            "海边日落｜手机也能拍大片",
            "原相机直出，日落前20分钟到就对了",
            ["摄影技巧"],
            ["海港的日落", "帆船剪影", "亮灯的大桥"],
        ),
        (
            "u5",
            "阳台小番茄大丰收",
            "两棵苗、一个小阳台，收了满满一碗圣女果",
            ["阳台种菜"],
            ["一碗圣女果", "番茄旁边的罗勒", "整个阳台", "番茄花上的蜜蜂"],
        ),
        (
            "u6",
            "20分钟晨练｜在家就能做",
            "不用去健身房：壶铃、深蹲、平板支撑、拉伸，先收藏明天练",
            ["居家健身"],
            ["壶铃摆荡", "拉伸放松", "20分钟计时器"],
        ),
        (
            "u7",
            "里斯本速写本｜一本画完一座城",
            "十天，一座城，一本速写本",
            ["手绘", "旅行攻略"],
            ["黄色电车速写", "阿尔法玛的屋顶", "市场里的沙丁鱼", "贝伦塔水彩"],
        ),
        (
            "u8",
            "15分钟快手意面｜打工人晚饭",
            "蒜片、辣椒、橄榄油，水开之前就能备好料",
            ["快手菜"],
            ["蒜香辣椒意面", "橄榄油里的蒜片", "撒上帕玛森芝士"],
        ),
        (
            "u9",
            "三月读书清单｜这5本值得读",
            "五本小说，有一本一口气读完",
            ["读书笔记"],
            ["五本小说叠在一起", "看书的角落", "喜欢的一句话"],
        ),
        (
            "u10",
            "环海骑行80公里",
            "去程顺风，回程逆风，但风景值了",
            ["骑行"],
            ["沿着海边公路骑行", "路线图", "中途补给的可颂"],
        ),
        (
            "u11",
            "春季胶囊衣橱｜10件穿一个月",
            "十件单品搭出三十套，清单在图里",
            ["穿搭"],
            ["亚麻连衣裙", "小白鞋", "风衣", "帆布包"],
        ),
        (
            "u12",
            "凌晨爬山看日出",
            "凌晨四点出发，每一步都值得",
            ["徒步"],
            ["山顶日出", "沾满泥的登山鞋", "山脊上的老鹰"],
        ),
        (
            "u1",
            "冰岛一周行李清单",
            "多穿几层就对了，一个登机箱全装下",
            ["旅行攻略"],
            ["收纳好的行李箱", "羊毛手套和帽子", "路边的火山"],
        ),
        (
            "u3",
            "肉桂卷｜一次做一大盘",
            "一次24个，吃不完冷冻，早餐直接热",
            ["烘焙"],
            ["一盘肉桂卷", "奶油奶酪糖霜", "肉桂卷配咖啡"],
        ),
        (
            "u8",
            "周末火锅局｜十二个人吃什么",
            "十二个人的火锅局，洗菜洗到手软",
            ["快手菜"],
            ["一大锅红汤", "洗好的蔬菜", "摆好的肥牛"],
        ),
        (
            "u4",
            "雨夜霓虹｜城市扫街",
            "下雨天才是拍照的好天气",
            ["摄影技巧"],
            ["雨里的霓虹招牌", "出租车光轨", "斑马线上的雨伞"],
        ),
    ],
}
# Notes that pull-to-refresh brings into the feed, two per refresh.
FRESH_NOTES = {
    "en": [
        (
            "u9",
            "Library book sale haul",
            "Twelve books for ten dollars.",
            ["BookClub"],
            ["Bag of secondhand books", "The library steps"],
        ),
        (
            "u5",
            "First strawberries of the year",
            "Three whole strawberries. A start.",
            ["GardenLife"],
            ["Strawberries in a basket", "Strawberry flowers"],
        ),
        (
            "u10",
            "New bike lane opened today",
            "Commute went from 25 to 15 minutes.",
            ["CityCycling"],
            ["Green bike lane", "Bikes parked at the station"],
        ),
        (
            "u11",
            "Thrift store finds",
            "Everything here cost less than a coffee.",
            ["OOTD"],
            ["Vintage scarf", "Leather boots"],
        ),
        (
            "u6",
            "Rest day smoothie",
            "Berries, banana, oats. That's it.",
            ["HomeWorkout"],
            ["Berry smoothie", "Bananas and oats"],
        ),
        (
            "u7",
            "Drawing the city from a cafe",
            "Two hours, one flat white.",
            ["Sketching"],
            ["Pencil sketch of the street", "Cafe table with sketchbook"],
        ),
    ],
    "zh": [
        (
            "u9",
            "图书馆旧书义卖淘到宝了",
            "十块钱买了十二本书",
            ["读书笔记"],
            ["一袋二手书", "图书馆门口的台阶"],
        ),
        ("u5", "今年第一批草莓熟了", "一共三颗，也算是个开始", ["阳台种菜"], ["一小篮草莓", "草莓花"]),
        (
            "u10",
            "新自行车道今天开通",
            "通勤从25分钟缩短到15分钟",
            ["骑行"],
            ["绿色的自行车道", "停在地铁站的单车"],
        ),
        ("u11", "古着店淘到的宝贝", "每件都比一杯咖啡便宜", ["穿搭"], ["复古围巾", "皮靴"]),
        ("u6", "休息日的奶昔", "莓果、香蕉、燕麦，就这么简单", ["居家健身"], ["莓果奶昔", "香蕉和燕麦"]),
        ("u7", "在咖啡馆画街景", "两个小时，一杯澳白", ["手绘"], ["街景铅笔速写", "咖啡桌上的速写本"]),
    ],
}
COMMENTS = {
    "en": [
        "Saving this for my trip!",
        "This looks amazing",
        "Where is this?",
        "Need the recipe!",
        "So good",
        "Love the colours",
        "Trying this tomorrow",
        "Thanks for sharing",
        "Goals",
        "How long did it take?",
    ],
    "zh": [
        "码住了，下次去！",
        "太好看了吧",
        "这是在哪里呀？",
        "求配方！",
        "绝了",
        "好喜欢这个色调",
        "明天就试试",
        "感谢分享",
        "羡慕了",
        "大概花了多长时间？",
    ],
}
SPAM = {
    "en": "Earn $500 a day from home!! Text me at {phone}",
    "zh": "兼职刷单日赚500，在家就能做，加我电话{phone}",
}
# Where each note was posted from (the 小红书 "IP属地" line / the location tag).
PLACES = {
    "en": ["Seattle", "Austin", "Chicago", "Denver", "Boston", "Portland"],
    "zh": ["北京", "上海", "广东", "浙江", "四川", "湖北"],
}
# Seeded notifications of the Activity / 消息 tab: (kind, user index, note index)
ACTIVITY_KINDS = ["like", "save", "follow", "comment"]
REPORT_REASONS = {
    "spam": ("Spam", "垃圾广告"),
    "harassment": ("Harassment", "人身攻击"),
    "false_info": ("False information", "虚假信息"),
    "inappropriate": ("Inappropriate content", "色情低俗"),
    "other": ("Something else", "其他"),
}
FEATURED_SIZE = 5
FRESH_PER_REFRESH = 2


# -- names shared by pages and task templates ------------------------------------------
def count_label(n: int, lang: str) -> str:
    if lang == "zh":
        return f"{n / 10000:.1f}万" if n >= 10000 else str(n)
    return f"{n:,}"


def age_label(minutes: int, lang: str) -> str:
    if minutes <= 0:
        return "刚刚" if lang == "zh" else "just now"
    if minutes < 60:
        return f"{minutes}分钟前" if lang == "zh" else f"{minutes}m"
    if minutes < 24 * 60:
        return f"{minutes // 60}小时前" if lang == "zh" else f"{minutes // 60}h"
    return f"{minutes // 1440}天前" if lang == "zh" else f"{minutes // 1440}d"


def card_name(note: dict, author: dict, lang: str) -> str:
    """The feed card of a note (a link): title, author and likes in one name."""
    if lang == "zh":
        return f"{note['title']}，{author['name']}，{count_label(note['likes'], lang)}赞"
    return f"{note['title']}, by {author['name']}, {count_label(note['likes'], lang)} likes"


def featured_name(i: int, n: int, title: str, lang: str) -> str:
    return f"精选 {i}/{n}：{title}" if lang == "zh" else f"Featured {i} of {n}: {title}"


def photo_name(i: int, n: int, caption: str, lang: str) -> str:
    return f"图片 {i}/{n}：{caption}" if lang == "zh" else f"Photo {i} of {n}: {caption}"


def comment_name(author: dict, text: str, lang: str) -> str:
    return f"{author['name']}的评论：{text}" if lang == "zh" else f"Comment by {author['name']}: {text}"


def like_name(note: dict, liked: bool, lang: str) -> str:
    n = count_label(note["likes"], lang)
    if lang == "zh":
        return f"已点赞 {n}" if liked else f"点赞 {n}"
    return f"Unlike, {n} likes" if liked else f"Like, {n} likes"


def save_name(note: dict, saved: bool, lang: str) -> str:
    n = count_label(note["saves"], lang)
    if lang == "zh":
        return f"已收藏 {n}" if saved else f"收藏 {n}"
    return f"Saved, {n} saves" if saved else f"Save, {n} saves"


def follow_name(user: dict, following: bool, lang: str) -> str:
    if lang == "zh":
        return f"已关注{user['name']}" if following else f"关注{user['name']}"
    return f"Following {user['name']}" if following else f"Follow {user['name']}"
