"""The package's public names resolve to the documented objects, whatever was imported before."""
import importlib
import pkgutil

import lotlib


def test_public_names_resolve_after_every_submodule_is_imported():
    for info in pkgutil.iter_modules(lotlib.__path__):
        importlib.import_module(f"lotlib.{info.name}")
    for name in lotlib.__all__:
        obj = getattr(lotlib, name)
        assert not isinstance(obj, type(lotlib)), f"lotlib.{name} is a module, not the public object"
    assert callable(lotlib.capture) and callable(lotlib.trajectories) and callable(lotlib.load_model)
