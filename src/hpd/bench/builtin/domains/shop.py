"""Shop domain: product search, details, stock, orders, coupons, shipping, reviews."""

from __future__ import annotations

import re

from ..registry import Param, ToolDef, ToolInputError, num
from ..spec import Adapt, Ask, Chain, ChainResult, pick
from ..world import CATEGORIES, COUPONS

DOMAIN = "Shop"
_REVIEW = ["solid build, does the job", "great value for the price", "stopped working after a month",
           "comfortable and light", "looks nicer than the photos", "arrived late but works well"]


def _product(w, pid):
    p = w.products.get(str(pid).strip().upper())
    if p is None:
        raise ToolInputError(f"product {pid!r} not found; product ids look like 'P1234'")
    return str(pid).strip().upper(), p


def search_products(w, query, max_results=3, sort_by="price"):
    words = [t for t in re.findall(r"[a-z]+", query.lower()) if t not in ("a", "the", "for")]
    if not words:
        raise ToolInputError("ShopAPI: search_products: 'query' needs at least one word")
    if not (1 <= int(max_results) <= 5):
        raise ToolInputError(f"ShopAPI: search_products: 'max_results' must be 1-5, got {max_results!r}")
    hits = [(pid, p) for pid, p in w.products.items()
            if all(t.rstrip("s") in (p["name"] + " " + p["category"]).lower() for t in words)]
    key = (lambda kv: (kv[1]["price"], kv[0])) if sort_by == "price" else (lambda kv: (-kv[1]["rating"], kv[0]))
    hits = sorted(hits, key=key)[: int(max_results)]
    return [{"id": pid, "name": p["name"], "price": p["price"], "rating": p["rating"]} for pid, p in hits]


def product_details(w, product_id):
    pid, p = _product(w, product_id)
    return {"id": pid, "name": p["name"], "category": p["category"], "price": p["price"],
            "rating": p["rating"], "stock": p["stock"]}


def check_stock(w, product_id, store="online"):
    pid, p = _product(w, product_id)
    qty = p["stock"] if store.lower() == "online" else w.i(0, 12, pid, store.lower(), "store")
    return {"product_id": pid, "store": store, "qty": qty, "in_stock": qty > 0}


def order_status(w, order_id):
    oid = str(order_id).strip().upper()
    o = w.orders.get(oid)
    if o is None:
        raise ToolInputError(f"order {order_id!r} not found; order ids look like 'ORD-12345'")
    return {"order_id": oid, "status": o["status"], "product_id": o["product_id"], "eta": o["eta"]}


def apply_coupon(w, price, code):
    if price <= 0:
        raise ToolInputError(f"ShopAPI: apply_coupon: 'price' must be positive, got {price!r}")
    pct = COUPONS.get(code.strip().upper())
    if pct is None:
        raise ToolInputError(f"coupon {code!r} is not valid")
    return {"code": code.strip().upper(), "discount_pct": pct, "final_price": num(price * (100 - pct) / 100)}


def shipping_quote(w, product_id, zip_code):
    pid, p = _product(w, product_id)
    if not re.fullmatch(r"\d{5}", zip_code):
        raise ToolInputError(f"zip code must have 5 digits, got {zip_code!r}")
    zone = int(zip_code[0])
    return {"product_id": pid, "zip_code": zip_code, "cost": num(4.99 + 1.2 * p["weight_kg"] + 0.5 * zone),
            "days": 2 + zone % 5}


def top_review(w, product_id):
    pid, p = _product(w, product_id)
    return {"product_id": pid, "stars": min(5, max(1, round(p["rating"] + (w.u(pid, "rv") - 0.5)))),
            "text": _REVIEW[w.h(pid, "txt") % len(_REVIEW)]}


def list_categories(w):
    return list(CATEGORIES)


P = Param
_PID = P("product_id", "STRING", "", "P1234")
_API = "A small online shop: catalog search, product data, orders, coupons and shipping."
TOOLS = [
    ToolDef("ShopAPI", "search_products", DOMAIN, "Search the catalog by keywords; returns id, name, price, rating.",
            _API, search_products, (P("query", "STRING", "", "backpack"),),
            (P("max_results", "NUMBER", "Results, 1-5.", 3),
             P("sort_by", "ENUM", "Sort order.", "price", ("price", "rating"))),
            connected=(("ShopAPI: product_details", ("product_id",)), ("Reviews: top_review", ("product_id",)))),
    ToolDef("ShopAPI", "product_details", DOMAIN, "Name, category, price, rating and stock of a product.",
            _API, product_details, (_PID,), connected=(("ShopAPI: apply_coupon", ("price",)),)),
    ToolDef("ShopAPI", "check_stock", DOMAIN, "Units in stock online or at a store city.",
            _API, check_stock, (_PID,), (P("store", "STRING", "'online' or a store city.", "online"),)),
    ToolDef("ShopAPI", "order_status", DOMAIN, "Status, product id and delivery date of an order.",
            _API, order_status, (P("order_id", "STRING", "", "ORD-12345"),),
            connected=(("ShopAPI: shipping_quote", ("product_id",)),)),
    ToolDef("ShopAPI", "apply_coupon", DOMAIN, "Price after applying a coupon code.",
            _API, apply_coupon, (P("price", "NUMBER", "", 100),
                                 P("code", "STRING", "", "SAVE10"))),
    ToolDef("ShopAPI", "shipping_quote", DOMAIN, "Shipping cost and days for a product to a zip code.",
            _API, shipping_quote, (_PID, P("zip_code", "STRING", "5-digit zip code.", "10001"))),
    ToolDef("Reviews", "top_review", DOMAIN, "The most helpful review of a product.",
            "Customer reviews.", top_review, (_PID,)),
    ToolDef("ShopAPI", "list_categories", DOMAIN, "All product categories.", _API, list_categories),
]


# ----------------------------------------------------------------------------- parallel asks

def _pid(rng, w):
    return pick(rng, sorted(w.products))


def ask_search(rng, w):
    cat = pick(rng, CATEGORIES)
    sort = pick(rng, ["price", "rating"])
    n = rng.randint(2, 3)
    args = {"query": cat, "max_results": n, "sort_by": sort}
    how_s = "cheapest" if sort == "price" else "best-rated"
    how_h = "lowest-priced" if sort == "price" else "highest-rated"
    return Ask("ShopAPI: search_products", args, f"search for the {n} {how_s} {cat} products",
               f"show me the top {n} {how_h} options if I want a {cat}",
               lambda o: f"Top {cat} results: " + "; ".join(f"{x['name']} ({x['id']}) {x['price']} rated "
                                                             f"{x['rating']}" for x in o) + ".")


def ask_details(rng, w):
    pid = _pid(rng, w)
    return Ask("ShopAPI: product_details", {"product_id": pid}, f"get the details of product {pid}",
               f"tell me what item {pid} is and what it costs",
               lambda o: f"{o['id']} is the {o['name']} ({o['category']}), {o['price']}, rated {o['rating']}, "
                         f"{o['stock']} in stock.")


def ask_stock(rng, w):
    pid = _pid(rng, w)
    store = pick(rng, ["online", "Chicago", "Denver", "Seattle", "Toronto"])
    return Ask("ShopAPI: check_stock", {"product_id": pid, "store": store},
               f"check the stock of {pid} at the {store} store" if store != "online" else f"check the online stock of {pid}",
               f"find out how many units of {pid} the {store} store has" if store != "online"
               else f"find out whether {pid} can be ordered online right now",
               lambda o: f"{o['product_id']} has {o['qty']} unit(s) at {o['store']}.")


def ask_order(rng, w):
    oid = pick(rng, sorted(w.orders))
    return Ask("ShopAPI: order_status", {"order_id": oid}, f"get the status of order {oid}",
               f"tell me where my order {oid} is",
               lambda o: f"Order {o['order_id']} ({o['product_id']}) is {o['status']}, expected {o['eta']}.")


def ask_coupon(rng, w):
    price = round(rng.uniform(20, 400), 2)
    code = pick(rng, sorted(COUPONS))
    return Ask("ShopAPI: apply_coupon", {"price": price, "code": code},
               f"apply coupon {code} to a price of {price}",
               f"work out what I pay for a {price} item with the code {code}",
               lambda o: f"With {o['code']} ({o['discount_pct']}% off) you pay {o['final_price']}.")


def ask_ship(rng, w):
    pid, z = _pid(rng, w), f"{rng.randint(10000, 99999)}"
    return Ask("ShopAPI: shipping_quote", {"product_id": pid, "zip_code": z},
               f"get a shipping quote for {pid} to zip code {z}",
               f"tell me what shipping {pid} to {z} costs and how long it takes",
               lambda o: f"Shipping {o['product_id']} to {o['zip_code']} costs {o['cost']} and takes {o['days']} days.")


def ask_review(rng, w):
    pid = _pid(rng, w)
    return Ask("Reviews: top_review", {"product_id": pid}, f"get the top review of {pid}",
               f"tell me what buyers say about {pid}",
               lambda o: f"Top review of {o['product_id']} ({o['stars']} stars): \"{o['text']}\".")


ASKS = [ask_search, ask_details, ask_stock, ask_order, ask_coupon, ask_ship, ask_review]


# ----------------------------------------------------------------------------- sequential chains

def _s1(rng, w, r):
    cat, code = pick(rng, CATEGORIES), pick(rng, sorted(COUPONS))
    res = r.step("ShopAPI: search_products", {"query": cat, "sort_by": "price"},
                 f"Search '{cat}' sorted by price; pass the cheapest 'id'.", "product_id")
    pid = res[0]["id"]
    de = r.step("ShopAPI: product_details", {"product_id": pid}, "Get details of the cheapest hit.", "price",
                [Adapt("product_id", "cheapest search result", 1)])
    cp = r.step("ShopAPI: apply_coupon", {"price": de["price"], "code": code},
                f"Apply {code} to the product's price.", "", [Adapt("price", "price of the product", 2)])
    return ChainResult(
        f"Search for the cheapest {cat}, get its details, and apply coupon {code} to its price.",
        f"I want the least expensive {cat} you sell. What is it, is it in stock, and what would I pay "
        f"with my {code} code?",
        f"The cheapest {cat} is the {de['name']} ({pid}) at {de['price']}, {de['stock']} in stock. With "
        f"{code} ({cp['discount_pct']}% off) it costs {cp['final_price']}.",
        "Cheapest search hit -> details -> coupon on its price.")


def _s2(rng, w, r):
    oid, z = pick(rng, sorted(w.orders)), f"{rng.randint(10000, 99999)}"
    os_ = r.step("ShopAPI: order_status", {"order_id": oid}, "Look up the order; pass its 'product_id'.",
                 "product_id")
    sq = r.step("ShopAPI: shipping_quote", {"product_id": os_["product_id"], "zip_code": z},
                f"Quote shipping of the ordered product to {z}.", "",
                [Adapt("product_id", "product of the order", 1)])
    return ChainResult(
        f"Get the status of order {oid}, then get a shipping quote for the same product to zip code {z}.",
        f"My order {oid}: where is it? I'd also like to send the same item to {z}; what would that cost?",
        f"Order {oid} ({os_['product_id']}) is {os_['status']}, expected {os_['eta']}. Shipping it to {z} "
        f"costs {sq['cost']} and takes {sq['days']} days.",
        "The order's product id fed the shipping quote.")


def _s3(rng, w, r):
    cat = pick(rng, CATEGORIES)
    res = r.step("ShopAPI: search_products", {"query": cat, "sort_by": "rating"},
                 f"Search '{cat}' sorted by rating; pass the best 'id'.", "product_id")
    rv = r.step("Reviews: top_review", {"product_id": res[0]["id"]}, "Read the top review of the best-rated hit.",
                "", [Adapt("product_id", "best-rated search result", 1)])
    return ChainResult(
        f"Find the best-rated {cat} and get its top review.",
        f"Which {cat} do customers like most, and what does its most helpful review say?",
        f"The best-rated {cat} is the {res[0]['name']} ({res[0]['id']}, rated {res[0]['rating']}). Top review "
        f"({rv['stars']} stars): \"{rv['text']}\".",
        "The best-rated hit's id fed the review lookup.")


def _s4(rng, w, r):
    oid, code = pick(rng, sorted(w.orders)), pick(rng, sorted(COUPONS))
    os_ = r.step("ShopAPI: order_status", {"order_id": oid}, "Look up the order; pass its 'product_id'.",
                 "product_id")
    de = r.step("ShopAPI: product_details", {"product_id": os_["product_id"]}, "Get the ordered product's price.",
                "price", [Adapt("product_id", "product of the order", 1)])
    cp = r.step("ShopAPI: apply_coupon", {"price": de["price"], "code": code},
                f"Apply {code} to that price.", "", [Adapt("price", "price of the product", 2)])
    return ChainResult(
        f"Check order {oid}, get the details of its product, and apply coupon {code} to the product's price.",
        f"What did I buy in order {oid}, and how much cheaper would it have been with {code}?",
        f"Order {oid} is the {de['name']} ({de['id']}) at {de['price']}, status {os_['status']}. With {code} "
        f"it would cost {cp['final_price']} ({cp['discount_pct']}% off).",
        "Order -> product -> price -> coupon.")


def _s5(rng, w, r):
    cat, store = pick(rng, CATEGORIES), pick(rng, ["Chicago", "Denver", "Seattle", "Toronto"])
    z = f"{rng.randint(10000, 99999)}"
    res = r.step("ShopAPI: search_products", {"query": cat, "sort_by": "price"},
                 f"Search '{cat}' by price; pass the cheapest 'id'.", "product_id")
    pid = res[0]["id"]
    st = r.step("ShopAPI: check_stock", {"product_id": pid, "store": store}, f"Check stock at {store}.",
                "product_id", [Adapt("product_id", "cheapest search result", 1)])
    sq = r.step("ShopAPI: shipping_quote", {"product_id": pid, "zip_code": z}, f"Quote shipping to {z}.", "",
                [Adapt("product_id", "cheapest search result", 1)])
    return ChainResult(
        f"Find the cheapest {cat}, check its stock at the {store} store, and get a shipping quote for it "
        f"to zip code {z}.",
        f"Cheapest {cat} please: can I pick it up in {store}, or what would delivery to {z} cost?",
        f"The cheapest {cat} is the {res[0]['name']} ({pid}, {res[0]['price']}). The {store} store has "
        f"{st['qty']} unit(s); shipping to {z} costs {sq['cost']} ({sq['days']} days).",
        "The cheapest hit's id fed both the stock check and the shipping quote.")


CHAINS = [
    Chain("Search → Cheapest product → Details → Coupon", "Best deal on the cheapest item.", _s1),
    Chain("Order → Product → Shipping quote", "Reship an ordered product.", _s2),
    Chain("Search → Best-rated product → Top review", "What buyers say about the favourite.", _s3),
    Chain("Order → Product details → Coupon", "What an order would cost with a coupon.", _s4),
    Chain("Search → Cheapest product → Store stock → Shipping", "Pick-up or delivery.", _s5),
]
