"""The shop's catalogue (product models, sellers, coupons, reviews, names) and the
formatting its pages and task templates share (see `sandbox.apps.shop`)."""

from __future__ import annotations

# -- catalogue ---------------------------------------------------------------------
# (key, family key, category key, English name, Chinese name, USD, CNY, icon, variant kind)
CATALOGUE = [
    (
        "mouse-m200",
        "mouse",
        "electronics",
        "Acme Wireless Mouse M200",
        "极光无线鼠标M200",
        24.99,
        59,
        "mouse",
        "color",
    ),
    (
        "mouse-silent",
        "mouse",
        "electronics",
        "Zentra Silent Wireless Mouse",
        "云雀静音无线鼠标",
        19.99,
        45,
        "mouse",
        "color",
    ),
    (
        "mouse-ergo",
        "mouse",
        "electronics",
        "Orbit Ergonomic Wireless Mouse",
        "星辰人体工学无线鼠标",
        39.99,
        129,
        "mouse",
        "color",
    ),
    (
        "kb-tkl",
        "keyboard",
        "electronics",
        "Vortex TKL Mechanical Keyboard",
        "飞鱼87键机械键盘",
        69.99,
        299,
        "keyboard",
        "color",
    ),
    (
        "kb-full",
        "keyboard",
        "electronics",
        "Kestrel RGB Mechanical Keyboard",
        "晨曦RGB机械键盘",
        89.99,
        399,
        "keyboard",
        "color",
    ),
    (
        "hp-nc700",
        "headphones",
        "electronics",
        "Nimbus NC700 Noise Cancelling Headphones",
        "远山NC700降噪蓝牙耳机",
        149.99,
        699,
        "headphones",
        "color",
    ),
    (
        "hp-sport",
        "headphones",
        "electronics",
        "Luma Sport Wireless Headphones",
        "木棉运动蓝牙耳机",
        49.99,
        199,
        "headphones",
        "color",
    ),
    (
        "hp-studio",
        "headphones",
        "electronics",
        "Aster Studio Over-Ear Headphones",
        "青松头戴式蓝牙耳机",
        99.99,
        459,
        "headphones",
        "color",
    ),
    (
        "chg-65w",
        "charger",
        "electronics",
        "Peak 65W USB-C Charger",
        "极光65W氮化镓充电器",
        34.99,
        119,
        "charger",
        "color",
    ),
    (
        "chg-20w",
        "charger",
        "electronics",
        "Zentra 20W Fast Charger",
        "云雀20W快充充电器",
        15.99,
        39,
        "charger",
        "color",
    ),
    (
        "pb-10k",
        "powerbank",
        "electronics",
        "Orbit 10000mAh Power Bank",
        "星辰10000毫安充电宝",
        29.99,
        89,
        "battery",
        "color",
    ),
    (
        "watch-fit",
        "watch",
        "electronics",
        "Luma Fit Smart Watch",
        "木棉运动智能手表",
        79.99,
        349,
        "watch",
        "color",
    ),
    (
        "watch-pro",
        "watch",
        "electronics",
        "Kestrel Pro Smart Watch",
        "晨曦Pro智能手表",
        199.99,
        999,
        "watch",
        "color",
    ),
    (
        "bottle-steel",
        "bottle",
        "home",
        "Trail Steel Water Bottle",
        "远山不锈钢保温杯",
        22.99,
        79,
        "bottle",
        "color",
    ),
    (
        "bottle-sport",
        "bottle",
        "home",
        "Peak Sport Water Bottle",
        "飞鱼大容量保温杯",
        17.99,
        59,
        "bottle",
        "color",
    ),
    ("mug-ceramic", "mug", "home", "Aster Ceramic Coffee Mug", "青松陶瓷马克杯", 12.99, 35, "mug", "color"),
    ("press-french", "coffee", "home", "Nimbus French Press", "远山法压壶", 27.99, 89, "mug", "color"),
    ("lamp-led", "lamp", "home", "Luma LED Desk Lamp", "木棉LED护眼台灯", 32.99, 129, "lamp", "color"),
    ("lamp-arch", "lamp", "home", "Orbit Arch Desk Lamp", "星辰落地式台灯", 59.99, 259, "lamp", "color"),
    (
        "pan-nonstick",
        "pan",
        "home",
        "Kestrel Nonstick Frying Pan",
        "晨曦不粘炒锅",
        36.99,
        149,
        "pan",
        "color",
    ),
    (
        "book-river",
        "book",
        "books",
        "The River Between Us (Paperback)",
        "《山海之间》平装版",
        14.99,
        42,
        "book",
        None,
    ),
    (
        "book-stars",
        "book",
        "books",
        "A Field Guide to Small Stars",
        "《星空下的小镇》",
        18.99,
        38,
        "book",
        None,
    ),
    (
        "book-code",
        "book",
        "books",
        "Practical Python Projects",
        "《Python编程实战》",
        39.99,
        89,
        "book",
        None,
    ),
    (
        "book-bread",
        "book",
        "books",
        "Bread Every Day: A Baking Book",
        "《家常面点100例》",
        24.99,
        49,
        "book",
        None,
    ),
    ("yoga-6mm", "yogamat", "sports", "Peak 6mm Yoga Mat", "飞鱼6mm加厚瑜伽垫", 25.99, 69, "mat", "color"),
    (
        "yoga-cork",
        "yogamat",
        "sports",
        "Trail Cork Yoga Mat",
        "远山天然软木瑜伽垫",
        44.99,
        169,
        "mat",
        "color",
    ),
    (
        "shoe-road",
        "shoes",
        "sports",
        "Vortex Road Running Shoes",
        "飞鱼缓震跑步鞋",
        89.99,
        399,
        "shoe",
        "size",
    ),
    (
        "shoe-trail",
        "shoes",
        "sports",
        "Trail Runner GTX Running Shoes",
        "远山越野跑步鞋",
        119.99,
        569,
        "shoe",
        "size",
    ),
    (
        "dumbbell-adj",
        "dumbbell",
        "sports",
        "Aster Adjustable Dumbbells",
        "青松可调节哑铃",
        79.99,
        299,
        "dumbbell",
        None,
    ),
    (
        "tee-cotton",
        "tshirt",
        "clothing",
        "Luma Organic Cotton T-Shirt",
        "木棉纯棉短袖T恤",
        16.99,
        49,
        "shirt",
        "size",
    ),
    (
        "hoodie-fleece",
        "hoodie",
        "clothing",
        "Nimbus Fleece Hoodie",
        "远山加绒连帽卫衣",
        44.99,
        159,
        "shirt",
        "size",
    ),
    (
        "bag-commute",
        "backpack",
        "clothing",
        "Orbit Commuter Backpack",
        "星辰通勤双肩包",
        49.99,
        179,
        "backpack",
        "color",
    ),
    (
        "bag-hike",
        "backpack",
        "clothing",
        "Trail 30L Hiking Backpack",
        "远山30L登山双肩包",
        64.99,
        239,
        "backpack",
        "color",
    ),
]

# What a shopper would type to find a family, per language (used by tasks).
FAMILY_QUERY = {
    "mouse": ("wireless mouse", "无线鼠标"),
    "keyboard": ("mechanical keyboard", "机械键盘"),
    "headphones": ("headphones", "蓝牙耳机"),
    "charger": ("charger", "充电器"),
    "watch": ("smart watch", "智能手表"),
    "bottle": ("water bottle", "保温杯"),
    "lamp": ("desk lamp", "台灯"),
    "yogamat": ("yoga mat", "瑜伽垫"),
    "shoes": ("running shoes", "跑步鞋"),
    "backpack": ("backpack", "双肩包"),
    "powerbank": ("power bank", "充电宝"),
    "mug": ("mug", "马克杯"),
    "coffee": ("french press", "法压壶"),
    "pan": ("frying pan", "炒锅"),
    "book": ("book", "图书"),
    "dumbbell": ("dumbbells", "哑铃"),
    "tshirt": ("t-shirt", "T恤"),
    "hoodie": ("hoodie", "卫衣"),
}

CATEGORIES = {
    "electronics": ("Electronics", "数码"),
    "home": ("Home & Kitchen", "家居"),
    "books": ("Books", "图书"),
    "sports": ("Sports & Outdoors", "运动"),
    "clothing": ("Clothing & Bags", "服饰箱包"),
}

VARIANTS = {
    "color": (["Black", "White", "Gray", "Blue"], ["黑色", "白色", "灰色", "蓝色"]),
    "size": (["S", "M", "L", "XL"], ["S码", "M码", "L码", "XL码"]),
}
VARIANT_LABEL = {"color": ("Color", "颜色分类"), "size": ("Size", "尺码")}

SELLERS_EN = [
    "Shoply",
    "TechHub Outlet",
    "GadgetWorld",
    "BestValue Store",
    "Urban Supply Co.",
    "Northwind Traders",
]
SELLERS_ZH = ["{brand}官方旗舰店", "京选自营", "优品数码专营店", "百货优选店", "星河生活馆", "好物直营店"]

# (code, English title, Chinese title, minimum spend, amount off), in the language's currency.
COUPONS = {
    "en": [
        ("WELCOME5", "$5 off orders over $25", 25, 5),
        ("SAVE10", "$10 off orders over $50", 50, 10),
        ("TECH15", "$15 off orders over $100", 100, 15),
        ("BIG30", "$30 off orders over $200", 200, 30),
    ],
    "zh": [
        ("MJ50-5", "满50减5", 50, 5),
        ("MJ99-10", "满99减10", 99, 10),
        ("MJ200-30", "满200减30", 200, 30),
        ("MJ500-60", "满500减60", 500, 60),
    ],
}

REVIEWS = {
    "en": [
        (5, "Does exactly what it says. Very happy with it."),
        (4, "Good value for the price, shipping took a few days."),
        (5, "Bought a second one for my office."),
        (3, "It's okay. The finish feels a bit cheap."),
        (4, "Solid build and works as expected."),
        (2, "Stopped working properly after a month."),
        (5, "Great quality, would buy again."),
        (4, "Nice, but the color is darker than in the photos."),
    ],
    "zh": [
        (5, "质量很好，和描述一致，物流也快，好评！"),
        (4, "性价比挺高的，包装有点简陋。"),
        (5, "第二次回购了，家里人都说好用。"),
        (3, "一般般吧，做工还可以再提升。"),
        (4, "用了一周，没什么问题，推荐。"),
        (2, "用了一个月就有点小毛病，客服回复慢。"),
        (5, "颜值很高，手感不错，五星好评！"),
        (4, "实物比图片颜色深一点，整体满意。"),
    ],
}
REVIEWERS = {
    "en": ["Sam K.", "Priya R.", "Tom H.", "Lena M.", "Diego A.", "Grace W.", "Omar F.", "Hannah B."],
    "zh": ["小***鱼", "t***8", "爱***活", "匿***户", "w***2", "快***人", "阳***天", "j***y"],
}
SHOPPER = {
    "en": ["Jordan Miller", "Avery Johnson", "Casey Brooks", "Riley Carter"],
    "zh": ["李明", "王芳", "张伟", "刘洋"],
}
PINYIN = {"李明": "liming", "王芳": "wangfang", "张伟": "zhangwei", "刘洋": "liuyang"}
GIFT_RECIPIENT = {"en": ["Morgan Lee", "Taylor Reed", "Jamie Fox"], "zh": ["陈静", "赵磊", "孙丽"]}


# -- formatting shared by pages and tasks ------------------------------------------
def money(value: float, lang: str) -> str:
    """$24.99 in English; ¥59 (or ¥59.5) in Chinese."""
    if lang == "zh":
        return f"¥{value:.2f}".rstrip("0").rstrip(".") if value != int(value) else f"¥{int(value)}"
    return f"${value:,.2f}"


def sold_label(n: int, lang: str) -> str:
    if lang == "zh":
        if n >= 10000:
            return f"已售{n / 10000:.1f}万+".replace(".0万", "万")
        return f"已售{n}"
    return f"{n:,} sold"


def product_name(p: dict) -> str:
    return p["name"]
