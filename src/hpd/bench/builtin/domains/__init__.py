"""The built-in domains. Each module exposes DOMAIN, TOOLS, ASKS (parallel) and CHAINS (sequential)."""

from . import mathunits, shop, travel, weather

MODULES = {m.DOMAIN: m for m in (weather, shop, travel, mathunits)}

# Each domain's tools file also lists one tool of another domain as a distractor, mirroring TRAJECT's
# mixed-domain catalog files (its "domain name" stays the owning domain).
FOREIGN = {
    "Weather": ("WorldClock: local_time",),
    "Shop": ("MoneyX: convert_currency",),
    "Travel": ("WeatherHub: current_weather",),
    "Math": ("GeoLookup: city_coordinates",),
}
