"""Travel domain: airports, flights, flight status, hotels, currency, local time."""

from __future__ import annotations

import datetime as dt
import re

from ..registry import Param, ToolDef, ToolInputError, num
from ..spec import Adapt, Ask, Chain, ChainResult, pick
from ..world import RATES
from .weather import _dist_km

DOMAIN = "Travel"
_AIRLINES = ["NX", "SK", "QA", "LF", "TR", "VB"]


def _city(w, name):
    c = w.city(name)
    if c is None:
        raise ToolInputError(f"city {name!r} not found; use a city name such as 'Lisbon'")
    return c


def _airport(w, code):
    c = w.city_by_iata.get(str(code).strip().upper())
    if c is None:
        raise ToolInputError(f"airport {code!r} not found; use a 3-letter IATA code such as 'LIS'")
    return c


def airport_code(w, city):
    c = _city(w, city)
    return {"city": c.name, "iata": c.iata}


def search_flights(w, origin, destination, date):
    a, b = _airport(w, origin), _airport(w, destination)
    if a is b:
        raise ToolInputError("origin and destination must differ")
    km = _dist_km(a.lat, a.lon, b.lat, b.lon)
    al = _AIRLINES[w.h(a.iata, b.iata, "al") % len(_AIRLINES)]
    mins = w.i(6 * 12, 21 * 12, a.iata, b.iata, date, "dep") * 5
    return {"flight": f"{al}{w.i(100, 999, a.iata, b.iata, date, 'no')}", "origin": a.iata,
            "destination": b.iata, "date": date, "depart": f"{mins // 60:02d}:{mins % 60:02d}",
            "duration_h": num(km / 800 + 0.5, 1),
            "price_usd": int(60 + km * 0.07 * (0.8 + 0.4 * w.u(a.iata, b.iata, date, "pr")))}


def flight_status(w, flight_number):
    f = str(flight_number).strip().upper()
    if not re.fullmatch(r"[A-Z]{2}\d{3}", f):
        raise ToolInputError(f"flight number must look like 'NX123', got {flight_number!r}")
    k = w.h(f, "st") % 4
    status = ["on time", "boarding", f"delayed {w.i(10, 90, f, 'dl')} min", "on time"][k]
    return {"flight": f, "status": status, "gate": f"{'ABCD'[w.h(f, 'g') % 4]}{w.i(1, 30, f, 'gn')}"}


def hotels_in_city(w, city, max_price=1000):
    c = _city(w, city)
    hs = sorted((h["price_usd"], hid) for hid, h in w.hotels.items()
                if h["city"] == c.name and h["price_usd"] <= max_price)
    return [{"hotel_id": hid, "name": w.hotels[hid]["name"], "price_usd": p} for p, hid in hs]


def hotel_details(w, hotel_id):
    h = w.hotels.get(str(hotel_id).strip().upper())
    if h is None:
        raise ToolInputError(f"hotel {hotel_id!r} not found; hotel ids look like 'H123'")
    return {"hotel_id": str(hotel_id).strip().upper(), "name": h["name"], "stars": h["stars"],
            "rating": h["rating"], "price_usd": h["price_usd"], "address": h["address"]}


def convert_currency(w, amount, from_currency, to_currency):
    f, t = from_currency.strip().upper(), to_currency.strip().upper()
    for x in (f, t):
        if x not in RATES:
            raise ToolInputError(f"unknown currency {x!r}; use a 3-letter code such as 'EUR'")
    return {"amount": amount, "from": f, "to": t, "result": num(amount / RATES[f] * RATES[t])}


def local_time(w, city, utc_time):
    c = _city(w, city)
    m = re.fullmatch(r"(\d{1,2}):(\d{2})", utc_time.strip())
    if not m or int(m[1]) > 23 or int(m[2]) > 59:
        raise ToolInputError(f"utc_time must be HH:MM, got {utc_time!r}")
    mins = (int(m[1]) * 60 + int(m[2]) + int(c.tz * 60)) % 1440
    return {"city": c.name, "utc": utc_time.strip(), "local": f"{mins // 60:02d}:{mins % 60:02d}",
            "offset_h": num(c.tz, 1)}


def visa_check(w, nationality, destination):
    a, b = nationality.strip().upper(), destination.strip().upper()
    codes = {c.code for c in w.cities}
    for x in (a, b):
        if x not in codes:
            raise ToolInputError(f"unknown country code {x!r}; use 2-letter codes such as 'FR'")
    free = a == b or w.u(*sorted((a, b)), "visa") < 0.6
    return {"nationality": a, "destination": b, "visa_required": not free,
            "max_stay_days": 90 if free else 0}


P = Param
_CITY = P("city", "STRING", "", "Lisbon")
_FL = "Flight search and live flight status."
_ST = "Hotel search and hotel details."
TOOLS = [
    ToolDef("SkyRoutes", "airport_code", DOMAIN, "Main airport IATA code of a city.", _FL, airport_code, (_CITY,),
            connected=(("SkyRoutes: search_flights", ("origin", "destination")),)),
    ToolDef("SkyRoutes", "search_flights", DOMAIN, "Cheapest flight between two airports on a date.", _FL,
            search_flights, (P("origin", "STRING", "Origin IATA code.", "LIS"),
                             P("destination", "STRING", "Destination IATA code.", "OSL"),
                             P("date", "DATE (YYYY-MM-DD)", "", "2025-07-01")),
            connected=(("SkyRoutes: flight_status", ("flight_number",)),
                       ("MoneyX: convert_currency", ("amount",)))),
    ToolDef("SkyRoutes", "flight_status", DOMAIN, "Live status and gate of a flight.", _FL, flight_status,
            (P("flight_number", "STRING", "", "NX123"),)),
    ToolDef("StayFinder", "hotels_in_city", DOMAIN, "Hotels in a city, cheapest first.", _ST, hotels_in_city,
            (_CITY,), (P("max_price", "NUMBER", "Max USD per night.", 1000),),
            connected=(("StayFinder: hotel_details", ("hotel_id",)),)),
    ToolDef("StayFinder", "hotel_details", DOMAIN, "Stars, rating, price and address of a hotel.", _ST,
            hotel_details, (P("hotel_id", "STRING", "", "H123"),)),
    ToolDef("MoneyX", "convert_currency", DOMAIN, "Convert an amount between currencies.",
            "Fixed-rate currency conversion.", convert_currency,
            (P("amount", "NUMBER", "", 100), P("from_currency", "STRING", "Currency code.", "USD"),
             P("to_currency", "STRING", "Currency code.", "EUR"))),
    ToolDef("WorldClock", "local_time", DOMAIN, "Local time in a city for a UTC time.", "Time zones.",
            local_time, (_CITY, P("utc_time", "STRING", "UTC time HH:MM.", "12:00"))),
    ToolDef("VisaInfo", "visa_check", DOMAIN, "Whether a visa is needed between two countries.",
            "Entry requirements.", visa_check,
            (P("nationality", "STRING", "2-letter country code.", "FR"),
             P("destination", "STRING", "2-letter country code.", "JP"))),
]


# ----------------------------------------------------------------------------- parallel asks

def _date(rng):
    return (dt.date(2025, 7, 1) + dt.timedelta(days=rng.randrange(120))).isoformat()


def ask_airport(rng, w):
    c = pick(rng, w.cities).name
    return Ask("SkyRoutes: airport_code", {"city": c}, f"get the airport code of {c}",
               f"tell me which airport code I should book for {c}",
               lambda o: f"{o['city']}'s airport code is {o['iata']}.")


def ask_flight(rng, w):
    a, b = rng.sample(w.cities, 2)
    d = _date(rng)
    return Ask("SkyRoutes: search_flights", {"origin": a.iata, "destination": b.iata, "date": d},
               f"search flights from {a.iata} to {b.iata} on {d}",
               f"find me the cheapest way to fly {a.iata}-{b.iata} on {d}",
               lambda o: f"The cheapest {o['origin']}-{o['destination']} flight on {o['date']} is {o['flight']} at "
                         f"{o['depart']} ({o['duration_h']} h) for {o['price_usd']} USD.")


def ask_status(rng, w):
    f = f"{pick(rng, _AIRLINES)}{rng.randint(100, 999)}"
    return Ask("SkyRoutes: flight_status", {"flight_number": f}, f"get the status of flight {f}",
               f"tell me if {f} is on schedule and which gate it uses",
               lambda o: f"Flight {o['flight']} is {o['status']} at gate {o['gate']}.")


def ask_hotels(rng, w):
    c = pick(rng, w.cities).name
    mp = pick(rng, [None, 150, 200, 250])
    args = {"city": c} | ({"max_price": mp} if mp else {})
    cap_s = f" under {mp} USD" if mp else ""
    cap_h = f" for at most {mp} dollars a night" if mp else ""
    return Ask("StayFinder: hotels_in_city", args, f"list hotels in {c}{cap_s}", f"find me somewhere to stay in {c}{cap_h}",
               lambda o: (f"Hotels in {c}: " + "; ".join(f"{h['name']} ({h['hotel_id']}) {h['price_usd']} USD"
                                                         for h in o) + ".") if o else f"No hotel in {c} fits.")


def ask_hotel(rng, w):
    hid = pick(rng, sorted(w.hotels))
    return Ask("StayFinder: hotel_details", {"hotel_id": hid}, f"get the details of hotel {hid}",
               f"tell me what hotel {hid} is like and where it is",
               lambda o: f"{o['hotel_id']} is the {o['name']}, {o['stars']} stars, rated {o['rating']}, "
                         f"{o['price_usd']} USD, at {o['address']}.")


def ask_money(rng, w):
    f, t = rng.sample(sorted(RATES), 2)
    amt = rng.choice([50, 100, 250, 500, 1200]) if rng.random() < 0.5 else round(rng.uniform(10, 900), 2)
    return Ask("MoneyX: convert_currency", {"amount": amt, "from_currency": f, "to_currency": t},
               f"convert {amt} {f} to {t}", f"tell me what {amt} {f} is worth in {t}",
               lambda o: f"{o['amount']} {o['from']} is {o['result']} {o['to']}.")


def ask_time(rng, w):
    c, t = pick(rng, w.cities).name, f"{rng.randint(0, 23):02d}:{pick(rng, ['00', '15', '30', '45'])}"
    return Ask("WorldClock: local_time", {"city": c, "utc_time": t}, f"get the local time in {c} at {t} UTC",
               f"tell me what the clocks in {c} show when it is {t} UTC",
               lambda o: f"At {o['utc']} UTC it is {o['local']} in {o['city']} (UTC{o['offset_h']:+}).")


def ask_visa(rng, w):
    a, b = rng.sample(sorted({c.code for c in w.cities}), 2)
    return Ask("VisaInfo: visa_check", {"nationality": a, "destination": b},
               f"check whether a citizen of {a} needs a visa for {b}",
               f"tell me if someone with a {a} passport can enter {b} without a visa",
               lambda o: f"A citizen of {o['nationality']} {'needs' if o['visa_required'] else 'does not need'} a "
                         f"visa for {o['destination']} (max stay {o['max_stay_days']} days).")


ASKS = [ask_airport, ask_flight, ask_status, ask_hotels, ask_hotel, ask_money, ask_time, ask_visa]


# ----------------------------------------------------------------------------- sequential chains

def _t1(rng, w, r):
    a, b = rng.sample(w.cities, 2)
    d = _date(rng)
    x = r.step("SkyRoutes: airport_code", {"city": a.name}, f"Get {a.name}'s airport code.", "origin")
    y = r.step("SkyRoutes: airport_code", {"city": b.name}, f"Get {b.name}'s airport code.", "destination")
    f = r.step("SkyRoutes: search_flights", {"origin": x["iata"], "destination": y["iata"], "date": d},
               "Search flights between the two airports.", "",
               [Adapt("origin", "airport of the origin city", 1), Adapt("destination", "airport of the destination city", 2)])
    return ChainResult(
        f"Get the airport codes of {a.name} and {b.name}, then search flights between them on {d}.",
        f"I need to get from {a.name} to {b.name} on {d}. What's the cheapest flight?",
        f"{a.name} is {x['iata']} and {b.name} is {y['iata']}. The cheapest flight on {d} is {f['flight']} at "
        f"{f['depart']} ({f['duration_h']} h) for {f['price_usd']} USD.",
        "Both airport codes fed the flight search.")


def _t2(rng, w, r):
    a, b = rng.sample(w.cities, 2)
    d = _date(rng)
    f = r.step("SkyRoutes: search_flights", {"origin": a.iata, "destination": b.iata, "date": d},
               "Find the cheapest flight; pass its number.", "flight_number")
    s = r.step("SkyRoutes: flight_status", {"flight_number": f["flight"]}, "Check that flight's status.", "",
               [Adapt("flight_number", "the cheapest flight", 1)])
    return ChainResult(
        f"Search flights from {a.iata} to {b.iata} on {d}, then check the status of the flight you find.",
        f"Is the cheapest {a.iata} to {b.iata} flight on {d} running on time, and from which gate?",
        f"The cheapest flight is {f['flight']} at {f['depart']} for {f['price_usd']} USD. It is {s['status']}, "
        f"gate {s['gate']}.",
        "The flight number from the search fed the status check.")


def _t3(rng, w, r):
    c = pick(rng, w.cities).name
    mp = pick(rng, [200, 250, 300])
    hs = r.step("StayFinder: hotels_in_city", {"city": c, "max_price": mp},
                f"List hotels in {c} under {mp}; pass the cheapest 'hotel_id'.", "hotel_id")
    if not hs:     # nothing under the cap: fall back to the unrestricted list
        hs = r.step("StayFinder: hotels_in_city", {"city": c}, f"List all hotels in {c}.", "hotel_id")
    h = r.step("StayFinder: hotel_details", {"hotel_id": hs[0]["hotel_id"]}, "Get the cheapest hotel's details.",
               "", [Adapt("hotel_id", "cheapest hotel", len(r.steps))])
    return ChainResult(
        f"List hotels in {c} under {mp} USD and get the details of the cheapest one.",
        f"What's the cheapest place to stay in {c} for at most {mp} dollars, and what is it like?",
        f"The cheapest hotel in {c} is the {h['name']} ({h['hotel_id']}) at {h['price_usd']} USD: {h['stars']} "
        f"stars, rated {h['rating']}, {h['address']}.",
        "The cheapest hotel id fed the details call.")


def _t4(rng, w, r):
    a, b = rng.sample(w.cities, 2)
    d, cur = _date(rng), b.currency if b.currency != "USD" else "EUR"
    f = r.step("SkyRoutes: search_flights", {"origin": a.iata, "destination": b.iata, "date": d},
               "Find the cheapest flight; pass its USD price.", "amount")
    m = r.step("MoneyX: convert_currency", {"amount": f["price_usd"], "from_currency": "USD", "to_currency": cur},
               f"Convert the fare to {cur}.", "", [Adapt("amount", "fare of the cheapest flight", 1)])
    return ChainResult(
        f"Search flights from {a.iata} to {b.iata} on {d} and convert the cheapest fare from USD to {cur}.",
        f"How much is the cheapest {a.iata}-{b.iata} flight on {d} in {cur}?",
        f"The cheapest flight is {f['flight']} for {f['price_usd']} USD, which is {m['result']} {cur}.",
        "The fare fed the conversion.")


def _t5(rng, w, r):
    c = pick(rng, w.cities)
    cur = c.currency if c.currency != "USD" else "CAD"
    hs = r.step("StayFinder: hotels_in_city", {"city": c.name}, f"List hotels in {c.name}; pass the cheapest id.",
                "hotel_id")
    h = r.step("StayFinder: hotel_details", {"hotel_id": hs[0]["hotel_id"]}, "Get the cheapest hotel's details.",
               "amount", [Adapt("hotel_id", "cheapest hotel", 1)])
    m = r.step("MoneyX: convert_currency", {"amount": h["price_usd"], "from_currency": "USD", "to_currency": cur},
               f"Convert its nightly price to {cur}.", "", [Adapt("amount", "nightly price of the hotel", 2)])
    return ChainResult(
        f"Find the cheapest hotel in {c.name}, get its details, and convert its nightly price from USD to {cur}.",
        f"Cheapest hotel in {c.name}: how good is it and what does a night cost in {cur}?",
        f"The cheapest is the {h['name']} ({h['hotel_id']}), {h['stars']} stars, rated {h['rating']}, "
        f"{h['price_usd']} USD a night = {m['result']} {cur}.",
        "Cheapest hotel -> details -> price conversion.")


def _t6(rng, w, r):
    a, b = rng.sample(w.cities, 2)
    d = _date(rng)
    x = r.step("SkyRoutes: airport_code", {"city": a.name}, f"Get {a.name}'s airport code.", "origin")
    f = r.step("SkyRoutes: search_flights", {"origin": x["iata"], "destination": b.iata, "date": d},
               f"Search flights from there to {b.iata}.", "flight_number",
               [Adapt("origin", "airport of the origin city", 1)])
    s = r.step("SkyRoutes: flight_status", {"flight_number": f["flight"]}, "Check the flight's status.", "",
               [Adapt("flight_number", "the cheapest flight", 2)])
    t = r.step("WorldClock: local_time", {"city": b.name, "utc_time": f["depart"]},
               f"Convert the departure time to {b.name} local time.", "",
               [Adapt("utc_time", "departure time of the flight", 2)])
    return ChainResult(
        f"Get {a.name}'s airport code, search flights from it to {b.iata} on {d}, check that flight's status, "
        f"and tell me the local time in {b.name} at its departure time (taken as UTC).",
        f"Flying {a.name} to {b.iata} on {d}: which flight is cheapest, is it on time, and what time is it "
        f"in {b.name} when it leaves (departure read as UTC)?",
        f"From {x['iata']} the cheapest flight is {f['flight']} departing {f['depart']} for {f['price_usd']} USD; "
        f"it is {s['status']} (gate {s['gate']}). At {f['depart']} UTC it is {t['local']} in {b.name}.",
        "Airport code -> flight -> status; departure time -> local time.")


CHAINS = [
    Chain("Two cities → Airport codes → Flight search", "Cheapest flight between two cities.", _t1),
    Chain("Flight search → Flight status", "Is the cheapest flight on time.", _t2),
    Chain("Hotels under a cap → Cheapest → Details", "Budget stay.", _t3),
    Chain("Flight search → Fare conversion", "Fare in local currency.", _t4),
    Chain("Hotels → Cheapest → Details → Price conversion", "Hotel night in local currency.", _t5),
    Chain("City → Airport → Flight → Status → Local time", "Flight plan with status and local time.", _t6),
]
