"""Math domain: arithmetic, unit conversions, statistics, primes, gcd/lcm."""

from __future__ import annotations

import ast
import operator
import re
import statistics

from ..registry import Param, ToolDef, ToolInputError, num
from ..spec import Adapt, Ask, Chain, ChainResult, pick

DOMAIN = "Math"
_LEN = {"mm": 0.001, "cm": 0.01, "m": 1.0, "km": 1000.0, "in": 0.0254, "ft": 0.3048, "yd": 0.9144, "mi": 1609.344}
_MASS = {"g": 0.001, "kg": 1.0, "lb": 0.45359237, "oz": 0.028349523125}
_LEN_NAMES = {"mm": "millimetres", "cm": "centimetres", "m": "metres", "km": "kilometres", "in": "inches",
              "ft": "feet", "yd": "yards", "mi": "miles"}
_MASS_NAMES = {"g": "grams", "kg": "kilograms", "lb": "pounds", "oz": "ounces"}
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.Pow: operator.pow, ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Mod: operator.mod}


def _eval(node):
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > 12:
            raise ToolInputError("exponent too large (max 12)")
        return _OPS[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_eval(node.operand))
    raise ToolInputError("expression may only contain numbers, + - * / % ** and parentheses")


def arithmetic(w, expression):
    if len(expression) > 120:
        raise ToolInputError("expression too long (max 120 characters)")
    try:
        tree = ast.parse(expression.replace("^", "**").replace("×", "*"), mode="eval")
        val = _eval(tree)
    except SyntaxError:
        raise ToolInputError(f"cannot parse expression {expression!r}") from None
    except ZeroDivisionError:
        raise ToolInputError("division by zero") from None
    return {"expression": expression, "result": num(val, 4)}


def _conv(kind, table, value, f, t):
    return {"value": value, "from": f, "to": t, "result": num(value * table[f] / table[t], 4)}


def convert_length(w, value, from_unit, to_unit):
    return _conv("length", _LEN, value, from_unit, to_unit)


def convert_mass(w, value, from_unit, to_unit):
    return _conv("mass", _MASS, value, from_unit, to_unit)


def convert_temperature(w, value, from_scale, to_scale):
    c = {"C": value, "F": (value - 32) * 5 / 9, "K": value - 273.15}[from_scale]
    if c < -273.15:
        raise ToolInputError("temperature below absolute zero")
    out = {"C": c, "F": c * 9 / 5 + 32, "K": c + 273.15}[to_scale]
    return {"value": value, "from": from_scale, "to": to_scale, "result": num(out, 2)}


def mean_median(w, numbers):
    parts = [p for p in re.split(r"[,\s;]+", numbers.strip()) if p]
    try:
        xs = [float(p) for p in parts]
    except ValueError:
        raise ToolInputError(f"numbers must be a comma-separated list of numbers, got {numbers!r}") from None
    if not xs:
        raise ToolInputError("numbers is empty")
    return {"count": len(xs), "mean": num(statistics.fmean(xs), 3), "median": num(statistics.median(xs), 3),
            "max": num(max(xs), 3)}


def percentage(w, value, percent):
    return {"value": value, "percent": percent, "result": num(value * percent / 100, 4)}


def _is_prime(n):
    return n >= 2 and all(n % d for d in range(2, int(n ** 0.5) + 1))


def prime_check(w, n):
    if float(n) != int(n) or not 1 <= int(n) <= 10**7:
        raise ToolInputError(f"n must be an integer between 1 and 10000000, got {n!r}")
    n = int(n)
    k = n + 1
    while not _is_prime(k):
        k += 1
    return {"n": n, "is_prime": _is_prime(n), "next_prime": k}


def gcd_lcm(w, a, b):
    import math
    if float(a) != int(a) or float(b) != int(b) or int(a) < 1 or int(b) < 1:
        raise ToolInputError(f"a and b must be positive integers, got {a!r}, {b!r}")
    a, b = int(a), int(b)
    return {"a": a, "b": b, "gcd": math.gcd(a, b), "lcm": a * b // math.gcd(a, b)}


def word_count(w, text):
    return {"words": len(text.split()), "chars": len(text)}


P = Param
_V = P("value", "NUMBER", "", 1)
_U = "Unit conversion."
TOOLS = [
    ToolDef("Calc", "arithmetic", DOMAIN, "Evaluate an arithmetic expression (+ - * / % ** and parentheses).",
            "A calculator.", arithmetic, (P("expression", "STRING", "Arithmetic expression.", "1 + 1"),)),
    ToolDef("Units", "convert_length", DOMAIN, "Convert a length between units.", _U, convert_length,
            (_V, P("from_unit", "ENUM", "Source unit.", "km", tuple(_LEN)), P("to_unit", "ENUM", "Target unit.", "mi", tuple(_LEN))),
            connected=(("Calc: percentage", ("value",)),)),
    ToolDef("Units", "convert_mass", DOMAIN, "Convert a mass between units.", _U, convert_mass,
            (_V, P("from_unit", "ENUM", "Source unit.", "kg", tuple(_MASS)), P("to_unit", "ENUM", "Target unit.", "lb", tuple(_MASS)))),
    ToolDef("Units", "convert_temperature", DOMAIN, "Convert a temperature between C, F and K.", _U,
            convert_temperature, (_V, P("from_scale", "ENUM", "Source scale.", "C", ("C", "F", "K")),
                                  P("to_scale", "ENUM", "Target scale.", "F", ("C", "F", "K")))),
    ToolDef("Stats", "mean_median", DOMAIN, "Count, mean, median and max of a list of numbers.", "Descriptive statistics.",
            mean_median, (P("numbers", "STRING", "Comma-separated numbers.", "1, 2, 3"),),
            connected=(("Units: convert_temperature", ("value",)), ("Calc: percentage", ("value",)))),
    ToolDef("Calc", "percentage", DOMAIN, "Compute percent% of a value.", "A calculator.", percentage,
            (_V, P("percent", "NUMBER", "", 10))),
    ToolDef("NumberTheory", "prime_check", DOMAIN, "Whether n is prime, and the next prime after n.",
            "Integer utilities.", prime_check, (P("n", "NUMBER", "Integer 1-10000000.", 97),),
            connected=(("NumberTheory: gcd_lcm", ("a",)),)),
    ToolDef("NumberTheory", "gcd_lcm", DOMAIN, "Greatest common divisor and least common multiple of a and b.",
            "Integer utilities.", gcd_lcm, (P("a", "NUMBER", "Positive integer.", 12), P("b", "NUMBER", "Positive integer.", 18))),
    ToolDef("TextTools", "word_count", DOMAIN, "Count words and characters in a text.", "Text utilities.",
            word_count, (P("text", "STRING", "", "hello world"),)),
]


# ----------------------------------------------------------------------------- parallel asks

def _expr(rng):
    a, b, c = rng.randint(2, 99), rng.randint(2, 99), rng.randint(2, 12)
    return pick(rng, [f"{a} + {b} * {c}", f"({a} + {b}) * {c}", f"{a} * {b} - {c}", f"({a} - {b}) / {c}"])


def ask_arith(rng, w):
    e = _expr(rng)
    return Ask("Calc: arithmetic", {"expression": e}, f"compute {e}", f"work out what {e} comes to",
               lambda o: f"{o['expression']} = {o['result']}.")


def ask_length(rng, w):
    f, t = rng.sample(sorted(_LEN), 2)
    v = rng.choice([1, 2, 5, 10, 26.2, 42, 100, 250, 1500])
    return Ask("Units: convert_length", {"value": v, "from_unit": f, "to_unit": t}, f"convert {v} {f} to {t}",
               f"tell me how many {_LEN_NAMES[t]} are in {v} {_LEN_NAMES[f]}",
               lambda o: f"{o['value']} {o['from']} is {o['result']} {o['to']}.")


def ask_mass(rng, w):
    f, t = rng.sample(sorted(_MASS), 2)
    v = rng.choice([1, 3, 12, 16, 50, 75, 250, 500])
    return Ask("Units: convert_mass", {"value": v, "from_unit": f, "to_unit": t}, f"convert {v} {f} to {t}",
               f"tell me what {v} {_MASS_NAMES[f]} weigh in {_MASS_NAMES[t]}",
               lambda o: f"{o['value']} {o['from']} is {o['result']} {o['to']}.")


def ask_temp(rng, w):
    f, t = rng.sample(["C", "F", "K"], 2)
    v = rng.randint(-20, 110) if f != "K" else rng.randint(250, 380)
    names = {"C": "Celsius", "F": "Fahrenheit", "K": "kelvin"}
    return Ask("Units: convert_temperature", {"value": v, "from_scale": f, "to_scale": t},
               f"convert {v} {f} to {t}", f"tell me what {v} degrees {names[f]} is in {names[t]}",
               lambda o: f"{o['value']} {o['from']} is {o['result']} {o['to']}.")


def _nums(rng):
    return ", ".join(str(rng.randint(1, 99)) for _ in range(rng.randint(4, 7)))


def ask_stats(rng, w):
    ns = _nums(rng)
    return Ask("Stats: mean_median", {"numbers": ns}, f"get the mean and median of {ns}",
               f"summarise these numbers for me: {ns}",
               lambda o: f"For {o['count']} numbers the mean is {o['mean']}, the median {o['median']} and the max {o['max']}.")


def ask_pct(rng, w):
    v, p = rng.choice([80, 120, 250, 999, 1480, 64.5]), rng.choice([5, 12.5, 15, 18, 20, 35])
    return Ask("Calc: percentage", {"value": v, "percent": p}, f"compute {p}% of {v}",
               f"tell me what a {p} percent share of {v} is",
               lambda o: f"{o['percent']}% of {o['value']} is {o['result']}.")


def ask_prime(rng, w):
    n = rng.randint(10, 5000)
    return Ask("NumberTheory: prime_check", {"n": n}, f"check whether {n} is prime",
               f"tell me if {n} is a prime number and what the next prime after it is",
               lambda o: f"{o['n']} is {'' if o['is_prime'] else 'not '}prime; the next prime is {o['next_prime']}.")


def ask_gcd(rng, w):
    a, b = rng.randint(6, 300), rng.randint(6, 300)
    return Ask("NumberTheory: gcd_lcm", {"a": a, "b": b}, f"get the gcd and lcm of {a} and {b}",
               f"tell me the largest number dividing both {a} and {b}, and their smallest common multiple",
               lambda o: f"gcd({o['a']}, {o['b']}) = {o['gcd']} and lcm = {o['lcm']}.")


ASKS = [ask_arith, ask_length, ask_mass, ask_temp, ask_stats, ask_pct, ask_prime, ask_gcd]


# ----------------------------------------------------------------------------- sequential chains

def _m1(rng, w, r):
    v, p = rng.choice([3, 5, 10, 13.1, 26.2, 50]), rng.choice([10, 15, 20, 25])
    a = r.step("Units: convert_length", {"value": v, "from_unit": "mi", "to_unit": "km"},
               f"Convert {v} miles to km.", "value")
    b = r.step("Calc: percentage", {"value": a["result"], "percent": p}, f"Take {p}% of the km distance.", "",
               [Adapt("value", "distance in km", 1)])
    return ChainResult(
        f"Convert {v} miles to kilometres, then compute {p}% of the result.",
        f"A route is {v} miles long. How many kilometres is that, and how far is {p} percent of it in km?",
        f"{v} mi is {a['result']} km, and {p}% of that is {b['result']} km.", "Converted distance fed the percentage.")


def _m2(rng, w, r):
    ns = ", ".join(str(rng.randint(40, 105)) for _ in range(rng.randint(4, 6)))
    a = r.step("Stats: mean_median", {"numbers": ns}, "Average the Fahrenheit readings.", "value")
    b = r.step("Units: convert_temperature", {"value": a["mean"], "from_scale": "F", "to_scale": "C"},
               "Convert the mean to Celsius.", "", [Adapt("value", "mean of the readings", 1)])
    return ChainResult(
        f"Compute the mean of these Fahrenheit readings: {ns}; then convert that mean to Celsius.",
        f"My thermometer logged {ns} (Fahrenheit). What's the average, in Celsius?",
        f"The mean of the readings is {a['mean']} F (median {a['median']}), which is {b['result']} C.",
        "Mean fed the temperature conversion.")


def _m3(rng, w, r):
    n, b_ = rng.randint(10, 3000), rng.choice([6, 10, 12, 15, 21, 30])
    a = r.step("NumberTheory: prime_check", {"n": n}, f"Check {n}; pass the next prime.", "a")
    g = r.step("NumberTheory: gcd_lcm", {"a": a["next_prime"], "b": b_}, f"gcd/lcm of that prime and {b_}.", "",
               [Adapt("a", "next prime after n", 1)])
    return ChainResult(
        f"Find the next prime after {n}, then compute the gcd and lcm of that prime and {b_}.",
        f"Take the first prime bigger than {n}. What are its greatest common divisor and least common "
        f"multiple with {b_}?",
        f"{n} is {'' if a['is_prime'] else 'not '}prime; the next prime is {a['next_prime']}. gcd with {b_} is "
        f"{g['gcd']}, lcm is {g['lcm']}.", "The next prime fed gcd/lcm.")


def _m4(rng, w, r):
    a_, b_ = rng.randint(4, 60), rng.randint(4, 60)
    g = r.step("NumberTheory: gcd_lcm", {"a": a_, "b": b_}, f"gcd/lcm of {a_} and {b_}; pass the lcm.", "n")
    p = r.step("NumberTheory: prime_check", {"n": g["lcm"]}, "Check the lcm for primality.", "",
               [Adapt("n", "lcm of a and b", 1)])
    return ChainResult(
        f"Compute the lcm of {a_} and {b_}, then find the next prime after the lcm.",
        f"What is the least common multiple of {a_} and {b_}, and which prime comes right after it?",
        f"lcm({a_}, {b_}) = {g['lcm']} (gcd {g['gcd']}); the next prime after it is {p['next_prime']}.",
        "The lcm fed the prime check.")


def _m5(rng, w, r):
    ns = ", ".join(str(rng.randint(2, 40)) for _ in range(rng.randint(4, 6)))
    p = rng.choice([10, 20, 25, 50])
    a = r.step("Stats: mean_median", {"numbers": ns}, "Summarise the kilogram weights; pass the median.", "value")
    b = r.step("Calc: percentage", {"value": a["median"], "percent": p}, f"Take {p}% of the median.", "value",
               [Adapt("value", "median weight", 1)])
    c = r.step("Units: convert_mass", {"value": b["result"], "from_unit": "kg", "to_unit": "lb"},
               "Convert that amount to pounds.", "", [Adapt("value", "percentage of the median", 2)])
    return ChainResult(
        f"Get the median of these weights in kg: {ns}; take {p}% of the median; convert that to pounds.",
        f"Parcels weigh {ns} kg. What is {p} percent of the median parcel weight, expressed in pounds?",
        f"The median is {a['median']} kg; {p}% of it is {b['result']} kg, i.e. {c['result']} lb.",
        "Median -> percentage -> mass conversion.")


def _m6(rng, w, r):
    v = rng.choice([2, 5, 8, 12, 20, 35])
    f = pick(rng, ["ft", "yd", "m"])
    k = rng.randint(2, 9)
    a = r.step("Units: convert_length", {"value": v, "from_unit": f, "to_unit": "cm"},
               f"Convert {v} {f} to cm.", "expression")
    b = r.step("Calc: arithmetic", {"expression": f"{a['result']} * {k}"}, f"Multiply the length by {k}.", "",
               [Adapt("expression", "length in cm", 1)])
    return ChainResult(
        f"Convert {v} {f} to centimetres, then multiply the result by {k}.",
        f"I need {k} pieces that are each {v} {_LEN_NAMES[f]} long. How many centimetres is one, and "
        f"how many in total?",
        f"{v} {f} is {a['result']} cm; {k} of them make {b['result']} cm.", "The converted length fed the product.")


CHAINS = [
    Chain("Miles → Kilometres → Percentage", "Part of a distance.", _m1),
    Chain("Readings → Mean → Celsius", "Average temperature in Celsius.", _m2),
    Chain("Number → Next prime → GCD/LCM", "Prime arithmetic.", _m3),
    Chain("GCD/LCM → Next prime", "Prime after a common multiple.", _m4),
    Chain("Weights → Median → Percentage → Pounds", "Share of a median weight.", _m5),
    Chain("Length → Centimetres → Product", "Total length.", _m6),
]
