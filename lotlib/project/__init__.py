"""The chapters (`notebooks/`) and the book's configuration and claims (`book/`), shipped inside the wheel so
that an installed lotlib runs and builds the book outside a clone; in a clone they stay at its top level."""

from pathlib import Path

HERE = Path(__file__).resolve().parent


def bundled_project() -> Path | None:
    """The project folder that the installed wheel carries (holding `book/` and `notebooks/`), or None in a
    clone, where the package has no copy."""
    return HERE if (HERE / "book" / "_config.yml").is_file() else None
