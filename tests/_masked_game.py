"""``examples/masked_game.py`` (the action-mask game users copy) loaded by its path, once per
process, as the module ``masked_game`` (it registers ``MaskedGame-v0``)."""

import importlib.util
import sys
from pathlib import Path

PATH = Path(__file__).resolve().parents[1] / "examples" / "masked_game.py"


def load():
    """The ``masked_game`` module."""
    if "masked_game" not in sys.modules:
        spec = importlib.util.spec_from_file_location("masked_game", PATH)
        module = importlib.util.module_from_spec(spec)
        sys.modules["masked_game"] = module
        spec.loader.exec_module(module)
    return sys.modules["masked_game"]
