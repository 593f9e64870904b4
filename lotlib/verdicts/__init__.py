"""Judging the papers' claims: the claims format, the tolerance rule, verdicts, the report and atlas tables."""

from .atlas import (  # noqa: F401
    JUDGED,
    UNJUDGED,
    atlas_table,
    built_books,
    by_scale,
    model_shape,
    shape_words,
    verdict_changes,
)
from .claims import (  # noqa: F401
    KINDS,
    NATURES,
    ORIGINS,
    PAPERS,
    REQUIRED,
    SCALES,
    SOURCED,
    chapter_claims,
    claim_keys,
    load_claims,
    paper_keys,
    recorded_keys,
)
from .closing import (  # noqa: F401
    SAID,
    SAID_PAPER,
    closing_sentences,
    conclude,
    conclude_not_applicable,
)
from .heatmaps import verdict_bars, verdict_heatmap  # noqa: F401
from .judging import (  # noqa: F401
    Null,
    describe_test,
    format_value,
    judge,
    outcome,
    paper_nulled,
    unresolved_nulls,
    verdict,
)
from .names import (  # noqa: F401
    AGAINST_PAPER,
    BOOK_NULLS,
    COLORS,
    ELSEWHERE,
    PAPER_NULL,
    PAPER_NULL_MODEL,
    PAPER_NULL_PAPER,
    UNTRAINED_NULL,
    UNTRAINED_PREFIX,
    VERDICTS,
)
from .tables import (  # noqa: F401
    GROUPS,
    PAPER_NUMBERS,
    chapter_outcomes,
    claims_table,
    claims_view,
    headline,
    paper_numbers,
    paper_numbers_view,
    paper_reason,
    report_table,
    revision_words,
)
from .tolerance import (  # noqa: F401
    CROSS_MODEL_FACTOR,
    TOLERANCE_RULE,
    against_paper,
    allowed,
    band,
    is_not_applicable,
    meets,
)
