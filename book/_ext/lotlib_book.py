"""Sphinx extension for the lotlib book: each page loads every script once, and a chapter's download menu
offers its Jupytext source (.py) beside the notebook.

sphinx-thebe registers its inline configuration script on every `env-before-read-docs`, so an
incremental build writes it twice and the browser reports a redeclared constant. This keeps the
first of identical script entries.
"""

from pathlib import Path


def _unique_scripts(app, pagename, templatename, context, doctree):
    seen, unique = set(), []
    for script in context.get("script_files", []):
        attributes = getattr(script, "attributes", {})
        key = (getattr(script, "filename", None) or "", tuple(sorted((k, str(v)) for k, v in attributes.items())))
        if key not in seen:
            seen.add(key)
            unique.append(script)
    context["script_files"] = unique


def _python_download(app, pagename, templatename, context, doctree):
    """Add the chapter's .py (staged under _extra/notebooks/, copied to the site's notebooks/) to the
    download menu that sphinx-book-theme builds."""
    name = Path(pagename).name
    if not (Path(app.srcdir) / "_extra" / "notebooks" / f"{name}.py").is_file():
        return
    for group in context.get("header_buttons", []):
        if group.get("label") == "download-buttons":
            group["buttons"].insert(1, {
                "type": "link",
                "url": context["pathto"](f"notebooks/{name}.py", 1),
                "text": ".py",
                "tooltip": "Download the chapter's source (Jupytext)",
                "icon": "fas fa-code",
                "label": "download-py-button",
            })


def setup(app):
    app.connect("html-page-context", _python_download, priority=600)
    app.connect("html-page-context", _unique_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
