"""AppWorld: code actions against AppWorld's real API in its own environment (pydantic < 2), or
against a stand-in world with the same surface. ``worker.py`` runs under AppWorld's interpreter and
imports nothing from kate; everything else is kate's side. The task (``kate.tasks.appworld``) runs
a policy with a code sampler (``kate.sampling.code``) over ``CodeEnvironment``."""

from kate.appworld.client import AppWorldClient, AppWorldDataMissing, AppWorldError, AppWorldNotInstalled
from kate.appworld.code_env import CodeEnvironment
from kate.appworld.stand_in import StandInWorld
from kate.appworld.world import CodeWorld, RemoteAppWorld

__all__ = [
    "AppWorldClient", "AppWorldDataMissing", "AppWorldError", "AppWorldNotInstalled", "CodeEnvironment", "CodeWorld",
    "RemoteAppWorld", "StandInWorld",
]  # fmt: skip
