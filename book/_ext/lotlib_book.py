"""Sphinx extension for the lotlib book: each page loads every script once.

sphinx-thebe registers its inline configuration script on every `env-before-read-docs`, so an
incremental build writes it twice and the browser reports a redeclared constant. This keeps the
first of identical script entries.
"""


def _unique_scripts(app, pagename, templatename, context, doctree):
    seen, unique = set(), []
    for script in context.get("script_files", []):
        attributes = getattr(script, "attributes", {})
        key = (getattr(script, "filename", None) or "", tuple(sorted((k, str(v)) for k, v in attributes.items())))
        if key not in seen:
            seen.add(key)
            unique.append(script)
    context["script_files"] = unique


def setup(app):
    app.connect("html-page-context", _unique_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
