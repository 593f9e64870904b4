"""The words of the two verdicts, their colours, and the names of the nulls every book runs."""

from __future__ import annotations

AGAINST_PAPER = (
    "agrees",
    "differs",
    "inconclusive",
    "qualitative",
    "extension",
    "not applicable",
    "missing",
)
VERDICTS = (
    "holds",
    "fails",
    "inconclusive",
    "not diagnostic",
    "identity holds",
    "identity fails",
    "not applicable",
    "missing",
)
COLORS = {
    "holds": "#2e7d32",
    "agrees": "#2e7d32",
    "fails": "#c62828",
    "differs": "#c62828",
    "inconclusive": "#ef6c00",
    "not diagnostic": "#6a1b9a",
    "identity holds": "#546e7a",
    "identity fails": "#b71c1c",
    "qualitative": "#8d6e63",
    "extension": "#0277bd",
    "not applicable": "#9e9e9e",
    "missing": "#424242",
}
UNTRAINED_NULL = "untrained model, same architecture"
UNTRAINED_PREFIX = "untrained:"
# Traveling Words measured GPT-2 small: its judged findings (a test other than `none`) are also run on GPT-2
# small's architecture with random weights (LayerNorm, GELU, learned positions, GPT-2's tokenizer), so that a
# finding the book's model shows is not one any LayerNorm transformer shows at initialisation. Lines of
# Thought's untrained-model claims run on an untrained GPT-2 medium inside the null-tests chapter (`paper_null`).
PAPER_NULL_MODEL = "untrained:gpt2"
PAPER_NULL_PAPER = "A"
PAPER_NULL = "untrained GPT-2 small, the paper's architecture"
# the nulls that are other books, judged in the report (a chapter's own table shows only the nulls it recorded)
BOOK_NULLS = (UNTRAINED_NULL, PAPER_NULL)
# question 1 in the closing table of a chapter whose claim is measured by the paper's protocol in another
# (`as_paper.chapter`); the report, which reads every chapter, never says it
ELSEWHERE = "in another chapter"
