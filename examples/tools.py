"""The tools the examples' agents may call: plain, type-hinted Python functions over small fixed tables,
the kind of tools a user already has. Nothing here knows about kate or about any agent framework; each
example wraps these same functions the way its framework does (a JSON schema and an allowlist, the
Agents SDK's ``function_tool``, LangChain's ``tool``).

Every tool returns a JSON-serialisable dict; a bad argument gives ``{"error": ...}`` for the model to
read, never an exception.
"""

from __future__ import annotations

import argparse
import os
from typing import Literal

# city -> (temperature in celsius, conditions)
WEATHER: dict[str, tuple[float, str]] = {
    "paris": (18.0, "partly cloudy"),
    "london": (14.0, "light rain"),
    "tokyo": (24.0, "sunny"),
    "new york": (21.0, "clear"),
    "berlin": (16.0, "overcast"),
}

# currency -> how many US dollars one unit buys (fixed rates, for the example)
USD_PER_UNIT: dict[str, float] = {"USD": 1.0, "EUR": 1.08, "GBP": 1.27, "JPY": 0.0067, "CHF": 1.12}

# country -> (capital, population in millions)
COUNTRIES: dict[str, tuple[str, float]] = {
    "france": ("Paris", 68.2),
    "japan": ("Tokyo", 124.5),
    "germany": ("Berlin", 84.5),
    "brazil": ("Brasília", 203.1),
    "kenya": ("Nairobi", 55.1),
}


def get_weather(city: str, unit: Literal["celsius", "fahrenheit"] = "celsius") -> dict:
    """Current weather for a city: temperature in the unit asked for, and the conditions.

    Args:
        city: The city's name, e.g. "Paris".
        unit: "celsius" or "fahrenheit".
    """
    key = city.strip().lower()
    if key not in WEATHER:
        return {"error": f"no weather for {city!r}; known cities: {sorted(WEATHER)}"}
    if unit not in ("celsius", "fahrenheit"):
        return {"error": f"unit must be 'celsius' or 'fahrenheit', not {unit!r}"}
    celsius, conditions = WEATHER[key]
    temperature = celsius if unit == "celsius" else round(celsius * 9 / 5 + 32, 1)
    return {"city": city, "temperature": temperature, "unit": unit, "conditions": conditions}


def convert_currency(amount: float, from_currency: str, to_currency: str) -> dict:
    """Convert an amount of money from one currency to another at today's fixed rate.

    Args:
        amount: How much money, in from_currency.
        from_currency: ISO code of the currency held, e.g. "USD".
        to_currency: ISO code of the currency wanted, e.g. "EUR".
    """
    source, target = from_currency.strip().upper(), to_currency.strip().upper()
    unknown = [code for code in (source, target) if code not in USD_PER_UNIT]
    if unknown:
        return {"error": f"unknown currency {unknown}; known: {sorted(USD_PER_UNIT)}"}
    try:
        converted = float(amount) * USD_PER_UNIT[source] / USD_PER_UNIT[target]
    except (TypeError, ValueError):
        return {"error": f"amount must be a number, not {amount!r}"}
    return {"amount": amount, "from": source, "to": target, "converted": round(converted, 2)}


def lookup_country(country: str) -> dict:
    """A country's capital and population (in millions) from a small table.

    Args:
        country: The country's name in English, e.g. "Japan".
    """
    key = country.strip().lower()
    if key not in COUNTRIES:
        return {"error": f"no entry for {country!r}; known countries: {sorted(COUNTRIES)}"}
    capital, population = COUNTRIES[key]
    return {"country": country, "capital": capital, "population_millions": population}


TOOLS = [get_weather, convert_currency, lookup_country]  # what every example offers its agent


def example_arguments(description: str, max_steps_help: str = "most model calls before giving up") -> argparse.ArgumentParser:
    """The command line every example shares (each adds its own options to it)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--base-url", default="http://127.0.0.1:8000/v1", help="the server's OpenAI-compatible /v1 URL")
    parser.add_argument("--model", default=None, help="model id (default: the first of the server's /v1/models)")
    parser.add_argument("--question", default="What is the weather in Paris right now?")
    parser.add_argument("--max-steps", type=int, default=4, help=max_steps_help)
    parser.add_argument("--max-tokens", type=int, default=None, help="per model call (default: the server's)")
    parser.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY", "not-needed"))
    parser.add_argument("--json", action="store_true", help="print the summary as JSON at the end")
    return parser
