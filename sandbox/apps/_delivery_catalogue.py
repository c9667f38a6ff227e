"""Delivery's catalogue: shops and their menus, option kinds, fees, order
statuses and the names of people (see `sandbox.apps.delivery`)."""

from __future__ import annotations

# -- catalogue -------------------------------------------------------------------------
# Option kinds: each is a list of groups (label, choices, extra price per choice),
# per language. The first choice of a group is the default.
OPTION_KINDS = {
    "en": {
        "meal": [
            ("Size", ["Regular", "Large"], [0, 2.0]),
            ("Spice level", ["Mild", "Medium", "Hot", "Extra hot"], [0, 0, 0, 0]),
        ],
        "size": [("Size", ["Regular", "Large"], [0, 2.5])],
        "drink": [
            ("Size", ["Small", "Medium", "Large"], [0, 0.5, 1.0]),
            ("Ice", ["Regular ice", "Light ice", "No ice"], [0, 0, 0]),
        ],
    },
    "zh": {
        "meal": [
            ("份量", ["小份", "大份"], [0, 6]),
            ("辣度", ["不辣", "微辣", "中辣", "特辣"], [0, 0, 0, 0]),
        ],
        "size": [("份量", ["小份", "大份"], [0, 5])],
        "drink": [
            ("杯型", ["中杯", "大杯"], [0, 3]),
            ("甜度", ["全糖", "半糖", "少糖", "无糖"], [0, 0, 0, 0]),
        ],
    },
}

CATEGORIES = {
    "en": [("burgers", "Burgers"), ("pizza", "Pizza"), ("asian", "Asian"), ("coffee", "Coffee & Tea")],
    "zh": [("chuan", "川湘菜"), ("noodles", "米粉面馆"), ("chicken", "炸鸡汉堡"), ("tea", "奶茶果汁")],
}

# (category, shop name, [(menu section, [(dish, base price, option kind or None)])])
SHOPS = {
    "en": [
        (
            "burgers",
            "Patty Shack",
            [
                (
                    "Burgers",
                    [
                        ("ShackBurger", 8.99, "size"),
                        ("Smoke Stack", 10.49, "size"),
                        ("Chicken Sandwich", 9.29, "meal"),
                    ],
                ),
                ("Sides", [("Fries", 3.99, "size"), ("Cheese Fries", 5.49, None)]),
                ("Drinks", [("Coke", 2.49, None), ("Vanilla Shake", 5.79, None)]),
            ],
        ),
        (
            "burgers",
            "Grill Brothers",
            [
                (
                    "Burgers",
                    [
                        ("Classic Cheeseburger", 9.49, "size"),
                        ("Bacon Burger", 11.29, "size"),
                        ("Hot Chicken Sandwich", 10.99, "meal"),
                    ],
                ),
                ("Sides", [("Fries", 3.49, "size"), ("Onion Rings", 4.99, None)]),
                ("Drinks", [("Coke", 2.29, None), ("Lemonade", 3.29, None)]),
            ],
        ),
        (
            "burgers",
            "Green Bun",
            [
                ("Burgers", [("Veggie Burger", 10.99, "size"), ("Falafel Wrap", 9.79, "meal")]),
                ("Sides", [("Sweet Potato Fries", 4.49, "size"), ("Caesar Salad", 9.49, None)]),
                ("Drinks", [("Coke", 2.59, None), ("Iced Tea", 2.99, None)]),
            ],
        ),
        (
            "pizza",
            "Tony's Pizzeria",
            [
                ("Pizza", [("Margherita Pizza", 13.99, "size"), ("Pepperoni Pizza", 15.49, "size")]),
                ("Sides", [("Garlic Knots", 5.99, None), ("Caesar Salad", 8.99, None)]),
                ("Drinks", [("Coke", 2.49, None)]),
            ],
        ),
        (
            "pizza",
            "Slice Society",
            [
                (
                    "Pizza",
                    [("Buffalo Chicken Pizza", 16.99, "meal"), ("Veggie Supreme Pizza", 15.99, "size")],
                ),
                ("Wings", [("Chicken Wings", 11.99, "meal"), ("Mozzarella Sticks", 6.99, None)]),
                ("Drinks", [("Root Beer", 2.29, None)]),
            ],
        ),
        (
            "pizza",
            "Brick Oven Co.",
            [
                ("Pizza", [("Four Cheese Pizza", 14.99, "size"), ("Spicy Salami Pizza", 16.49, "meal")]),
                ("Desserts", [("Tiramisu", 6.49, None), ("Cannoli", 4.99, None)]),
                ("Drinks", [("Sparkling Water", 2.49, None)]),
            ],
        ),
        (
            "asian",
            "Golden Wok",
            [
                (
                    "Mains",
                    [
                        ("Kung Pao Chicken", 13.99, "meal"),
                        ("Orange Chicken", 12.99, "size"),
                        ("Beef Lo Mein", 12.49, "meal"),
                    ],
                ),
                ("Sides", [("Spring Rolls", 5.49, None), ("Fried Rice", 8.99, "size")]),
                ("Drinks", [("Jasmine Tea", 2.49, None)]),
            ],
        ),
        (
            "asian",
            "Pho Corner",
            [
                ("Pho", [("Beef Pho", 13.49, "size"), ("Chicken Pho", 12.49, "size")]),
                ("Sandwiches", [("Banh Mi", 9.99, "meal"), ("Spring Rolls", 5.99, None)]),
                ("Drinks", [("Thai Iced Tea", 4.49, "drink")]),
            ],
        ),
        (
            "asian",
            "Sushi Zen",
            [
                (
                    "Rolls",
                    [
                        ("California Roll", 8.99, None),
                        ("Spicy Tuna Roll", 10.49, "meal"),
                        ("Salmon Nigiri", 7.99, None),
                    ],
                ),
                ("Soups", [("Miso Soup", 3.49, None)]),
                ("Drinks", [("Green Tea", 2.29, None)]),
            ],
        ),
        (
            "coffee",
            "Bean There",
            [
                (
                    "Coffee",
                    [
                        ("Iced Latte", 5.49, "drink"),
                        ("Cold Brew", 4.99, "drink"),
                        ("Cappuccino", 4.79, "drink"),
                    ],
                ),
                ("Bakery", [("Blueberry Muffin", 3.49, None), ("Croissant", 3.49, None)]),
            ],
        ),
        (
            "coffee",
            "Boba Bliss",
            [
                (
                    "Milk Tea",
                    [
                        ("Brown Sugar Boba", 6.49, "drink"),
                        ("Taro Milk Tea", 5.99, "drink"),
                        ("Thai Iced Tea", 5.49, "drink"),
                    ],
                ),
                ("Slush", [("Mango Slush", 6.29, "drink")]),
            ],
        ),
        (
            "coffee",
            "Daily Grind",
            [
                (
                    "Coffee",
                    [
                        ("Iced Latte", 5.29, "drink"),
                        ("Matcha Latte", 5.79, "drink"),
                        ("Americano", 3.99, "drink"),
                    ],
                ),
                ("Bakery", [("Croissant", 3.29, None), ("Banana Bread", 3.79, None)]),
            ],
        ),
    ],
    "zh": [
        (
            "chuan",
            "川味小馆",
            [
                (
                    "招牌菜",
                    [("宫保鸡丁饭", 22, "meal"), ("鱼香肉丝饭", 20, "meal"), ("水煮牛肉", 38, "meal")],
                ),
                ("主食", [("米饭", 2, None), ("酸辣粉", 14, "meal")]),
                ("饮品", [("冰粉", 8, None), ("可乐", 4, None)]),
            ],
        ),
        (
            "chuan",
            "湘里人家",
            [
                (
                    "招牌菜",
                    [("小炒黄牛肉", 36, "meal"), ("农家小炒肉", 28, "meal"), ("剁椒鱼头", 58, "size")],
                ),
                ("主食", [("米饭", 2, None), ("辣椒炒蛋饭", 18, "meal")]),
                ("饮品", [("酸梅汤", 6, None)]),
            ],
        ),
        (
            "chuan",
            "蜀香麻辣烫",
            [
                ("热销", [("麻辣烫", 25, "meal"), ("麻辣香锅", 32, "meal"), ("酸辣粉", 12, "meal")]),
                ("小吃", [("红糖糍粑", 10, None)]),
                ("饮品", [("可乐", 4, None)]),
            ],
        ),
        (
            "noodles",
            "兰州牛肉面",
            [
                ("面食", [("牛肉拉面", 18, "meal"), ("牛肉炒面", 20, "meal")]),
                ("小菜", [("凉拌牛肉", 16, None), ("卤蛋", 3, None)]),
                ("饮品", [("可乐", 4, None)]),
            ],
        ),
        (
            "noodles",
            "螺蛳粉研究所",
            [
                ("招牌", [("原味螺蛳粉", 16, "meal"), ("炸蛋螺蛳粉", 19, "meal"), ("酸辣粉", 13, "meal")]),
                ("加料", [("炸蛋", 3, None), ("腐竹", 3, None)]),
                ("饮品", [("柠檬茶", 8, None)]),
            ],
        ),
        (
            "noodles",
            "老北京炸酱面",
            [
                ("面食", [("炸酱面", 22, "size"), ("打卤面", 20, "size"), ("麻酱凉面", 16, "meal")]),
                ("小吃", [("卤煮", 28, None)]),
                ("饮品", [("北冰洋汽水", 5, None)]),
            ],
        ),
        (
            "chicken",
            "炸鸡研究社",
            [
                ("炸鸡", [("韩式甜辣炸鸡", 39, "meal"), ("香辣鸡腿堡", 18, "meal")]),
                ("小食", [("薯条", 9, "size"), ("鸡米花", 12, None)]),
                ("饮品", [("可乐", 5, None)]),
            ],
        ),
        (
            "chicken",
            "汉堡工坊",
            [
                (
                    "汉堡",
                    [("牛肉芝士堡", 26, "size"), ("双层牛肉堡", 35, "size"), ("香辣鸡腿堡", 17, "meal")],
                ),
                ("小食", [("薯条", 10, "size"), ("洋葱圈", 12, None)]),
                ("饮品", [("可乐", 5, None)]),
            ],
        ),
        (
            "chicken",
            "脆皮鸡饭",
            [
                ("主食", [("脆皮鸡腿饭", 19, "meal"), ("照烧鸡排饭", 22, "size")]),
                ("小食", [("薯条", 8, "size"), ("奥尔良鸡翅", 15, None)]),
                ("饮品", [("柠檬茶", 8, None)]),
            ],
        ),
        (
            "tea",
            "茶百味",
            [
                (
                    "人气推荐",
                    [("杨枝甘露", 16, "drink"), ("珍珠奶茶", 12, "drink"), ("芝芝莓莓", 19, "drink")],
                ),
                ("纯茶", [("茉莉绿茶", 9, "drink"), ("柠檬茶", 11, "drink")]),
            ],
        ),
        (
            "tea",
            "鲜果时光",
            [
                (
                    "鲜果茶",
                    [("满杯百香果", 14, "drink"), ("多肉葡萄", 18, "drink"), ("珍珠奶茶", 13, "drink")],
                ),
                ("果切", [("西瓜果切", 15, None)]),
            ],
        ),
        (
            "tea",
            "咖啡小站",
            [
                ("咖啡", [("生椰拿铁", 18, "drink"), ("美式咖啡", 12, "drink"), ("拿铁", 16, "drink")]),
                ("甜点", [("提拉米苏", 22, None)]),
            ],
        ),
    ],
}

DELIVERY_FEES = {"en": [0, 0.99, 1.49, 1.99, 2.49, 2.99, 3.49, 3.99], "zh": [0, 1, 1.5, 2, 2.5, 3, 3.5, 4, 5]}
MIN_ORDER = {"en": [10, 12, 15], "zh": [15, 20, 25]}

# Order statuses, in the order a delivery goes through them.
STATUS = {
    "pending_payment": ("Pending payment", "待支付"),
    "accepted": ("Order confirmed", "商家已接单"),
    "picked_up": ("Dasher picked up your order", "骑手已取餐"),
    "on_the_way": ("On the way", "骑手配送中"),
    "delivered": ("Delivered", "已送达"),
    "cancelled": ("Cancelled", "已取消"),
    "paid": ("Paid", "已支付"),
}
PROGRESS = ["accepted", "picked_up", "on_the_way", "delivered"]
ACTIVE = {"accepted", "picked_up", "on_the_way"}

ADDRESS_TAGS = {"en": ["Home", "Work", "Gym"], "zh": ["家", "公司", "学校"]}
TABLEWARE_MAX = 5  # 0 means "no utensils" / 无需餐具
NOTE_MAX = 50

USERS = {"en": ["Jordan Miller", "Avery Johnson", "Casey Brooks"], "zh": ["李明", "王芳", "张伟"]}
PINYIN = {"李明": "liming", "王芳": "wangfang", "张伟": "zhangwei"}
RIDERS = {"en": ["Mike", "Ana", "Devon", "Priya"], "zh": ["王师傅", "刘师傅", "陈师傅", "赵师傅"]}
CONTACT_NAMES = {"en": ["Morgan Lee", "Taylor Reed", "Jamie Fox"], "zh": ["陈静", "赵磊", "孙丽"]}
