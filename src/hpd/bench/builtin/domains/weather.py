"""Weather domain: current conditions, forecasts, stations, alerts, sun times, climate class."""

from __future__ import annotations

import datetime as dt
import math

from ..registry import Param, ToolDef, ToolInputError, num
from ..spec import Adapt, Ask, Chain, ChainResult, pick
from ..world import TODAY

DOMAIN = "Weather"
_CONDITIONS = ["sunny", "partly cloudy", "cloudy", "light rain", "windy", "showers"]
_ALERTS = ["heat", "wind", "flood", "thunderstorm", "fog", "air quality"]


def _city(w, name):
    c = w.city(name)
    if c is None:
        raise ToolInputError(f"city {name!r} not found; use a city name such as 'Oslo'")
    return c


def _temp_c(w, c, date, tag=""):
    doy = dt.date.fromisoformat(date).timetuple().tm_yday
    season = math.cos(2 * math.pi * (doy - 196) / 365) * (1 if c.lat >= 0 else -1)
    t = 31 - 0.3 * abs(c.lat) + 9 * season * min(abs(c.lat), 60) / 60
    return round(t + (w.u(c.name, date, tag, "t") - 0.5) * 8, 1)


def _cond(w, c, date, t):
    cond = _CONDITIONS[w.h(c.name, date, "cond") % len(_CONDITIONS)]
    return "snow" if t < 0.5 and cond in ("light rain", "showers") else cond


def current_weather(w, city, units="metric"):
    c = _city(w, city)
    t = _temp_c(w, c, TODAY)
    temp, unit = (t, "C") if units == "metric" else (num(t * 9 / 5 + 32, 1), "F")
    return {"city": c.name, "temp": temp, "unit": unit, "condition": _cond(w, c, TODAY, t),
            "humidity": w.i(30, 95, c.name, TODAY, "hum")}


def forecast(w, city, days=3):
    c = _city(w, city)
    if not (isinstance(days, int) or float(days).is_integer()) or not 1 <= int(days) <= 5:
        raise ToolInputError(f"WeatherHub: forecast: 'days' must be an integer 1-5, got {days!r}")
    out = []
    for k in range(1, int(days) + 1):
        d = (dt.date.fromisoformat(TODAY) + dt.timedelta(days=k)).isoformat()
        hi = _temp_c(w, c, d, "hi") + 3
        out.append({"date": d, "high": num(hi, 1), "low": num(hi - w.i(4, 10, c.name, d, "r"), 1),
                    "condition": _cond(w, c, d, hi)})
    return {"city": c.name, "forecast": out}


def air_quality(w, city):
    c = _city(w, city)
    aqi = w.i(12, 175, c.name, TODAY, "aqi")
    cat = "good" if aqi <= 50 else "moderate" if aqi <= 100 else "sensitive" if aqi <= 150 else "unhealthy"
    return {"city": c.name, "aqi": aqi, "category": cat, "pm25": num(aqi * 0.36, 1)}


def _hm(hours):
    hours %= 24
    h = int(hours)
    return f"{h:02d}:{int(round((hours - h) * 60)) % 60:02d}"


def sunrise_sunset(w, city, date):
    c = _city(w, city)
    doy = dt.date.fromisoformat(date).timetuple().tm_yday
    decl = math.radians(23.44) * math.sin(2 * math.pi * (doy - 81) / 365)
    x = -math.tan(math.radians(c.lat)) * math.tan(decl)
    half = math.degrees(math.acos(max(-1.0, min(1.0, x)))) / 15      # half day length, hours
    noon = 12 - c.lon / 15 + c.tz
    return {"city": c.name, "date": date, "sunrise": _hm(noon - half), "sunset": _hm(noon + half),
            "daylight_h": num(2 * half, 1)}


def city_coordinates(w, city):
    c = _city(w, city)
    return {"city": c.name, "country": c.country, "lat": c.lat, "lon": c.lon}


def _check_latlon(lat, lon):
    if not (-90 <= lat <= 90 and -180 <= lon <= 180):
        raise ToolInputError(f"coordinates out of range: lat={lat}, lon={lon}")


def _dist_km(a_lat, a_lon, b_lat, b_lon):
    p1, p2 = math.radians(a_lat), math.radians(b_lat)
    dp, dl = p2 - p1, math.radians(b_lon - a_lon)
    a = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * 6371 * math.asin(math.sqrt(a))


def nearest_station(w, lat, lon):
    _check_latlon(lat, lon)
    sid, s = min(w.stations.items(), key=lambda kv: (_dist_km(lat, lon, kv[1]["lat"], kv[1]["lon"]), kv[0]))
    return {"station_id": sid, "name": s["name"], "city": s["city"],
            "distance_km": num(_dist_km(lat, lon, s["lat"], s["lon"]), 1)}


def observation(w, station_id):
    s = w.stations.get(station_id.upper())
    if s is None:
        raise ToolInputError(f"station {station_id!r} not found; station ids look like 'ST1234'")
    c = w.city(s["city"])
    return {"station_id": station_id.upper(),
            "temp_c": num(_temp_c(w, c, TODAY) + (w.u(station_id, "dt") - 0.5) * 2, 1),
            "wind_kph": w.i(0, 45, station_id, "wind"), "pressure_hpa": w.i(990, 1030, station_id, "p")}


def active_alerts(w, country):
    key = country.strip().lower()
    match = [c for c in w.cities if key in (c.country.lower(), c.code.lower())]
    if not match:
        raise ToolInputError(f"country {country!r} not found; use a country name such as 'Norway'")
    c = match[0]
    alerts = [{"type": _ALERTS[w.h(c.country, "a", k) % len(_ALERTS)],
               "level": ["yellow", "orange", "red"][w.h(c.country, "l", k) % 3]}
              for k in range(w.i(0, 2, c.country, "n"))]
    return {"country": c.country, "count": len(alerts), "alerts": alerts}


def koppen_class(w, lat, lon):
    _check_latlon(lat, lon)
    a, odd = abs(lat), (int(abs(lon)) % 2 == 1)
    code = ("Af" if odd else "Aw") if a < 15 else "BWh" if a < 28 else ("Cfa" if odd else "Csa") if a < 42 \
        else ("Cfb" if odd else "Dfb") if a < 56 else "Dfc" if a < 66 else "ET"
    label = {"Af": "tropical rainforest", "Aw": "tropical savanna", "BWh": "hot desert",
             "Cfa": "humid subtropical", "Csa": "mediterranean", "Cfb": "oceanic",
             "Dfb": "humid continental", "Dfc": "subarctic", "ET": "tundra"}[code]
    return {"lat": lat, "lon": lon, "koppen": code, "label": label}


P = Param
_CITY = P("city", "STRING", "", "Oslo")
_LAT = P("lat", "NUMBER", "", 59.91)
_LON = P("lon", "NUMBER", "", 10.75)
_HUB = "Current conditions, short forecasts, air quality and sun times for world cities."
_GEO = "Geocoding and weather-station lookup."
TOOLS = [
    ToolDef("WeatherHub", "current_weather", DOMAIN, "Current temperature, condition and humidity in a city.",
            _HUB, current_weather, (_CITY,),
            (P("units", "ENUM", "Unit system.", "metric", ("metric", "imperial")),)),
    ToolDef("WeatherHub", "forecast", DOMAIN, "Daily high/low and condition for the next 1-5 days.",
            _HUB, forecast, (_CITY,), (P("days", "NUMBER", "Days, 1-5.", 3),)),
    ToolDef("WeatherHub", "air_quality", DOMAIN, "Air quality index (AQI), category and PM2.5 for a city.",
            _HUB, air_quality, (_CITY,)),
    ToolDef("WeatherHub", "sunrise_sunset", DOMAIN, "Local sunrise, sunset and daylight hours on a date.",
            _HUB, sunrise_sunset, (_CITY, P("date", "DATE (YYYY-MM-DD)", "", "2025-06-21"))),
    ToolDef("GeoLookup", "city_coordinates", DOMAIN, "Country, latitude and longitude of a city.",
            _GEO, city_coordinates, (_CITY,),
            connected=(("GeoLookup: nearest_station", ("lat", "lon")),
                       ("ClimateAtlas: koppen_class", ("lat", "lon")),
                       ("MeteoAlerts: active_alerts", ("country",)))),
    ToolDef("GeoLookup", "nearest_station", DOMAIN, "The weather station closest to a coordinate.",
            _GEO, nearest_station, (_LAT, _LON),
            connected=(("StationData: observation", ("station_id",)),
                       ("WeatherHub: current_weather", ("city",)))),
    ToolDef("StationData", "observation", DOMAIN, "Latest temperature, wind and pressure at a station.",
            "Raw observations from weather stations.", observation,
            (P("station_id", "STRING", "", "ST1234"),)),
    ToolDef("MeteoAlerts", "active_alerts", DOMAIN, "Active weather warnings for a country.",
            "National weather warnings.", active_alerts,
            (P("country", "STRING", "Country name or code.", "Norway"),)),
    ToolDef("ClimateAtlas", "koppen_class", DOMAIN, "Koppen climate class of a coordinate.",
            "Long-term climate classification.", koppen_class, (_LAT, _LON)),
]


# ----------------------------------------------------------------------------- parallel asks

def _date(rng):
    return (dt.date(2025, 6, 1) + dt.timedelta(days=rng.randrange(92))).isoformat()


def ask_current(rng, w):
    c = pick(rng, w.cities).name
    units = pick(rng, [None, "metric", "imperial"])
    args = {"city": c} | ({"units": units} if units else {})
    sfx_s = f" in {units} units" if units else ""
    sfx_h = {"imperial": " in Fahrenheit", "metric": " in Celsius", None: ""}[units]
    return Ask("WeatherHub: current_weather", args, f"get the current weather in {c}{sfx_s}",
               f"tell me how warm it is in {c} right now{sfx_h}",
               lambda o: f"It is {o['temp']}°{o['unit']} and {o['condition']} in {o['city']} "
                         f"(humidity {o['humidity']}%).")


def ask_forecast(rng, w):
    c, d = pick(rng, w.cities).name, rng.randint(2, 4)
    return Ask("WeatherHub: forecast", {"city": c, "days": d}, f"get the {d}-day forecast for {c}",
               f"let me know what the next {d} days look like in {c}",
               lambda o: f"{o['city']} forecast: " + "; ".join(
                   f"{x['date']} high {x['high']} low {x['low']} {x['condition']}" for x in o["forecast"]) + ".")


def ask_air(rng, w):
    c = pick(rng, w.cities).name
    return Ask("WeatherHub: air_quality", {"city": c}, f"check the air quality in {c}",
               f"tell me whether the air in {c} is OK to breathe today",
               lambda o: f"Air quality in {o['city']} is {o['category']} (AQI {o['aqi']}, PM2.5 {o['pm25']}).")


def ask_sun(rng, w):
    c, d = pick(rng, w.cities).name, _date(rng)
    return Ask("WeatherHub: sunrise_sunset", {"city": c, "date": d},
               f"get the sunrise and sunset times for {c} on {d}",
               f"find out when the sun comes up and goes down in {c} on {d}",
               lambda o: f"On {o['date']} the sun rises at {o['sunrise']} and sets at {o['sunset']} "
                         f"in {o['city']} ({o['daylight_h']} h of daylight).")


def ask_coords(rng, w):
    c = pick(rng, w.cities).name
    return Ask("GeoLookup: city_coordinates", {"city": c}, f"look up the coordinates of {c}",
               f"tell me where exactly {c} lies on the map",
               lambda o: f"{o['city']} ({o['country']}) is at latitude {o['lat']}, longitude {o['lon']}.")


def ask_alerts(rng, w):
    c = pick(rng, w.cities).country
    return Ask("MeteoAlerts: active_alerts", {"country": c}, f"list the active weather alerts for {c}",
               f"tell me whether any weather warnings are in force in {c}",
               lambda o: f"{o['country']} has {o['count']} active alert(s)" + (
                   ": " + ", ".join(f"{a['level']} {a['type']}" for a in o["alerts"]) if o["alerts"] else "") + ".")


def ask_obs(rng, w):
    sid = pick(rng, sorted(w.stations))
    return Ask("StationData: observation", {"station_id": sid}, f"get the latest observation from station {sid}",
               f"tell me what weather station {sid} is reporting",
               lambda o: f"Station {o['station_id']} reports {o['temp_c']}°C, wind {o['wind_kph']} km/h "
                         f"and {o['pressure_hpa']} hPa.")


def ask_koppen(rng, w):
    c = pick(rng, w.cities)
    return Ask("ClimateAtlas: koppen_class", {"lat": c.lat, "lon": c.lon},
               f"get the Koppen climate class for {c.lat}, {c.lon}",
               f"tell me what kind of climate the spot at {c.lat}, {c.lon} has",
               lambda o: f"The climate at {o['lat']}, {o['lon']} is {o['koppen']} ({o['label']}).")


ASKS = [ask_current, ask_forecast, ask_air, ask_sun, ask_coords, ask_alerts, ask_obs, ask_koppen]


# ----------------------------------------------------------------------------- sequential chains

def _w1(rng, w, r):
    city = pick(rng, w.cities).name
    co = r.step("GeoLookup: city_coordinates", {"city": city},
                f"Look up {city}'s coordinates and pass 'lat' and 'lon' on.", "lat, lon")
    st = r.step("GeoLookup: nearest_station", {"lat": co["lat"], "lon": co["lon"]},
                "Use the coordinates from step 1 to find the nearest station; pass its 'station_id'.",
                "station_id", [Adapt("lat", "latitude of the city", 1), Adapt("lon", "longitude of the city", 1)])
    ob = r.step("StationData: observation", {"station_id": st["station_id"]},
                "Fetch the latest observation of the station found in step 2.", "",
                [Adapt("station_id", "the nearest station", 2)])
    return ChainResult(
        f"Look up the coordinates of {city}, find the weather station nearest to them, and get that "
        f"station's latest observation.",
        f"I'm heading to {city}. Which weather station is closest to the city, and what is it reporting?",
        f"{city} is at {co['lat']}, {co['lon']}. The nearest station is {st['name']} ({st['station_id']}, "
        f"{st['distance_km']} km away); it reports {ob['temp_c']}°C, wind {ob['wind_kph']} km/h and "
        f"{ob['pressure_hpa']} hPa.",
        "Coordinates fed the station search; the station id fed the observation call.")


def _w2(rng, w, r):
    city = pick(rng, w.cities).name
    co = r.step("GeoLookup: city_coordinates", {"city": city},
                f"Look up {city} to learn its country.", "country")
    al = r.step("MeteoAlerts: active_alerts", {"country": co["country"]},
                "List the warnings for the country found in step 1.", "",
                [Adapt("country", "country of the city", 1)])
    alerts = ", ".join(f"{a['level']} {a['type']}" for a in al["alerts"]) or "none"
    return ChainResult(
        f"Find out which country {city} is in, then list the active weather alerts for that country.",
        f"Are there any weather warnings in force in the country where {city} is?",
        f"{city} is in {co['country']}, which has {al['count']} active alert(s): {alerts}.",
        "The country from the city lookup was used for the alert query.")


def _w3(rng, w, r):
    city = pick(rng, w.cities).name
    co = r.step("GeoLookup: city_coordinates", {"city": city},
                f"Look up {city}'s coordinates.", "lat, lon")
    kc = r.step("ClimateAtlas: koppen_class", {"lat": co["lat"], "lon": co["lon"]},
                "Classify the climate at the coordinates from step 1.", "",
                [Adapt("lat", "latitude of the city", 1), Adapt("lon", "longitude of the city", 1)])
    return ChainResult(
        f"Get the coordinates of {city} and then the Koppen climate class at those coordinates.",
        f"What climate type does {city} have? Work it out from where the city is.",
        f"{city} lies at {co['lat']}, {co['lon']}; its Koppen class is {kc['koppen']} ({kc['label']}).",
        "The city's coordinates were classified.")


def _w4(rng, w, r):
    c = pick(rng, w.cities)
    lat, lon = round(c.lat + rng.uniform(-0.3, 0.3), 2), round(c.lon + rng.uniform(-0.3, 0.3), 2)
    st = r.step("GeoLookup: nearest_station", {"lat": lat, "lon": lon},
                "Find the station nearest to the given point; pass on its 'city'.", "city")
    cw = r.step("WeatherHub: current_weather", {"city": st["city"]},
                "Get the current weather in the station's city.", "city",
                [Adapt("city", "city of the nearest station", 1)])
    aq = r.step("WeatherHub: air_quality", {"city": st["city"]},
                "Check the air quality in the same city.", "", [Adapt("city", "city of the nearest station", 1)])
    return ChainResult(
        f"Find the weather station nearest to {lat}, {lon}, then get the current weather and the air "
        f"quality for that station's city.",
        f"I'm standing at {lat}, {lon}. Which city's station is closest, how is the weather there and "
        f"is the air clean?",
        f"The nearest station is {st['name']} in {st['city']} ({st['distance_km']} km). It is {cw['temp']}°"
        f"{cw['unit']} and {cw['condition']} there; air quality is {aq['category']} (AQI {aq['aqi']}).",
        "The station's city fed both city-level calls.")


def _w5(rng, w, r):
    a, b = rng.sample(w.cities, 2)
    d = _date(rng)
    wa = r.step("WeatherHub: current_weather", {"city": a.name}, f"Get the current weather in {a.name}.", "")
    wb = r.step("WeatherHub: current_weather", {"city": b.name}, f"Get the current weather in {b.name}.", "city")
    warm = wa if wa["temp"] >= wb["temp"] else wb
    ss = r.step("WeatherHub: sunrise_sunset", {"city": warm["city"], "date": d},
                "Get sun times for whichever city is warmer now.", "",
                [Adapt("city", "the warmer of the two cities", 1 if warm is wa else 2)])
    return ChainResult(
        f"Compare the current temperature in {a.name} and {b.name}, then get the sunrise and sunset "
        f"times on {d} for the warmer one.",
        f"Between {a.name} and {b.name}, which is warmer right now? For that one, when does the sun "
        f"rise and set on {d}?",
        f"{a.name} is {wa['temp']}°C and {b.name} is {wb['temp']}°C, so {warm['city']} is warmer. On {d} "
        f"the sun rises there at {ss['sunrise']} and sets at {ss['sunset']}.",
        "The warmer city was chosen from the two weather reports.")


def _w6(rng, w, r):
    city = pick(rng, w.cities).name
    days = rng.randint(2, 3)
    co = r.step("GeoLookup: city_coordinates", {"city": city}, f"Look up {city}'s coordinates.", "lat, lon")
    st = r.step("GeoLookup: nearest_station", {"lat": co["lat"], "lon": co["lon"]},
                "Find the station nearest to the city.", "station_id",
                [Adapt("lat", "latitude of the city", 1), Adapt("lon", "longitude of the city", 1)])
    ob = r.step("StationData: observation", {"station_id": st["station_id"]},
                "Read the station's latest observation.", "city", [Adapt("station_id", "the nearest station", 2)])
    fc = r.step("WeatherHub: forecast", {"city": st["city"], "days": days},
                "Get the forecast for the station's city.", "", [Adapt("city", "city of the station", 2)])
    hi = ", ".join(f"{x['date']} high {x['high']}" for x in fc["forecast"])
    return ChainResult(
        f"Get the coordinates of {city}, find the nearest weather station, read its latest observation, "
        f"and then get a {days}-day forecast for that station's city.",
        f"What does the weather station closest to {city} measure right now, and what do the next "
        f"{days} days hold for the city it belongs to?",
        f"The station nearest to {city} ({co['lat']}, {co['lon']}) is {st['station_id']} ({st['name']}), "
        f"reading {ob['temp_c']}°C and wind {ob['wind_kph']} km/h. Forecast for {st['city']}: {hi}.",
        "Coordinates -> station -> observation; the station's city fed the forecast.")


CHAINS = [
    Chain("City → Coordinates → Nearest station → Observation", "From a city name to a station reading.", _w1),
    Chain("City → Country → Weather alerts", "Country-level warnings for a city.", _w2),
    Chain("City → Coordinates → Climate class", "Climate class of a city's location.", _w3),
    Chain("Point → Nearest station → Current weather → Air quality", "Conditions near a coordinate.", _w4),
    Chain("Two cities → Warmer city → Sun times", "Pick the warmer city, then its sun times.", _w5),
    Chain("City → Coordinates → Station → Observation → Forecast", "Station reading plus outlook.", _w6),
]
