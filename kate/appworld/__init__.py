"""AppWorld: code actions against AppWorld's real API in its own environment (pydantic < 2), or
against a stand-in world with the same surface. ``worker.py`` runs under AppWorld's interpreter and
imports nothing from kate; everything else is kate's side."""

from kate.appworld.client import AppWorldClient, AppWorldDataMissing, AppWorldError, AppWorldNotInstalled
from kate.appworld.code_action import extract_code, normalize_code
from kate.appworld.code_sampling import GreedyCode, WidthCode
from kate.appworld.loop import LoopConfig, run_code_task
from kate.appworld.stand_in import StandInWorld
from kate.appworld.world import CodeWorld, RemoteAppWorld

__all__ = [
    "AppWorldClient", "AppWorldDataMissing", "AppWorldError", "AppWorldNotInstalled", "CodeWorld", "GreedyCode",
    "LoopConfig", "RemoteAppWorld", "StandInWorld", "WidthCode", "extract_code", "normalize_code", "run_code_task",
]  # fmt: skip
