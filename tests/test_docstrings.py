"""Every lotlib docstring is valid reStructuredText: the API appendix builds with warnings as errors."""
import importlib
import inspect
import pkgutil

import docutils.core
import docutils.utils
import pytest

import lotlib


def _docstrings():
    for info in pkgutil.walk_packages(lotlib.__path__, prefix="lotlib."):
        module = importlib.import_module(info.name)
        yield info.name, module.__doc__
        for name, obj in vars(module).items():
            if (inspect.isfunction(obj) or inspect.isclass(obj)) and obj.__module__ == module.__name__:
                yield f"{info.name}.{name}", inspect.getdoc(obj)


@pytest.mark.parametrize("name,doc", [d for d in _docstrings() if d[1]], ids=lambda v: v if "." in str(v) else "")
def test_docstring_is_clean_rst(name, doc):
    settings = {"report_level": docutils.utils.Reporter.WARNING_LEVEL, "halt_level": 5, "warning_stream": False}
    document = docutils.core.publish_doctree(doc, settings_overrides=settings)
    problems = [m.astext() for m in document.findall(docutils.nodes.system_message)
                if m["level"] >= docutils.utils.Reporter.WARNING_LEVEL]
    # errors found by transforms (an undefined |substitution|) leave a `problematic` node, not a message
    problems += [f"problematic markup: {p.astext()}" for p in document.findall(docutils.nodes.problematic)]
    assert not problems, f"{name}: {problems}"
