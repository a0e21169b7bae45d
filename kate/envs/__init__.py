"""Environments: the ``Environment`` protocol and a Python-functions environment."""

from kate.envs.base import Environment, Observation
from kate.envs.python_functions import PythonFunctionsEnv

__all__ = ["Environment", "Observation", "PythonFunctionsEnv"]
