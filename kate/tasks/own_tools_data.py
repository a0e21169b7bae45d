"""The own-tools task's data: five plain, type-hinted Python functions of the kind a new user
writes (fixed tables, no network, no clock), offered through ``PythonFunctionsEnv``, and the
questions asked about them (``QUESTIONS``, in pairs of one kind so both halves get each kind).

Each tool also has a normalizer per string argument (``ARGUMENT_FORMS``): the form the tool itself
reads an argument in (``"Kilometers"`` and ``"km"`` are one unit, ``"fe"`` and ``"Iron"`` one
element), so the call checker treats as equal exactly the arguments the tool treats as equal.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Literal

Answer = tuple[float | str, ...]
Call = tuple[str, dict[str, Any]]

# unit -> (quantity, size in the quantity's base unit: metre, kilogram, litre)
UNITS: dict[str, tuple[str, float]] = {
    "mm": ("length", 0.001), "cm": ("length", 0.01), "m": ("length", 1.0), "km": ("length", 1000.0),
    "in": ("length", 0.0254), "ft": ("length", 0.3048), "yd": ("length", 0.9144), "mi": ("length", 1609.344),
    "g": ("mass", 0.001), "kg": ("mass", 1.0), "oz": ("mass", 0.028349523125), "lb": ("mass", 0.45359237),
    "ml": ("volume", 0.001), "l": ("volume", 1.0), "gal": ("volume", 3.785411784), "cup": ("volume", 0.2365882365),
}  # fmt: skip
_UNIT_NAMES = {
    "mm": ("millimeter", "millimetre"), "cm": ("centimeter", "centimetre"), "m": ("meter", "metre"),
    "km": ("kilometer", "kilometre"), "in": ("inch", "inches"), "ft": ("foot", "feet"), "yd": ("yard",),
    "mi": ("mile",), "g": ("gram", "gramme"), "kg": ("kilogram", "kilo"), "oz": ("ounce",),
    "lb": ("pound", "lbs"), "ml": ("milliliter", "millilitre"), "l": ("liter", "litre"),
    "gal": ("gallon", "us gallon"), "cup": ("cups",),
}  # fmt: skip
_UNIT_ALIASES = {alias: unit for unit, names in _UNIT_NAMES.items() for name in names for alias in (name, name + "s")}

# symbol -> (English name, atomic number, standard atomic mass)
ELEMENTS: dict[str, tuple[str, int, float]] = {
    "H": ("hydrogen", 1, 1.008), "He": ("helium", 2, 4.003), "Li": ("lithium", 3, 6.94), "C": ("carbon", 6, 12.011),
    "N": ("nitrogen", 7, 14.007), "O": ("oxygen", 8, 15.999), "F": ("fluorine", 9, 18.998), "Ne": ("neon", 10, 20.18),
    "Na": ("sodium", 11, 22.99), "Mg": ("magnesium", 12, 24.305), "Al": ("aluminium", 13, 26.982),
    "Si": ("silicon", 14, 28.085), "P": ("phosphorus", 15, 30.974), "S": ("sulfur", 16, 32.06),
    "Cl": ("chlorine", 17, 35.45), "K": ("potassium", 19, 39.098), "Ca": ("calcium", 20, 40.078),
    "Fe": ("iron", 26, 55.845), "Ni": ("nickel", 28, 58.693), "Cu": ("copper", 29, 63.546), "Zn": ("zinc", 30, 65.38),
    "Ag": ("silver", 47, 107.868), "Sn": ("tin", 50, 118.71), "I": ("iodine", 53, 126.904),
    "Pt": ("platinum", 78, 195.084), "Au": ("gold", 79, 196.967), "Hg": ("mercury", 80, 200.592),
    "Pb": ("lead", 82, 207.2), "U": ("uranium", 92, 238.029),
}  # fmt: skip
_ELEMENT_KEYS = {**{s.lower(): s for s in ELEMENTS}, **{v[0]: s for s, v in ELEMENTS.items()}, "aluminum": "Al"}

# units of each currency per one US dollar (a fixed table: this tool never fetches rates)
RATES: dict[str, float] = {"USD": 1.0, "EUR": 0.92, "GBP": 0.79, "JPY": 150.0, "CHF": 0.88, "CAD": 1.36,
                           "AUD": 1.52, "INR": 83.0, "CNY": 7.2, "MXN": 17.0}  # fmt: skip
VOWELS = set("aeiou")


def unit_key(unit: str) -> str | None:
    """The table's symbol for a unit written as a symbol or a name (any case), or None."""
    key = unit.strip().lower().rstrip(".")
    return key if key in UNITS else _UNIT_ALIASES.get(key)


def element_key(element: str) -> str | None:
    """The symbol of an element written as its symbol or English name (any case), or None."""
    return _ELEMENT_KEYS.get(element.strip().lower())


def _sig(value: float) -> float:
    return float(f"{value:.6g}")


def convert_units(value: float, from_unit: str, to_unit: str) -> float:
    """Convert a length, mass or volume from one unit to another.

    Args:
        value: the amount to convert
        from_unit: the unit of value: mm, cm, m, km, in, ft, yd, mi, g, kg, oz, lb, ml, l, gal or cup
        to_unit: the unit to convert to, from the same list and of the same kind (length, mass, volume)
    """
    source, target = unit_key(from_unit), unit_key(to_unit)
    if source is None or target is None:
        raise ValueError(f"unknown unit {from_unit if source is None else to_unit!r}; known: {', '.join(UNITS)}")
    (kind_a, size_a), (kind_b, size_b) = UNITS[source], UNITS[target]
    if kind_a != kind_b:
        raise ValueError(f"cannot convert {kind_a} ({source}) to {kind_b} ({target})")
    return _sig(value * size_a / size_b)


def element_lookup(element: str) -> dict[str, Any]:
    """Look up a chemical element: its name, symbol, atomic number and standard atomic mass.

    Args:
        element: the element's English name (e.g. "iron") or its symbol (e.g. "Fe")
    """
    symbol = element_key(element)
    if symbol is None:
        raise ValueError(f"unknown element {element!r}")
    name, number, mass = ELEMENTS[symbol]
    return {"name": name, "symbol": symbol, "atomic_number": number, "atomic_mass": mass}


def convert_currency(amount: float, from_currency: str, to_currency: str) -> float:
    """Convert an amount of money between currencies at this tool's fixed exchange-rate table.

    Args:
        amount: the amount of money to convert
        from_currency: ISO code of the amount's currency: USD, EUR, GBP, JPY, CHF, CAD, AUD, INR, CNY or MXN
        to_currency: ISO code of the currency to convert to (same list)
    """
    source, target = from_currency.strip().upper(), to_currency.strip().upper()
    for code in (source, target):
        if code not in RATES:
            raise ValueError(f"unknown currency code {code!r}; known: {', '.join(RATES)}")
    return round(amount / RATES[source] * RATES[target], 2)


def count_text(text: str, what: Literal["words", "characters", "letters", "vowels"] = "words") -> int:
    """Count the words, characters, letters or vowels in a text.

    Args:
        text: the text to count in
        what: words (separated by spaces), characters (every character, spaces included),
            letters (alphabetic characters only) or vowels (a, e, i, o, u)
    """
    if what == "words":
        return len(text.split())
    if what == "characters":
        return len(text)
    if what == "letters":
        return sum(c.isalpha() for c in text)
    return sum(c in VOWELS for c in text.lower())


def loan_payment(principal: float, annual_rate_percent: float, years: int) -> float:
    """The monthly payment of a fixed-rate loan (standard amortization, interest compounded monthly).

    Args:
        principal: the amount borrowed
        annual_rate_percent: the yearly interest rate in percent, e.g. 5 for 5%
        years: the loan's term in years
    """
    months, rate = years * 12, annual_rate_percent / 100 / 12
    if months <= 0:
        raise ValueError("years must be positive")
    if rate == 0:
        return round(principal / months, 2)
    return round(principal * rate / (1 - math.pow(1 + rate, -months)), 2)


TOOLS: dict[str, Callable[..., Any]] = {
    f.__name__: f for f in (convert_units, element_lookup, convert_currency, count_text, loan_payment)
}


def _text_form(value: str) -> str:
    return " ".join(value.split()).casefold()


# (tool, parameter) -> the form the tool reads a string argument in; other strings: case and spacing
ARGUMENT_FORMS: dict[tuple[str, str], Callable[[str], Any]] = {
    ("convert_units", "from_unit"): lambda v: unit_key(v) or _text_form(v),
    ("convert_units", "to_unit"): lambda v: unit_key(v) or _text_form(v),
    ("element_lookup", "element"): lambda v: element_key(v) or _text_form(v),
    ("convert_currency", "from_currency"): lambda v: v.strip().upper(),
    ("convert_currency", "to_currency"): lambda v: v.strip().upper(),
}


def argument_form(tool: str, parameter: str, value: Any) -> Any:
    """A comparable form of one argument: numbers as floats (``5`` == ``5.0``), strings as the tool
    reads them (case-insensitive), anything else as given."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        return ARGUMENT_FORMS.get((tool, parameter), _text_form)(value)
    return value


# --------------------------------------------------------------------------- questions
# (text, expected calls, expected answer values, tools offered or None for all). The answer values
# must all appear in the final answer: numbers within a relative tolerance, strings as words in
# any case; no values: any plain-text answer. No expected calls: the right turn answers directly.
CU, EL, CC, CT, LP = "convert_units", "element_lookup", "convert_currency", "count_text", "loan_payment"


def _u(value: float, a: str, b: str) -> Call:
    return (CU, {"value": value, "from_unit": a, "to_unit": b})


def _c(amount: float, a: str, b: str) -> Call:
    return (CC, {"amount": amount, "from_currency": a, "to_currency": b})


def _e(element: str) -> Call:
    return (EL, {"element": element})


def _t(text: str, what: str = "words") -> Call:
    return (CT, {"text": text, "what": what})


def _l(principal: float, rate: float, years: int) -> Call:
    return (LP, {"principal": principal, "annual_rate_percent": rate, "years": years})


# fmt: off
QUESTIONS: list[tuple[str, list[Call], Answer, tuple[str, ...] | None]] = [
    # one call: unit conversion
    ("How many miles is 10 kilometers?", [_u(10, "km", "mi")], (6.21371,), None),
    ("Convert 26.2 miles to kilometres.", [_u(26.2, "mi", "km")], (42.1648,), None),
    ("I weigh 70 kg. What is that in pounds?", [_u(70, "kg", "lb")], (154.324,), None),
    ("How many kilograms are 150 lb?", [_u(150, "lb", "kg")], (68.0389,), None),
    ("My room is 12 feet long; how long is that in meters?", [_u(12, "ft", "m")], (3.6576,), None),
    ("How many centimeters is 6 inches?", [_u(6, "in", "cm")], (15.24,), None),
    ("A recipe needs 3 cups of milk. How many milliliters is that?", [_u(3, "cup", "ml")], (709.765,), None),
    ("How many liters are in 5 gallons?", [_u(5, "gal", "l")], (18.9271,), None),
    ("Convert 500 grams to ounces please.", [_u(500, "g", "oz")], (17.637,), (CU,)),
    ("What is 2.5 km in feet?", [_u(2.5, "km", "ft")], (8202.1,), (CU,)),
    # one call: element table
    ("What is the atomic number of iron?", [_e("iron")], (26,), None),
    ("Tell me the atomic number of gold.", [_e("gold")], (79,), None),
    ("What's the atomic mass of carbon?", [_e("carbon")], (12.011,), None),
    ("What is the standard atomic mass of sodium?", [_e("sodium")], (22.99,), None),
    ("Which element has the symbol Pb?", [_e("Pb")], ("lead",), None),
    ("What element is Hg?", [_e("Hg")], ("mercury",), None),
    ("What is the chemical symbol for silver?", [_e("silver")], ("Ag",), (EL, CT)),
    ("What's the symbol of tin?", [_e("tin")], ("Sn",), (EL, CT)),
    ("How many protons does a uranium atom have?", [_e("uranium")], (92,), None),
    ("How many protons are in a copper atom?", [_e("copper")], (29,), None),
    # one call: currency table
    ("How much is 100 US dollars in euros?", [_c(100, "USD", "EUR")], (92.0,), None),
    ("Convert 250 EUR to USD.", [_c(250, "EUR", "USD")], (271.74,), None),
    ("I have 5000 yen. How many dollars is that?", [_c(5000, "JPY", "USD")], (33.33,), None),
    ("How many British pounds do I get for 300 dollars?", [_c(300, "USD", "GBP")], (237.0,), None),
    ("What's 1200 Indian rupees in euros?", [_c(1200, "INR", "EUR")], (13.3,), (CC, LP)),
    ("Convert 80 GBP to Japanese yen.", [_c(80, "GBP", "JPY")], (15189.87,), (CC, LP)),
    ("How much is 45 Swiss francs in Canadian dollars?", [_c(45, "CHF", "CAD")], (69.55,), None),
    ("Change 1000 Australian dollars into US dollars.", [_c(1000, "AUD", "USD")], (657.89,), None),
    ("What's 60 euros in pounds sterling?", [_c(60, "EUR", "GBP")], (51.52,), None),
    ("How many Mexican pesos is 20 dollars?", [_c(20, "USD", "MXN")], (340.0,), None),
    # one call: text counter
    ("How many words are in this sentence: 'The quick brown fox jumps over the lazy dog'?",
     [_t("The quick brown fox jumps over the lazy dog")], (9,), None),
    ("Count the words in: 'to be or not to be, that is the question'",
     [_t("to be or not to be, that is the question")], (10,), None),
    ("How many letters are in the word 'encyclopedia'?", [_t("encyclopedia", "letters")], (12,), None),
    ("How many letters does 'Mississippi' have?", [_t("Mississippi", "letters")], (11,), None),
    ("How many characters, spaces included, are in 'hello world'?", [_t("hello world", "characters")], (11,), None),
    ("What is the character count of 'kate agent', counting the space?", [_t("kate agent", "characters")],
     (10,), None),
    ("How many vowels are in 'programming language'?", [_t("programming language", "vowels")], (7,), (CT, EL)),
    ("Count the vowels in 'education'.", [_t("education", "vowels")], (5,), (CT, EL)),
    ("How many words does my tweet have: 'Just landed in Lisbon and the sun is out'",
     [_t("Just landed in Lisbon and the sun is out")], (9,), None),
    ("Number of letters in 'supercalifragilistic'?", [_t("supercalifragilistic", "letters")], (20,), None),
    # one call: loan calculator
    ("What is the monthly payment on a $200,000 loan at 6% over 30 years?", [_l(200000, 6, 30)], (1199.10,), None),
    ("I borrow 15000 at 4.5% annual interest for 5 years. What is my monthly payment?", [_l(15000, 4.5, 5)],
     (279.65,), None),
    ("Monthly installment for a 25,000 car loan at 7% per year over 6 years?", [_l(25000, 7, 6)], (426.23,), None),
    ("A 300000 mortgage at 3.5% for 15 years: what would I pay each month?", [_l(300000, 3.5, 15)],
     (2144.65,), None),
    ("How much per month is a 10000 loan at 12% interest over 2 years?", [_l(10000, 12, 2)], (470.73,), (LP, CC)),
    ("Student loan of 40000 at 5% for 10 years: monthly payment?", [_l(40000, 5, 10)], (424.26,), (LP, CC)),
    ("Mortgage of 450000, 6.5% interest, 30 years. What's the monthly cost?", [_l(450000, 6.5, 30)],
     (2844.31,), None),
    ("If I take out 8000 at 9.9% for 3 years, how much is each monthly payment?", [_l(8000, 9.9, 3)],
     (257.76,), None),
    # two calls
    ("Which has the higher atomic number, iron or copper?", [_e("iron"), _e("copper")], ("copper", 29), None),
    ("Which atom is heavier, gold or silver? Give its atomic mass.", [_e("gold"), _e("silver")],
     ("gold", 196.967), None),
    ("What is 100 dollars in euros, and in British pounds?", [_c(100, "USD", "EUR"), _c(100, "USD", "GBP")],
     (92.0, 79.0), None),
    ("Convert 50 euros into Japanese yen and into Swiss francs.", [_c(50, "EUR", "JPY"), _c(50, "EUR", "CHF")],
     (8152.17, 47.83), None),
    ("How many words are in 'I came I saw I conquered' and in 'veni vidi vici'?",
     [_t("I came I saw I conquered"), _t("veni vidi vici")], (6, 3), None),
    ("What do the atomic numbers of carbon and nitrogen add up to?", [_e("carbon"), _e("nitrogen")], (13,), None),
    ("Convert 5 miles to km and 20 pounds to kg.", [_u(5, "mi", "km"), _u(20, "lb", "kg")], (8.04672, 9.07185),
     None),
    ("Which loan has the lower monthly payment: 20000 at 5% for 4 years, or 20000 at 8% for 3 years?",
     [_l(20000, 5, 4), _l(20000, 8, 3)], (460.59,), None),
    # no call: general knowledge, small talk, or something these tools cannot do
    ("What is the capital of Japan?", [], ("Tokyo",), None),
    ("Who wrote Romeo and Juliet?", [], ("Shakespeare",), None),
    ("Hi! How are you today?", [], (), None),
    ("What's the weather like in Paris right now?", [], (), None),
    ("How many days are in a week?", [], (7,), None),
    ("Translate 'thank you' into French.", [], ("merci",), None),
    ("Please book me a flight to Rome for tomorrow.", [], (), None),
    ("At sea level, what is the boiling point of water in degrees Celsius?", [], (100,), None),
]
# fmt: on
