"""The seeded world behind the simulated tools: cities, stations, products, orders, hotels.

Static facts (city coordinates, IATA codes, UTC offsets, currencies, exchange rates) are fixed
tables (approximate real values, DST ignored). Everything else (weather, stations, products,
orders, hotels, flights) is derived from ``world_seed`` with SHA-256 hashing, never Python's salted
``hash()``, so every tool output is a pure function of (world_seed, tool, arguments).
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass

# name, country, code, lat, lon, iata, utc offset (h), currency
CITIES = [
    ("Oslo", "Norway", "NO", 59.91, 10.75, "OSL", 1, "NOK"),
    ("Paris", "France", "FR", 48.86, 2.35, "CDG", 1, "EUR"),
    ("Berlin", "Germany", "DE", 52.52, 13.40, "BER", 1, "EUR"),
    ("Madrid", "Spain", "ES", 40.42, -3.70, "MAD", 1, "EUR"),
    ("Rome", "Italy", "IT", 41.90, 12.50, "FCO", 1, "EUR"),
    ("London", "United Kingdom", "GB", 51.51, -0.13, "LHR", 0, "GBP"),
    ("Dublin", "Ireland", "IE", 53.35, -6.26, "DUB", 0, "EUR"),
    ("Lisbon", "Portugal", "PT", 38.72, -9.14, "LIS", 0, "EUR"),
    ("Reykjavik", "Iceland", "IS", 64.15, -21.94, "KEF", 0, "ISK"),
    ("Cairo", "Egypt", "EG", 30.04, 31.24, "CAI", 2, "EGP"),
    ("Nairobi", "Kenya", "KE", -1.29, 36.82, "NBO", 3, "KES"),
    ("Dubai", "United Arab Emirates", "AE", 25.20, 55.27, "DXB", 4, "AED"),
    ("Mumbai", "India", "IN", 19.08, 72.88, "BOM", 5.5, "INR"),
    ("Bangkok", "Thailand", "TH", 13.76, 100.50, "BKK", 7, "THB"),
    ("Singapore", "Singapore", "SG", 1.35, 103.82, "SIN", 8, "SGD"),
    ("Tokyo", "Japan", "JP", 35.68, 139.69, "HND", 9, "JPY"),
    ("Seoul", "South Korea", "KR", 37.57, 126.98, "ICN", 9, "KRW"),
    ("Sydney", "Australia", "AU", -33.87, 151.21, "SYD", 10, "AUD"),
    ("Auckland", "New Zealand", "NZ", -36.85, 174.76, "AKL", 12, "NZD"),
    ("Toronto", "Canada", "CA", 43.65, -79.38, "YYZ", -5, "CAD"),
    ("Chicago", "United States", "US", 41.88, -87.63, "ORD", -6, "USD"),
    ("Denver", "United States", "US", 39.74, -104.99, "DEN", -7, "USD"),
    ("Seattle", "United States", "US", 47.61, -122.33, "SEA", -8, "USD"),
    ("Mexico City", "Mexico", "MX", 19.43, -99.13, "MEX", -6, "MXN"),
    ("Lima", "Peru", "PE", -12.05, -77.04, "LIM", -5, "PEN"),
    ("Buenos Aires", "Argentina", "AR", -34.60, -58.38, "EZE", -3, "ARS"),
]
# units of currency per 1 USD (fixed, approximate)
RATES = {"USD": 1.0, "EUR": 0.92, "GBP": 0.79, "NOK": 10.6, "ISK": 138.0, "EGP": 48.0, "KES": 129.0,
         "AED": 3.67, "INR": 83.2, "THB": 36.5, "SGD": 1.35, "JPY": 151.0, "KRW": 1350.0, "AUD": 1.52,
         "NZD": 1.66, "CAD": 1.37, "MXN": 17.1, "PEN": 3.75, "ARS": 870.0}
TODAY = "2025-06-01"          # the simulated "now" (current weather, order ETAs)
CATEGORIES = ["headphones", "laptop", "backpack", "coffee maker", "running shoes", "desk lamp",
              "water bottle", "keyboard"]
_BRANDS = ["Aero", "Nova", "Terra", "Zen", "Pulse", "Vivid"]
_PRICE = {"headphones": (39, 249), "laptop": (499, 1899), "backpack": (29, 129),
          "coffee maker": (49, 299), "running shoes": (59, 189), "desk lamp": (19, 89),
          "water bottle": (9, 39), "keyboard": (25, 179)}
_WEIGHT = {"headphones": 0.3, "laptop": 1.8, "backpack": 0.9, "coffee maker": 3.2,
           "running shoes": 0.8, "desk lamp": 1.1, "water bottle": 0.4, "keyboard": 0.9}
COUPONS = {"SAVE10": 10, "SPRING15": 15, "WELCOME5": 5, "VIP20": 20, "FLASH25": 25}
_HOTEL_WORDS = ["Grand", "Harbor", "Garden", "Central", "Royal", "Park", "River", "Sky"]
_STREETS = ["Main St", "King Rd", "Lake Ave", "Market St", "Hill Rd", "Station Sq"]
ORDER_STATUSES = ["processing", "shipped", "out for delivery", "delivered"]


@dataclass(frozen=True)
class City:
    name: str
    country: str
    code: str
    lat: float
    lon: float
    iata: str
    tz: float
    currency: str


class World:
    """All seeded tables; build with :func:`get_world` (cached per seed)."""

    def __init__(self, seed: int = 0):
        self.seed = int(seed)
        self.cities = [City(*c) for c in CITIES]
        self.city_by_key = {c.name.lower(): c for c in self.cities}
        self.city_by_iata = {c.iata: c for c in self.cities}
        self.stations = {}          # id -> dict(name, city, lat, lon)
        for c in self.cities:
            for k, label in enumerate(("North", "Airport")):
                sid = self._unique_id("ST", 1000, 9000, self.stations, c.name, label)
                dlat = (self.u(c.name, label, "dlat") - 0.5) * 0.4
                dlon = (self.u(c.name, label, "dlon") - 0.5) * 0.4
                self.stations[sid] = {"name": f"{c.name} {label}", "city": c.name,
                                      "lat": round(c.lat + dlat, 3), "lon": round(c.lon + dlon, 3)}
        self.products = {}
        for cat in CATEGORIES:
            lo, hi = _PRICE[cat]
            for b in _BRANDS:
                pid = self._unique_id("P", 1000, 9000, self.products, cat, b)
                price = round(lo + (hi - lo) * self.u(cat, b, "price")) - 0.01
                self.products[pid] = {"name": f"{b} {cat.title()}", "category": cat,
                                      "price": round(price, 2),
                                      "rating": round(3.0 + 2.0 * self.u(cat, b, "rating"), 1),
                                      "stock": self.i(0, 40, cat, b, "stock"),
                                      "weight_kg": _WEIGHT[cat]}
        pids = sorted(self.products)
        self.orders = {}
        for k in range(40):
            oid = self._unique_id("ORD-", 10000, 90000, self.orders, "order", k)
            self.orders[oid] = {"product_id": pids[self.i(0, len(pids) - 1, "order-p", k)],
                                "status": ORDER_STATUSES[self.i(0, 3, "order-s", k)],
                                "eta": f"2025-06-{self.i(2, 14, 'order-eta', k):02d}"}
        self.hotels = {}
        for c in self.cities:
            words = sorted(_HOTEL_WORDS, key=lambda w: self.u(c.name, w, "hotel"))[:3]
            for w in words:
                hid = self._unique_id("H", 100, 900, self.hotels, c.name, w)
                self.hotels[hid] = {"name": f"{w} Hotel {c.name}", "city": c.name,
                                    "price_usd": self.i(60, 320, c.name, w, "hp"),
                                    "stars": self.i(2, 5, c.name, w, "stars"),
                                    "rating": round(6.0 + 4.0 * self.u(c.name, w, "hr"), 1),
                                    "address": f"{self.i(1, 199, c.name, w, 'no')} "
                                               f"{_STREETS[self.i(0, 5, c.name, w, 'st')]}"}

    # --- hashing helpers -------------------------------------------------------------
    def h(self, *parts) -> int:
        s = "|".join([str(self.seed)] + [str(p) for p in parts])
        return int.from_bytes(hashlib.sha256(s.encode()).digest()[:8], "big")

    def u(self, *parts) -> float:
        """Uniform in [0, 1)."""
        return self.h(*parts) / 2.0**64

    def i(self, lo: int, hi: int, *parts) -> int:
        """Integer in [lo, hi]."""
        return lo + self.h(*parts) % (hi - lo + 1)

    def _unique_id(self, prefix, lo, span, table, *parts) -> str:
        k = 0
        while True:
            cand = f"{prefix}{lo + self.h('id', *parts, k) % span}"
            if cand not in table:
                return cand
            k += 1

    # --- lookups (raise KeyError-free ValueErrors in the tools) ------------------------
    def city(self, name: str) -> City | None:
        return self.city_by_key.get(str(name).strip().lower())


@functools.lru_cache(maxsize=8)
def get_world(seed: int = 0) -> World:
    return World(seed)
