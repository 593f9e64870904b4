"""Verdicts: the paper's number by the tolerance rule (question 1) and the book's test against nulls (question 2);
intervals pass, fail or straddle a test; a finding holds only when every null it names ran and failed; a value
without an interval is judged only when deterministic; identities, null-controls, not-applicable and missing
values get their own words; claims are checked."""
import json
import math

import numpy as np
import pytest

from lotlib.stats import (
    Estimate,
    bootstrap,
    bootstrap_mean,
    exact,
    over_seeds,
    proportion,
)
from lotlib.summary import not_applicable
from lotlib.verdicts import (
    CROSS_MODEL_FACTOR,
    Null,
    against_paper,
    atlas_table,
    band,
    built_books,
    format_value,
    headline,
    load_claims,
    outcome,
    paper_numbers,
    report_table,
    revision_words,
    verdict,
    verdict_changes,
    verdict_heatmap,
)

AT_LEAST_HALF = {"kind": "min", "bound": 0.5}


def est(value, lo, hi):
    return Estimate(value, lo, hi, 100, "pilots").to_json()


@pytest.mark.parametrize("value,expected", [(est(0.7, 0.6, 0.8), "passes"), (est(0.4, 0.3, 0.45), "fails"),
                                            (est(0.55, 0.45, 0.65), "straddles"), (0.7, "no interval"), (None, "missing"),
                                            (not_applicable("RMSNorm"), "not applicable")])
def test_an_interval_passes_fails_or_straddles(value, expected):
    assert outcome(value, AT_LEAST_HALF, None) == expected


def test_tests_relative_to_the_paper():
    assert outcome(est(0.2, 0.15, 0.24), {"kind": "abs", "tol": 0.1}, 0.25) == "passes"
    assert outcome(est(0.2, 0.1, 0.24), {"kind": "abs", "tol": 0.1}, 0.25) == "straddles"
    assert outcome(est(0.3, 0.28, 0.32), {"kind": "rel", "tol": 0.25}, 0.18) == "fails"
    assert outcome(est(1.0, 0.9, 1.1), {"kind": "range", "lo": 0.8, "hi": 1.25}, None) == "passes"
    assert outcome(True, {"kind": "true"}, None) == "passes" and outcome(False, {"kind": "true"}, None) == "fails"


FINDING = {"nature": "finding", "test": AT_LEAST_HALF, "paper_value": None}


def test_a_finding_holds_only_when_every_null_fails():
    ours = est(0.7, 0.6, 0.8)
    failing, passing = Null("untrained", est(0.1, 0.0, 0.2), "fails"), Null("cloud", est(0.9, 0.8, 1.0), "passes")
    assert verdict(FINDING, ours, [failing]) == "holds"
    assert verdict(FINDING, ours, [failing, passing]) == "not diagnostic"
    assert verdict(FINDING, ours, [Null("untrained", est(0.5, 0.4, 0.6), "straddles")]) == "inconclusive"
    assert verdict(FINDING, ours, [Null("untrained", None, "missing")]) == "inconclusive"
    assert verdict(FINDING, ours, []) == "inconclusive"  # no null was run: nothing can hold
    assert verdict(FINDING, est(0.3, 0.2, 0.4), [failing]) == "fails"
    assert verdict(FINDING, est(0.5, 0.4, 0.6), [failing]) == "inconclusive"
    assert verdict({**FINDING, "nature": "identity"}, ours, []) == "identity holds"
    assert verdict({**FINDING, "nature": "identity"}, est(0.3, 0.3, 0.3), []) == "identity fails"
    assert verdict({**FINDING, "nature": "null-control"}, ours, []) == "holds"
    assert verdict({**FINDING, "nature": "null-control"}, est(0.3, 0.2, 0.4), []) == "fails"
    assert verdict(FINDING, not_applicable("no beta"), [failing]) == "not applicable"
    assert verdict({**FINDING, "test": {"kind": "none"}}, ours, []) == "not applicable"


def test_a_value_without_a_finite_interval_is_inconclusive_unless_deterministic():
    failing = Null("untrained", est(0.1, 0.0, 0.2), "fails")
    no_interval = Estimate(0.6, math.nan, math.nan, 1, "seeds").to_json()  # one seed: 0.6 [nan, nan]
    assert outcome(no_interval, AT_LEAST_HALF, None) == "no interval"
    assert verdict(FINDING, no_interval, [failing]) == "inconclusive"
    assert verdict({**FINDING, "deterministic": True}, no_interval, [failing]) == "holds"
    one_sentence = exact(0.0, unit="sentence").to_json()  # a point value with no sampling behind it
    assert verdict({**FINDING, "test": {"kind": "max", "bound": 0}}, one_sentence, [failing]) == "inconclusive"
    assert outcome(0.7, AT_LEAST_HALF, None, deterministic=True) == "passes"  # a property of the weights
    assert verdict(FINDING, est(0.7, 0.6, 0.8), [Null("untrained", no_interval, "no interval")]) == "inconclusive"


def test_a_missing_or_not_applicable_null_leaves_a_finding_inconclusive_and_is_named():
    from lotlib.verdicts import unresolved_nulls

    failing = Null("cloud", est(0.1, 0.0, 0.2), "fails")
    for missing in (Null("untrained", None, "missing"), Null("untrained", not_applicable("x"), "not applicable")):
        assert verdict(FINDING, est(0.7, 0.6, 0.8), [failing, missing]) == "inconclusive"
        assert unresolved_nulls([failing, missing]) == ["untrained"]


def test_true_means_the_boolean_true():
    test = {"kind": "true"}
    assert outcome(True, test, None) == "passes" and outcome(False, test, None) == "fails"
    for truthy in (1, 1.0, "yes", [0], est(1.0, 1.0, 1.0)):
        assert outcome(truthy, test, None) == "no interval", truthy
    assert verdict({"nature": "identity", "test": test, "paper_value": None}, "yes", []) == "inconclusive"


def test_the_tolerance_rule_bands():
    assert band("0.18", "rate") == pytest.approx((0.175 / CROSS_MODEL_FACTOR, 0.185 * CROSS_MODEL_FACTOR))
    assert CROSS_MODEL_FACTOR == pytest.approx(1.5)  # lambda: Llama 2 7B (0.27) over GPT-2 medium (0.18)
    assert band("50-51%", "share") == pytest.approx((0.495, 0.515))
    assert band("60%", "share") == pytest.approx((0.595, 0.605))
    assert band("2.5", "share") == pytest.approx((2.45, 2.55))
    assert band("~0", "share", floor=(0.01, 0.03)) == (0.0, 0.03)  # a non-negative statistic: from 0
    assert band("~0", "share", floor=(-0.02, 0.03)) == (-0.02, 0.03)  # a signed one: from the floor's low end
    with pytest.raises(ValueError, match="needs as_paper.floor"):
        band("~0", "share")
    with pytest.raises(ValueError, match="not a number"):
        band("about a half", "share")


PAPER_CLAIM = {"id": "X", "nature": "finding", "origin": "paper", "test": {"kind": "paper"}, "paper_value": "0.18",
               "as_paper": {"key": "paper_lambda", "printed": "0.18", "scale": "rate", "protocol": "the authors'"}}


def test_against_the_paper_agrees_differs_or_cannot_say():
    judge = lambda value: against_paper(PAPER_CLAIM, {"paper_lambda": value})[0]  # noqa: E731
    assert judge(est(0.25, 0.2, 0.3)) == "agrees"  # meets the band [0.117, 0.278]
    assert judge(est(0.4, 0.35, 0.45)) == "differs"
    assert judge(est(0.2, math.nan, math.nan)) == "inconclusive"
    assert judge(None) == "missing"
    assert against_paper({**PAPER_CLAIM, "origin": "extension", "as_paper": None}, {})[0] == "extension"
    assert against_paper({**PAPER_CLAIM, "as_paper": None}, {})[0] == "qualitative"
    assert against_paper({**PAPER_CLAIM, "nature": "identity"}, {})[0] == "not applicable"
    # a test of kind paper judges the book's value and its nulls by the same band
    ours, cloud = est(0.19, 0.18, 0.2), est(0.2, 0.19, 0.21)
    band_ = band("0.18", "rate")
    assert outcome(cloud, PAPER_CLAIM["test"], None, band_=band_) == "passes"
    assert verdict(PAPER_CLAIM, ours, [Null("cloud", cloud, "passes")], band_) == "not diagnostic"


def _write(folder, name, values, parameters=None, revision=None):
    folder.mkdir(parents=True, exist_ok=True)
    summary = {"values": values, "parameters": parameters or {}, "model_revision": revision}
    (folder / f"{name}.summary.json").write_text(json.dumps(summary))


CLAIMS = """
- id: X-share
  paper: B
  nature: finding
  claim: "a share above a half"
  paper_value: 0.5
  key: share
  test: {kind: min, bound: 0.5, source: "the book"}
  null: {key: share_shuffled, name: "shuffled pilots"}
- id: X-exact
  paper: A
  nature: identity
  claim: "an exact property"
  paper_value: "exact"
  key: gap
  test: {kind: max, bound: 1.0e-6, source: "float64 rounding"}
  deterministic: true
"""


def test_report_and_atlas_read_ours_and_the_nulls(tmp_path):
    claims = tmp_path / "claims"
    claims.mkdir()
    (claims / "chapter.yml").write_text(CLAIMS)
    _write(tmp_path / "a", "chapter", {"share": est(0.8, 0.7, 0.9), "share_shuffled": est(0.2, 0.1, 0.3), "gap": 0.0},
           {"model": "a"})
    _write(tmp_path / "null", "chapter", {"share": est(0.75, 0.6, 0.85), "gap": 0.0})
    table = report_table(claims, tmp_path / "a", tmp_path / "null").set_index("id")
    assert table.loc["X-share", "verdict"] == "not diagnostic"  # the untrained model passes too
    assert [n.outcome for n in table.loc["X-share", "nulls"]] == ["passes", "fails"]
    assert table.loc["X-exact", "verdict"] == "identity holds"
    counts = headline(table.reset_index())
    assert counts.loc[("B", "findings"), "not diagnostic"] == 1
    assert counts.loc[("B", "numbers of the paper"), "qualitative"] == 1  # the paper gives no band for it
    assert ("A", "identities") in counts.index and ("A", "numbers of the paper") not in counts.index
    _write(tmp_path / "books" / "a" / "notebooks", "chapter", json.loads((tmp_path / "a" / "chapter.summary.json")
                                                                          .read_text())["values"], {"model": "a"})
    _write(tmp_path / "books" / "untrained-a" / "notebooks", "chapter", {"share": est(0.75, 0.6, 0.85), "gap": 0.0},
           {"model": "untrained:a"})
    books = built_books(tmp_path / "books")
    assert set(books) == {"a", "untrained:a"}
    atlas = atlas_table(claims, books).set_index(["id", "model"])
    assert list(atlas.index.get_level_values("model").unique()) == ["a", "untrained:a"]  # trained first
    assert atlas.loc[("X-share", "a"), "value"] == "0.8 [0.7, 0.9]"
    assert atlas.loc[("X-share", "a"), "verdict"] == "not diagnostic"  # judged against its untrained book
    assert atlas.loc[("X-share", "untrained:a"), "verdict"] == "inconclusive"  # its own null was not measured
    import matplotlib

    matplotlib.use("Agg")
    ax = verdict_heatmap(atlas.reset_index())
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "untrained:a"]
    assert "0.8" in [t.get_text() for t in ax.texts]  # each cell's value as text


AS_PAPER_CLAIM = """
- id: X-paper
  paper: B
  nature: finding
  claim: "a rate, by the paper's protocol another statistic than the book's"
  paper_value: "0.18"
  key: rate
  test: {kind: min, bound: 0.0, source: "the book"}
  as_paper: {key: rate_paper, printed: "0.18", scale: rate, protocol: "the authors'"}
"""


def test_the_report_opens_with_the_papers_numbers_and_why(tmp_path):
    claims = tmp_path / "claims"
    claims.mkdir()
    (claims / "chapter.yml").write_text(AS_PAPER_CLAIM + CLAIMS)
    low, high = band("0.18", "rate")  # the band the tolerance rule gives the printed 0.18
    cases = {"inside": est(0.2, 0.19, 0.21), "below": est(low / 2, low / 3, low / 1.5),
             "meets": est(high, 0.9 * high, 1.1 * high), "no interval": est(0.2, math.nan, math.nan)}
    words = {}
    for name, value in cases.items():
        _write(tmp_path / name, "chapter", {"rate": est(0.2, 0.1, 0.3), "rate_paper": value, "share": 0.8})
        numbers = paper_numbers(report_table(claims, tmp_path / name))
        assert list(numbers.columns) == ["claim", "the paper", "ours [95% interval]", "verdict", "why", "chapter"]
        assert numbers["claim"].str.startswith("X-paper").tolist() == [True]  # only claims the paper numbers
        words[name] = (numbers.loc[0, "verdict"], numbers.loc[0, "why"])
    assert words["inside"] == ("agrees", f"inside [{low:.3g}, {high:.3g}]")
    assert words["below"] == ("differs", f"below [{low:.3g}, {high:.3g}]")
    assert words["meets"] == ("agrees", f"meets [{low:.3g}, {high:.3g}]")  # the rule: the interval meets the band
    assert words["no interval"] == ("inconclusive", "ours has no interval")
    assert numbers.loc[0, "the paper"] == "0.18" and numbers.loc[0, "chapter"] == "chapter"


def test_the_atlas_orders_models_by_width_and_lists_the_verdicts_that_move(tmp_path):
    """Trained models from the narrowest to the widest (the width and depth their chapters recorded), the untrained
    ones last in the same order; a claim moves when two trained models where it was judged disagree, and a cell
    that is not applicable (an encoder) or missing does not make it move."""
    claims = tmp_path / "claims"
    claims.mkdir()
    (claims / "chapter.yml").write_text(CLAIMS + AS_PAPER_CLAIM)
    books = tmp_path / "books"
    shares = {"wide": (0.8, 0.7, 0.9), "narrow": (0.3, 0.2, 0.4), "middle": (0.8, 0.75, 0.85)}
    widths = {"wide": (1536, 28), "narrow": (576, 30), "middle": (640, 18)}
    for name, share in shares.items():
        d, n = widths[name]
        values = {"share": est(*share), "share_shuffled": est(0.1, 0.0, 0.2), "gap": 0.0, "d_model": d, "n_layers": n,
                  "rate": est(0.5, 0.4, 0.6), "rate_paper": est(*((0.4, 0.38, 0.42) if name == "wide" else (0.18, 0.17, 0.19)))}
        _write(books / name / "notebooks", "chapter", values, {"model": name})
        _write(books / f"untrained-{name}" / "notebooks", "chapter",
               {"share": est(0.1, 0.0, 0.2), "gap": 0.0, "d_model": d, "n_layers": n}, {"model": f"untrained:{name}"})
    _write(books / "encoder" / "notebooks", "chapter",
           {"share": not_applicable("an encoder"), "gap": 0.0, "d_model": 384, "n_layers": 6}, {"model": "encoder"})
    _write(books / "unshaped" / "notebooks", "chapter", {"share": est(*shares["wide"]), "gap": 0.0}, {"model": "unshaped"})
    atlas = atlas_table(claims, built_books(books))
    assert list(dict.fromkeys(atlas["model"])) == ["encoder", "narrow", "middle", "wide", "unshaped", "untrained:narrow",
                                                   "untrained:middle", "untrained:wide"]
    assert set(atlas[atlas["model"] == "wide"]["shape"]) == {"D 1536, L 28"}
    assert set(atlas[atlas["model"] == "unshaped"]["shape"]) == {"shape not recorded"}
    moving = verdict_changes(atlas)
    assert list(moving.index.get_level_values("id")) == ["X-share"]  # the identity holds everywhere
    assert list(moving.columns) == ["encoder", "narrow", "middle", "wide", "unshaped"]
    row = moving.loc["X-share"].iloc[0]
    assert row["narrow"] == "fails (0.3 [0.2, 0.4])" and row["wide"].startswith("holds")
    assert row["encoder"].startswith("not applicable")
    assert row["unshaped"].startswith("inconclusive")  # no untrained book: judged, so it counts
    same = atlas[atlas["model"].isin(["encoder", "middle", "wide"])]
    assert verdict_changes(same).empty  # holds on both causal models; the encoder's cell is left out
    # question 1 reads the value measured by the paper's protocol, not the book's own: so do its cells
    by_paper = verdict_changes(atlas, "against paper").loc["X-paper"].iloc[0]
    assert by_paper["narrow"] == "agrees (0.18 [0.17, 0.19])" and by_paper["wide"] == "differs (0.4 [0.38, 0.42])"
    import matplotlib

    matplotlib.use("Agg")
    labels = [t.get_text() for t in verdict_heatmap(atlas, column="against paper").texts]
    assert "0.4" in labels and "0.5" not in labels  # the paper-protocol value, never the book's 0.5


def test_the_report_and_atlas_carry_the_model_revision(tmp_path):
    claims = tmp_path / "claims"
    claims.mkdir()
    (claims / "chapter.yml").write_text(CLAIMS)
    commit = "0123456789abcdef0123456789abcdef01234567"
    _write(tmp_path / "books" / "org--m" / "notebooks", "chapter", {"gap": 0.0}, {"model": "org/m"}, commit)
    table = report_table(claims, tmp_path / "books" / "org--m" / "notebooks")
    assert set(table["model revision"]) == {commit} and revision_words(table) == commit[:12]
    assert revision_words(table.assign(**{"model revision": ["", ""]})) == "not recorded"
    assert revision_words(table.assign(**{"model revision": ["a" * 40, "b" * 40]})) == f"several: {'a' * 12}, {'b' * 12}"
    atlas = atlas_table(claims, built_books(tmp_path / "books"))
    assert set(atlas["model revision"]) == {commit}


def test_malformed_claims_are_refused(tmp_path):
    (tmp_path / "c.yml").write_text(CLAIMS.replace("nature: finding", "nature: guess"))
    with pytest.raises(ValueError, match="nature not in"):
        load_claims(tmp_path)
    (tmp_path / "c.yml").write_text(CLAIMS.replace("test: {kind: min, bound: 0.5, source: \"the book\"}",
                                                   "test: {kind: \"true\"}"))
    with pytest.raises(ValueError, match="a finding needs a measured value"):
        load_claims(tmp_path)
    (tmp_path / "c.yml").write_text(CLAIMS.replace(', source: "the book"', ""))
    with pytest.raises(ValueError, match="does not say where it comes from"):
        load_claims(tmp_path)
    (tmp_path / "c.yml").write_text(CLAIMS.replace("  key: share\n", "  origin: extension\n  key: share\n  as_paper: "
                                                   "{key: k, printed: '0.5', scale: share, protocol: p}\n"))
    with pytest.raises(ValueError, match="as_paper is for a number the paper prints"):
        load_claims(tmp_path)


def test_intervals_are_seeded_and_cover_the_truth():
    import numpy as np

    sample = np.random.default_rng(0).normal(1.0, 1.0, size=400)
    a = bootstrap_mean(sample, unit="draws", seed=3)
    assert a == bootstrap_mean(sample, unit="draws", seed=3) and a.lo < 1.0 < a.hi
    b = bootstrap(lambda idx: float(np.median(sample[idx])), len(sample), unit="draws", n_boot=300, seed=1)
    assert b.lo < b.value < b.hi and b.n == 400
    s = over_seeds([0.9, 1.1, 1.0, 1.05])
    assert s.method == "seeds" and s.lo < 1.0125 < s.hi
    p = proportion(45, 50, unit="positions")
    assert 0.78 < p.lo < 0.9 < p.hi <= 1.0
    assert exact(3).lo == exact(3).hi == 3.0
    assert format_value(Estimate(0.5, 0.4, 0.6, 10, "heads").to_json()) == "0.5 [0.4, 0.6] (n = 10 heads)"
    assert math.isnan(Estimate.from_json({"value": None, "lo": None, "hi": None, "n": 1, "unit": "x"}).value)


def test_a_chapter_closes_with_its_outcomes_and_nulls(tmp_path):
    from lotlib.verdicts import chapter_outcomes

    (tmp_path / "chapter.yml").write_text(CLAIMS)
    values = {"share": est(0.8, 0.7, 0.9), "share_shuffled": est(0.2, 0.1, 0.3), "gap": 0.0}
    table = chapter_outcomes("chapter", values, tmp_path).set_index("claim")
    assert table.loc["X-share", "outcome"] == "passes" and "shuffled pilots" in table.loc["X-share", "nulls"]
    assert "(fails)" in table.loc["X-share", "nulls"] and table.loc["X-exact", "nulls"] == "—"


def test_a_chapter_closes_with_a_sentence_per_claim(tmp_path):
    from lotlib.verdicts import closing_sentences

    (tmp_path / "chapter.yml").write_text(CLAIMS)
    values = {"share": est(0.8, 0.7, 0.9), "share_shuffled": est(0.6, 0.55, 0.7), "gap": 0.0}
    share, *_ = closing_sentences("chapter", values, "m", "any ensemble does this", tmp_path)
    assert share.startswith("X-share holds on m: 0.8 [0.7, 0.9]")
    assert "0.6 [0.55, 0.7] (n = 100 pilots), passes too (not diagnostic: any ensemble does this)" in share
    values["share_shuffled"] = est(0.2, 0.1, 0.3)
    assert "not diagnostic" not in closing_sentences("chapter", values, "m", "", tmp_path)[0]


def test_a_chapter_opened_outside_the_project_finds_its_claims(tmp_path, monkeypatch):
    from lotlib.verdicts import chapter_outcomes

    monkeypatch.chdir(tmp_path)  # no book/_config.yml above: the claims of lotlib's own checkout
    outcomes = chapter_outcomes("a3_reachable_tokens", {})
    assert "A3-predictable" in set(outcomes["claim"]) and "missing" in set(outcomes["outcome"])


def test_a_glued_float_reads_with_four_digits_and_formats_as_asked():
    from IPython.core.formatters import format_display_data
    from myst_nb.core.variables import format_plain_text

    from lotlib.summary import _Shown

    shown = format_display_data(_Shown(np.float64(0.0035282045289527315)))[0]["text/plain"]
    assert shown == "0.003528"  # what {glue:text}`name` shows
    assert format_plain_text(shown, ".1e") == "3.5e-03"  # what {glue:text}`name:.1e` shows


def test_without_the_untrained_book_no_finding_holds(tmp_path):
    from lotlib.verdicts import UNTRAINED_NULL

    (tmp_path / "chapter.yml").write_text(CLAIMS)
    _write(tmp_path / "a", "chapter", {"share": est(0.8, 0.7, 0.9), "share_shuffled": est(0.2, 0.1, 0.3), "gap": 0.0})
    table = report_table(tmp_path, tmp_path / "a").set_index("id")  # the untrained book was not built
    assert table.loc["X-share", "verdict"] == "inconclusive"
    assert table.loc["X-share", "unresolved"] == [UNTRAINED_NULL]
    assert table.loc["X-exact", "verdict"] == "identity holds"  # identities need no null


def test_traveling_words_findings_are_judged_on_untrained_gpt2_small_too(tmp_path):
    from lotlib.verdicts import (
        PAPER_NULL,
        PAPER_NULL_MODEL,
        UNTRAINED_NULL,
        chapter_outcomes,
    )

    claims = CLAIMS.replace("paper: B", "paper: A") + """
- id: X-shown
  paper: A
  nature: finding
  claim: "shown, no verdict"
  paper_value: "qualitative"
  key: share
  test: {kind: none}
"""
    (tmp_path / "chapter.yml").write_text(claims)
    ours = {"share": est(0.8, 0.7, 0.9), "share_shuffled": est(0.2, 0.1, 0.3), "gap": 0.0}
    _write(tmp_path / "books" / "a" / "notebooks", "chapter", ours, {"model": "a"})
    _write(tmp_path / "books" / "untrained-a" / "notebooks", "chapter", {"share": est(0.2, 0.1, 0.3)},
           {"model": "untrained:a"})
    books = tmp_path / "books"
    table = report_table(tmp_path, books / "a" / "notebooks", books / "untrained-a" / "notebooks").set_index("id")
    assert [n.name for n in table.loc["X-share", "nulls"]] == [UNTRAINED_NULL, PAPER_NULL, "shuffled pilots"]
    assert table.loc["X-share", "verdict"] == "inconclusive"  # the paper's architecture was not run
    assert table.loc["X-share", "unresolved"] == [PAPER_NULL]
    assert table.loc["X-shown", "verdict"] == "not applicable"  # no test, no paper null named
    assert PAPER_NULL not in [n.name for n in table.loc["X-shown", "nulls"]]
    for paper_value, expected in ((est(0.3, 0.2, 0.4), "holds"), (est(0.75, 0.6, 0.85), "not diagnostic")):
        _write(books / "untrained-gpt2" / "notebooks", "chapter", {"share": paper_value},
               {"model": PAPER_NULL_MODEL})
        table = report_table(tmp_path, books / "a" / "notebooks", books / "untrained-a" / "notebooks",
                             books / "untrained-gpt2" / "notebooks").set_index("id")
        assert table.loc["X-share", "verdict"] == expected
        atlas = atlas_table(tmp_path, built_books(books)).set_index(["id", "model"])
        assert atlas.loc[("X-share", "a"), "verdict"] == expected  # the atlas finds the paper's architecture too
    # a chapter's own closing table shows only the nulls it recorded; the other books are judged in the report
    rows = chapter_outcomes("chapter", ours, tmp_path).set_index("claim")
    assert rows.loc["X-share", "nulls"].startswith("shuffled pilots")


def test_a_closing_sentence_answers_both_questions(tmp_path):
    from lotlib.verdicts import closing_sentences

    claim = """
- id: X-rate
  paper: B
  nature: finding
  claim: "a rate"
  paper_value: "about 0.18"
  key: rate
  test: {kind: paper}
  as_paper: {key: paper_rate, printed: "0.18", scale: rate, protocol: "the authors' code"}
"""
    (tmp_path / "chapter.yml").write_text(claim)
    values = {"rate": est(0.5, 0.45, 0.55), "paper_rate": est(0.2, 0.19, 0.21)}
    (sentence,) = closing_sentences("chapter", values, "m", "", tmp_path)
    assert sentence.startswith("X-rate agrees with the paper's 0.18 by its protocol: 0.2 [0.19, 0.21]")
    assert "the book's test does not hold on m: 0.5 [0.45, 0.55]" in sentence


def test_a_second_reading_is_judged_by_the_same_band_and_shown_beside_the_first(tmp_path):
    from lotlib.verdicts import chapter_outcomes, claim_keys, closing_sentences

    claim = """
- id: X-svm
  paper: B
  nature: finding
  claim: "an accuracy"
  paper_value: 0.505
  key: held_out
  test: {kind: paper}
  as_paper:
    key: all_bases
    printed: "50-51%"
    scale: share
    protocol: "the authors' code, our split"
    second_reading: {key: training_bases, reading: "the bases fit on the training pilots"}
"""
    (tmp_path / "chapter.yml").write_text(claim)
    values = {"held_out": est(0.6, 0.55, 0.65), "all_bases": est(0.4, 0.39, 0.41), "training_bases": est(0.5, 0.48, 0.52)}
    (entry,) = load_claims(tmp_path)
    assert against_paper(entry, values)[0] == "differs"  # the band of 50-51% is [0.495, 0.515]
    assert against_paper(entry, values, "second_reading")[:2] == ("agrees", values["training_bases"])
    assert "training_bases" in claim_keys(entry)
    (sentence,) = closing_sentences("chapter", values, "m", "", tmp_path)
    assert "differs from the paper's 50-51% by its protocol: 0.4 [0.39, 0.41]" in sentence
    assert "; read with the bases fit on the training pilots, it agrees with the paper's 50-51%: 0.5 [0.48, 0.52]" in sentence
    row = chapter_outcomes("chapter", values, tmp_path).iloc[0]
    assert row["against paper"] == "differs" and "(agrees)" in row["paper's protocol"]  # the headline keeps the first
    (tmp_path / "chapter.yml").write_text(claim.replace(', reading: "the bases fit on the training pilots"', ""))
    with pytest.raises(ValueError, match="second_reading needs key and reading"):
        load_claims(tmp_path)


def test_a_paper_number_measured_in_another_chapter_is_read_from_that_chapter(tmp_path):
    """B4's zero mean: the book's test in one chapter, the paper's statistic in the chapter of the authors'
    protocol (`as_paper.chapter`): the report reads each from its own summary, the claim's chapter says where
    the paper's side is, and a chapter that does not apply records the keys the report reads from it."""
    from lotlib.verdicts import (
        ELSEWHERE,
        chapter_outcomes,
        claim_keys,
        closing_sentences,
        conclude_not_applicable,
        recorded_keys,
    )

    claim = """
- id: X-zero
  paper: B
  nature: finding
  claim: "a residual of zero mean"
  paper_value: "~0"
  key: offset
  test: {kind: max, bound: 0.05, source: "the book"}
  as_paper: {key: paper_z, floor: paper_z_floor, printed: "~0", scale: share, protocol: "the authors'", chapter: paper}
"""
    claims = tmp_path / "claims"
    claims.mkdir()
    (claims / "held_out.yml").write_text(claim)
    (claims / "paper.yml").write_text("")
    _write(tmp_path / "a", "held_out", {"offset": est(0.01, 0.0, 0.02)})
    _write(tmp_path / "a", "paper", {"paper_z": est(0.3, 0.29, 0.31), "paper_z_floor": est(0.01, 0.0, 0.02)})
    row = report_table(claims, tmp_path / "a").set_index("id").loc["X-zero"]
    assert row["against paper"] == "differs" and row["as paper"]["value"] == 0.3  # above the floor's band
    assert row["outcome"] == "passes"  # the book's test, from the claim's own chapter
    (tmp_path / "a" / "paper.summary.json").unlink()
    assert report_table(claims, tmp_path / "a").set_index("id").loc["X-zero", "against paper"] == "missing"
    (entry,) = load_claims(claims, "held_out")
    assert claim_keys(entry) == {"offset"}
    assert recorded_keys("paper", claims) == {"paper_z", "paper_z_floor"}
    (sentence,) = closing_sentences("held_out", {"offset": est(0.01, 0.0, 0.02)}, "m", "", claims)
    assert sentence.startswith("X-zero is measured by the paper's protocol in paper (the report judges it)")
    table = chapter_outcomes("held_out", {"offset": est(0.01, 0.0, 0.02)}, claims)
    assert table.iloc[0]["against paper"] == ELSEWHERE and table.iloc[0]["paper's protocol"] == "in paper"
    from unittest import mock

    with mock.patch("lotlib.verdicts.closing.record") as record, mock.patch("IPython.display.display"):
        conclude_not_applicable("paper", "m", "no LM head", claims)
    assert set(record.call_args.args[0]) == {"paper_z", "paper_z_floor"}
    (claims / "held_out.yml").write_text(claim.replace("{kind: max, bound: 0.05, source: \"the book\"}",
                                                       "{kind: paper}"))
    with pytest.raises(ValueError, match="judges the as_paper value of its own chapter"):
        load_claims(claims)
