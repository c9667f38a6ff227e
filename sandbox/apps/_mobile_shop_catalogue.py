"""The mobile shop's catalogue (products, variants, sellers, shipping, promotions,
coupons, tracking events, people) and its money and "sold" formatting."""

from __future__ import annotations

APP = "mobile_shop"

# (key, family, English name, Chinese name, USD, CNY, icon, variant kind, weight range g)
CATALOGUE = [
    (
        "earbuds-pro",
        "earbuds",
        "Nimbus Pro Wireless Earbuds",
        "远山Pro真无线蓝牙耳机",
        59.99,
        229,
        "headphones",
        "color",
        (40, 60),
    ),
    (
        "earbuds-lite",
        "earbuds",
        "Luma Lite Wireless Earbuds",
        "木棉Lite半入耳蓝牙耳机",
        24.99,
        99,
        "headphones",
        "color",
        (35, 50),
    ),
    (
        "mouse-air",
        "mouse",
        "Orbit Air Wireless Mouse",
        "星辰轻薄静音无线鼠标",
        19.99,
        49,
        "mouse",
        "color",
        (60, 85),
    ),
    (
        "mouse-ergo",
        "mouse",
        "Kestrel Ergo Wireless Mouse",
        "晨曦人体工学无线鼠标",
        34.99,
        119,
        "mouse",
        "color",
        (95, 130),
    ),
    (
        "charger-65",
        "charger",
        "Peak 65W GaN Charger",
        "极光65W氮化镓快充头",
        32.99,
        109,
        "charger",
        "color",
        (110, 150),
    ),
    (
        "charger-20",
        "charger",
        "Zentra 20W USB-C Charger",
        "云雀20W苹果快充头",
        12.99,
        35,
        "charger",
        "color",
        (30, 45),
    ),
    (
        "bank-10k",
        "powerbank",
        "Orbit 10000mAh Power Bank",
        "星辰10000毫安充电宝",
        27.99,
        79,
        "battery",
        "color",
        (180, 230),
    ),
    ("band-fit", "watch", "Luma Fit Band 3", "木棉运动手环3", 39.99, 169, "watch", "color", (20, 35)),
    (
        "bottle-steel",
        "bottle",
        "Trail Insulated Bottle 750ml",
        "远山316不锈钢保温杯750ml",
        21.99,
        69,
        "bottle",
        "color",
        (320, 420),
    ),
    (
        "bottle-kids",
        "bottle",
        "Peak Kids Water Bottle",
        "飞鱼儿童吸管水杯",
        14.99,
        45,
        "bottle",
        "color",
        (180, 260),
    ),
    (
        "mug-glass",
        "mug",
        "Aster Double-Wall Glass Mug",
        "青松双层隔热玻璃杯",
        16.99,
        39,
        "mug",
        "color",
        (210, 300),
    ),
    (
        "lamp-clip",
        "lamp",
        "Luma Clip-on Reading Lamp",
        "木棉夹子护眼台灯",
        18.99,
        59,
        "lamp",
        "color",
        (150, 240),
    ),
    (
        "tee-basic",
        "tshirt",
        "Luma Cotton Crew T-Shirt",
        "木棉纯棉圆领短袖T恤",
        14.99,
        39,
        "shirt",
        "size",
        (150, 190),
    ),
    (
        "tee-sport",
        "tshirt",
        "Vortex Quick-Dry Sports Tee",
        "飞鱼冰丝速干运动T恤",
        19.99,
        59,
        "shirt",
        "size",
        (110, 150),
    ),
    (
        "shoe-run",
        "shoes",
        "Vortex Cloud Running Shoes",
        "飞鱼云感缓震跑步鞋",
        79.99,
        329,
        "shoe",
        "size",
        (230, 290),
    ),
    (
        "bag-mini",
        "backpack",
        "Orbit Mini Daypack",
        "星辰轻便通勤双肩包",
        34.99,
        129,
        "backpack",
        "color",
        (380, 520),
    ),
    (
        "mat-yoga",
        "yogamat",
        "Peak Non-slip Yoga Mat",
        "飞鱼加厚防滑瑜伽垫",
        22.99,
        69,
        "mat",
        "color",
        (900, 1300),
    ),
    (
        "pan-wok",
        "pan",
        "Kestrel Nonstick Wok",
        "晨曦麦饭石不粘炒锅",
        39.99,
        139,
        "pan",
        "color",
        (1100, 1600),
    ),
]

# What a shopper types to find a family (en, zh); the search also matches names.
FAMILY_QUERY = {
    "earbuds": ("earbuds", "蓝牙耳机"),
    "mouse": ("mouse", "无线鼠标"),
    "charger": ("charger", "充电器"),
    "powerbank": ("power bank", "充电宝"),
    "watch": ("fitness band", "手环"),
    "bottle": ("water bottle", "水杯"),
    "mug": ("glass mug", "玻璃杯"),
    "lamp": ("lamp", "台灯"),
    "tshirt": ("t-shirt", "T恤"),
    "shoes": ("running shoes", "跑步鞋"),
    "backpack": ("backpack", "双肩包"),
    "yogamat": ("yoga mat", "瑜伽垫"),
    "pan": ("wok", "炒锅"),
}
# The home screen's shortcut row: (label en, label zh, family)
SHORTCUTS = [
    ("Earbuds", "耳机", "earbuds"),
    ("Chargers", "充电器", "charger"),
    ("Bottles", "水杯", "bottle"),
    ("Tees", "T恤", "tshirt"),
]

VARIANTS = {
    "color": (["Black", "White", "Blue", "Pink"], ["黑色", "白色", "蓝色", "粉色"]),
    "size": (["S", "M", "L", "XL"], ["S码", "M码", "L码", "XL码"]),
}
VARIANT_LABEL = {"color": ("Color", "颜色分类"), "size": ("Size", "尺码")}

SELLERS = {
    "en": [
        "ShopGo Mall",
        "TechHub Outlet",
        "GadgetWorld",
        "BestValue Store",
        "Urban Supply Co.",
        "Daily Deals Shop",
    ],
    "zh": ["{brand}官方旗舰店", "百亿补贴专营店", "优品数码专营店", "百货优选店", "星河生活馆", "好物直营店"],
}
SHIPPING = {
    "en": ["Free shipping", "Free 2-day shipping", "$2.99 shipping"],
    "zh": ["包邮", "包邮 · 次日达", "运费¥3"],
}

# The home banner's promotions, one product each.
PROMOS = {
    "en": ["Flash deal", "Brand week", "New arrival", "Clearance"],
    "zh": ["限时秒杀", "品牌特卖", "新品首发", "清仓特惠"],
}

# (code, title en, title zh, min spend USD, off USD, min spend CNY, off CNY)
COUPONS = [
    ("NEW5", "$5 off orders over $25", "满30减5", 25, 5, 30, 5),
    ("TECH8", "$8 off electronics over $40", "数码满99减10", 40, 8, 99, 10),
    ("HOME6", "$6 off home goods over $30", "家居满79减8", 30, 6, 79, 8),
    ("BIG20", "$20 off orders over $120", "满399减50", 120, 20, 399, 50),
]

# A parcel's life; the order in transit has revealed a prefix, each refresh one more.
TRACKING = {
    "en": [
        ("Shipped", "Your parcel was handed to {carrier} in {origin}"),
        ("In transit", "Departed the {origin} sorting center"),
        ("Arrived at hub", "Arrived at the {city} distribution hub"),
        ("Out for delivery", "Courier {courier} is delivering your parcel"),
        ("Delivered", "Left at the front door"),
    ],
    "zh": [
        ("已发货", "商家已发货，包裹已交给{carrier}（{origin}）"),
        ("运输中", "快件已从【{origin}转运中心】发出"),
        ("到达中转站", "快件已到达【{city}转运中心】"),
        ("派送中", "快递员{courier}正在为您派件，请保持电话畅通"),
        ("已签收", "您的快件已签收，签收人：本人"),
    ],
}
CARRIERS = {"en": ["UPS", "FedEx", "USPS"], "zh": ["中通快递", "圆通速递", "顺丰速运"]}
ORIGINS = {"en": ["Memphis", "Louisville", "Dallas"], "zh": ["杭州", "广州", "义乌"]}
CITIES = {"en": ["Springfield", "Riverside", "Madison"], "zh": ["上海", "成都", "武汉"]}
COURIERS = {"en": ["Alex", "Jamie", "Morgan"], "zh": ["王师傅", "李师傅", "陈师傅"]}
SHOPPER = {"en": ["Jordan Miller", "Avery Johnson", "Casey Brooks"], "zh": ["李明", "王芳", "张伟"]}
PINYIN = {"李明": "liming", "王芳": "wangfang", "张伟": "zhangwei"}
GIFT_RECIPIENT = {"en": ["Morgan Lee", "Taylor Reed"], "zh": ["陈静", "赵磊"]}


# -- formatting --------------------------------------------------------------------
def money(value: float, lang: str) -> str:
    """$24.99 in English; ¥59 (¥59.5 when there are fen) in Chinese."""
    if lang == "zh":
        return f"¥{int(value)}" if value == int(value) else f"¥{value:g}"
    return f"${value:,.2f}"


def sold_label(n: int, lang: str) -> str:
    if lang == "zh":
        return f"已拼{n / 10000:.1f}万件".replace(".0万", "万") if n >= 10000 else f"已拼{n}件"
    return f"{n:,} sold"
