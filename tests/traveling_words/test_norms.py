"""The geometry of the norms: sqrt(d) up to eps, the hyperplane, gamma/beta, the A2 table, A3 scores."""
import numpy as np
import pandas as pd
import pytest
import torch

from lotlib import capture, load_model
from lotlib.models.view import Norm
from lotlib.traveling_words import norms as geometry
from lotlib.traveling_words import reachability


def _randomized(folder, seed=0):
    """The tiny model with random gamma (and beta) in every norm, so that they are not the identity."""
    model = load_model(str(folder))
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in model.hf.modules():
            if "norm" in type(module).__name__.lower():
                module.weight.copy_(torch.randn(module.weight.shape, generator=g))
                if getattr(module, "bias", None) is not None:
                    module.bias.copy_(torch.randn(module.bias.shape, generator=g))
    return model


def _states(d, seed=1):
    """Rows with scales from 1e-3 (eps matters) to 1e3 and a nonzero mean."""
    g = torch.Generator().manual_seed(seed)
    scale = torch.logspace(-3, 3, 40)[:, None]
    return (torch.randn(40, d, generator=g) + 0.5) * scale


@pytest.fixture(params=["tiny_gpt2_dir", "tiny_llama_dir"])
def model(request):
    return _randomized(request.getfixturevalue(request.param))


def test_normalized_norm_is_sqrt_d_up_to_the_eps_formula(model):
    view = model.view
    x = _states(view.d_model)
    for norm in view.reading_norms():
        measured = norm.normalize(x).double().norm(dim=1)
        predicted = norm.predicted_norm(x)
        torch.testing.assert_close(measured, predicted, rtol=2e-6, atol=0)
        assert predicted[0] < 0.99 * view.d_model ** 0.5  # eps bites at scale 1e-3
        assert abs(predicted[-1] - view.d_model ** 0.5) < 1e-9  # and not at 1e3


def test_module_output_is_gamma_times_sphere_point_plus_beta(model):
    """Undo beta and gamma on the real module's output: the sphere point; on the hyperplane for LN only."""
    view = model.view
    norm = view.final_norm
    x = _states(view.d_model)
    with torch.no_grad():
        y = view._final_norm_module(x).double()
    x_hat = (y - (0 if norm.beta is None else norm.beta.double())) / norm.gamma.double()
    torch.testing.assert_close(x_hat.norm(dim=1), norm.predicted_norm(x), rtol=1e-4, atol=0)
    if norm.kind == "layer":
        assert x_hat.sum(1).abs().max() < 1e-3 * view.d_model ** 0.5  # x_hat . 1 = 0: LN(x) . 1 = beta . 1 if gamma = 1
        assert geometry.cos_to_ones(x).abs().min() > 1e-3  # the input was off the hyperplane
    else:
        torch.testing.assert_close(geometry.cos_to_ones(x_hat), geometry.cos_to_ones(x), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("fixture", ["tiny_gpt2_dir", "tiny_llama_dir", "tiny_gemma3_dir"])
def test_norm_module_is_the_geometric_construction_and_a_wrong_one_is_seen(fixture, request):
    """The block's own norm module (Gemma stores gamma - 1) equals center, sphere, gamma, beta to float32
    round-off; a construction with the stored weight as gamma, or without centering, is far off."""
    view = _randomized(request.getfixturevalue(fixture)).view
    x = _states(view.d_model)
    module, norm = view.block_norm_module(1), view.block_norm(1)
    assert geometry.construction_gap(module, norm, x) < 1e-5
    by_hand = norm.center(x.double())  # the same construction written with the mean, float64
    by_hand = by_hand / torch.sqrt(by_hand.pow(2).mean(1, keepdim=True) + norm.eps) * norm.gamma.double()
    by_hand = by_hand if norm.beta is None else by_hand + norm.beta.double()
    torch.testing.assert_close(geometry.geometric_norm(x, norm), by_hand, rtol=1e-10, atol=1e-12)
    wrong = Norm(norm.kind, module.weight.detach(), norm.beta, norm.eps) if fixture == "tiny_gemma3_dir" else (
        norm.with_kind("rms" if norm.centers else "layer"))
    assert geometry.construction_gap(module, wrong, x) > 1e-2


def test_norm_statistics_match_a_direct_computation(model):
    ids = np.random.default_rng(0).integers(0, 50257, size=(3, 7))
    stats = geometry.norm_statistics(model, ids, batch_size=2, progress=False)
    L = model.view.n_layers
    X = torch.from_numpy(capture(model, ids, all_positions=True, progress=False))
    assert stats["residual"].shape == (3, 7, L + 1) and stats["d"] == model.view.d_model
    np.testing.assert_allclose(stats["residual"], X.norm(dim=-1).numpy(), rtol=1e-6)
    np.testing.assert_allclose(stats["normalized"], stats["predicted"], rtol=2e-6)
    d, m = model.view.d_model, stats["second_moment"]  # the formula's m, from the predicted norm
    np.testing.assert_allclose(stats["predicted"] ** 2, d * m / (m + model.view.final_norm.eps), rtol=1e-9)
    x_final = model.view.final_norm.normalize(X[..., L, :]).double().norm(dim=-1).numpy()
    np.testing.assert_allclose(stats["normalized"][..., L], x_final, rtol=1e-6)  # float32 GEMMs differ by batch
    cos = X.sum(-1) / (X.norm(dim=-1) * X.shape[-1] ** 0.5)
    np.testing.assert_allclose(stats["cos_ones"], cos.numpy(), atol=1e-6)
    if model.view.final_norm.centers:  # the normalized state is on the hyperplane, the incoming one is not
        assert np.abs(stats["cos_ones_normalized"]).max() < 1e-5 < np.abs(stats["cos_ones"]).max()
    else:  # RMSNorm rescales: x_hat is parallel to x
        np.testing.assert_allclose(stats["cos_ones_normalized"], stats["cos_ones"], atol=1e-5)
    table = geometry.norm_table(stats)
    assert len(table) == L + 1 and table["reading norm"].iloc[-1] == "final"


def test_reading_norms_are_block_inputs_then_final(model):
    norms = model.view.reading_norms()
    assert len(norms) == model.view.n_layers + 1
    torch.testing.assert_close(norms[1].gamma, model.view.block_norm(1).gamma)
    torch.testing.assert_close(norms[-1].gamma, model.view.final_norm.gamma)


def test_layer_norm_in_3d_lands_on_the_circle_of_sphere_and_plane():
    P = _states(3)
    gamma = torch.tensor([2.0, -0.5, 1.0])
    ln, rms = (Norm(kind, gamma, None, 1e-12) for kind in ("layer", "rms"))
    ln_hat, rms_hat = ln.normalize(P).double(), rms.normalize(P).double()
    for x_hat in (ln_hat, rms_hat):
        sqrt3 = torch.full((40,), 3 ** 0.5, dtype=torch.float64)
        torch.testing.assert_close(x_hat.norm(dim=1), sqrt3, rtol=1e-5, atol=0)
    assert geometry.cos_to_ones(ln_hat).abs().max() < 1e-6
    assert geometry.cos_to_ones(rms_hat).abs().min() > 1e-3  # RMSNorm stays off the plane
    assert (ln(P).double() / gamma).sum(1).abs().max() < 1e-5  # after gamma: the plane orthogonal to 1/gamma


def test_planar_stages_compose_the_real_operations():
    g = torch.Generator().manual_seed(4)
    points = torch.randn(50, 2, generator=g) * 3
    norm = Norm("layer", torch.tensor([0.5, -2.0]), torch.tensor([1.0, 0.25]), 1e-5)
    W = torch.randn(2, 2, generator=g)
    s = geometry.planar_stages(points, norm, W)
    predicted = Norm.unit("rms", 2, 1e-5).predicted_norm(points)
    torch.testing.assert_close(s["normalized"].norm(dim=1), predicted, rtol=1e-6, atol=0)
    r2 = s["normalized"].pow(2).sum(1)
    torch.testing.assert_close((s["stretched"] / norm.gamma.double()).pow(2).sum(1), r2)  # the ellipse
    torch.testing.assert_close(s["shifted"] - s["stretched"], norm.beta.double().expand(50, 2))
    torch.testing.assert_close(s["mapped"], s["shifted"] @ W.double())
    no_beta = geometry.planar_stages(points, Norm("rms", norm.gamma, None, 1e-5), W)
    torch.testing.assert_close(no_beta["shifted"], no_beta["stretched"])


def test_restrict_is_the_norm_on_fewer_coordinates():
    norm = Norm("layer", torch.arange(1.0, 7.0), torch.arange(6.0), 1e-5)
    small = norm.restrict([4, 1])
    assert small.gamma.tolist() == [5.0, 2.0] and small.beta.tolist() == [4.0, 1.0] and small.kind == "layer"
    assert norm.with_kind("rms").beta is None and norm.with_kind("rms").kind == "rms"


def test_qk_forms_are_gamma_sandwiched_head_forms(tiny_llama_dir):
    view = _randomized(tiny_llama_dir).view
    forms = geometry.qk_forms(view, 1)
    gamma, heads = view.block_norm(1).gamma.double(), view.heads(1)
    for h in range(view.n_heads):
        torch.testing.assert_close(forms[h], torch.diag(gamma) @ heads.W_QK(h).double() @ torch.diag(gamma))


def test_strongest_coordinates_find_the_dominant_block():
    form = torch.randn(20, 20, generator=torch.Generator().manual_seed(5)) * 0.01
    form[3, 7], form[7, 3], form[7, 7], form[12, 3] = 5.0, -4.0, 3.0, 2.0
    coords, share = geometry.strongest_coordinates(form, 3)
    assert set(coords[:2]) == {3, 7} and coords[2] == 12
    assert share == pytest.approx(float(form[coords][:, coords].pow(2).sum() / form.pow(2).sum()))
    gamma = torch.ones(20)
    gamma[7] = 1.5  # |gamma| ratio 1.5 between 3 and 7: excluded at min_ratio 2
    gamma[12] = 4.0
    assert set(geometry.strongest_coordinates(form, 2, gamma, 2.0)[0]) == {7, 12}  # form[7, 7] wins
    assert set(geometry.strongest_coordinates(form, 2, torch.ones(20), 2.0)[0]) == {3, 7}  # nothing qualifies


def test_beta_shift_is_the_centers_move_against_the_ellipsoids_size():
    """||beta|| / ||gamma||: 0 for beta = 0; gamma = 2 on 4 coordinates (norm 4) and beta = 2 e_1 give 1/2,
    whatever the sign or the axis of beta."""
    gamma = torch.full((4,), 2.0)
    assert geometry.beta_shift(gamma, torch.zeros(4)) == 0.0
    for beta in (torch.tensor([2.0, 0, 0, 0]), torch.tensor([0, 0, -2.0, 0])):
        assert geometry.beta_shift(gamma, beta) == pytest.approx(0.5)


def test_gamma_axis_ratio_is_one_for_a_sphere_and_the_quantile_ratio_otherwise():
    assert geometry.gamma_axis_ratio(torch.ones(64)) == 1.0
    gamma = -torch.linspace(1.0, 100.0, 101)  # |gamma| counts, a sign flip changes nothing
    assert geometry.gamma_axis_ratio(gamma) == pytest.approx(95.05 / 5.95)
    assert geometry.gamma_axis_ratio(torch.zeros(10)) == float("inf")


def test_random_direction_baselines():
    assert geometry.random_cos_to_ones(3) == pytest.approx(0.5)
    c = np.linspace(-1, 1, 20001)
    density = geometry.random_cos_density(c, 64)
    assert np.trapezoid(density, c) == pytest.approx(1.0, abs=1e-6)
    assert np.trapezoid(np.abs(c) * density, c) == pytest.approx(geometry.random_cos_to_ones(64), rel=1e-6)


@pytest.mark.parametrize("kind", ["layer", "rms"])
def test_table_identities_and_values(kind):
    g = torch.Generator().manual_seed(6)
    E = torch.randn(300, 16, generator=g) * torch.rand(300, 1, generator=g) + torch.randn(16, generator=g)
    reference = Norm.unit(kind, 16, 1e-5)
    distances = geometry.row_distances(E, reference)
    checks = geometry.table_identities(E, reference, distances)
    assert checks["cos_original_vs_scaled"] < 1e-12 and checks["cos_centered_vs_centered_scaled"] < 1e-12
    assert checks["norm_vs_eps_formula"] < 1e-5 and checks["norm_vs_sqrt_d"] < 1e-3
    # an independent computation of the table, row by row in numpy
    e = E.double().numpy()
    ref = e - e.mean(1, keepdims=True) if kind == "layer" else e
    ref = ref / np.sqrt((ref ** 2).mean(1, keepdims=True) + 1e-5)
    s = 4.0 / np.linalg.norm(e, axis=1).mean()
    table = geometry.distance_table(distances)
    for name, A in zip(geometry.VARIANTS, (e, e - e.mean(0), s * e, s * (e - e.mean(0)))):
        l2 = np.linalg.norm(A - ref, axis=1)
        cd = 1 - (A * ref).sum(1) / (np.linalg.norm(A, axis=1) * np.linalg.norm(ref, axis=1))
        assert table.loc[name, "L2 mean"] == pytest.approx(l2.mean(), rel=1e-5)
        assert table.loc[name, "cosine mean"] == pytest.approx(cd.mean(), rel=1e-4, abs=1e-7)
        assert table.loc[name, "cosine std"] == pytest.approx(cd.std(ddof=1), rel=1e-4, abs=1e-7)
    if kind == "rms":  # RMSNorm(e) is parallel to e
        assert distances["Original E"][1].abs().max() < 1e-7
    else:
        assert distances["Original E"][1].min() > 1e-6


@pytest.mark.parametrize("kind", ["layer", "rms"])
def test_rows_sent_to_zero_are_left_out_of_the_table(kind):
    """An untrained model's padding row is all zeros: its cosine to the reference is 0/0, not a violation."""
    g = torch.Generator().manual_seed(7)
    E = torch.randn(50, 16, generator=g) + 0.3
    E[3] = 0.0
    E[9] = 2.5  # a constant row: LayerNorm sends it to zero too
    reference = Norm.unit(kind, 16, 1e-5)
    degenerate = geometry.degenerate_rows(E, reference)
    assert degenerate.nonzero().flatten().tolist() == ([3, 9] if kind == "layer" else [3])
    distances = geometry.row_distances(E, reference)
    for l2, cd in distances.values():
        assert len(cd) == 50 - int(degenerate.sum()) and torch.isfinite(cd).all() and torch.isfinite(l2).all()
    checks = geometry.table_identities(E, reference, distances)
    assert all(np.isfinite(v) for v in checks.values())
    assert checks["cos_original_vs_scaled"] < 1e-12 and checks["cos_centered_vs_centered_scaled"] < 1e-12
    kept = geometry.row_distances(E[~degenerate], reference)  # the same rows, but c and s from every row
    assert not torch.allclose(kept["Centered E-c"][0], distances["Centered E-c"][0])
    torch.testing.assert_close(kept["Original E"][1], distances["Original E"][1])


def test_reachability_scores_and_the_best_state(model):
    view = model.view
    norm, W_U = view.final_norm, view.W_U.detach()
    scores = reachability.reachability_scores(view)
    U = W_U.T.double()
    gamma = norm.gamma.double()
    beta = torch.zeros_like(gamma) if norm.beta is None else norm.beta.double()
    np.testing.assert_allclose(scores["||gamma*e||"], (U * gamma).norm(dim=1).numpy(), rtol=1e-10)
    np.testing.assert_allclose(scores["||gamma*e|| + beta.e"], ((U * gamma).norm(dim=1) + U @ beta).numpy(), rtol=1e-10)
    if norm.beta is None:
        np.testing.assert_array_equal(scores["||e|| + beta.e"], scores["||e||"])
    token_ids = scores["max logit"].nlargest(3).index.tolist() + [17, 4242]
    ranks, logits = reachability.rank_at_best_state(view, token_ids)
    np.testing.assert_allclose(logits, scores["max logit"][token_ids], rtol=1e-4)
    assert ranks.shape == (5,) and ranks.min() >= 0
    # no state on the sphere gives a token more than its max logit: try the best states of other tokens
    states = reachability.best_states(norm, U[:200]).float()
    with torch.no_grad():
        logits = view._final_norm_module(states) @ W_U + (0 if view.b_U is None else view.b_U)
    reached = logits.max(0).values.double()
    assert (reached.numpy() <= scores["max logit"].to_numpy() + 1e-3).all()


def test_extreme_tokens_list_the_ends_with_repr(tiny_gpt2_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_gpt2_dir)
    U = torch.arange(40.0).reshape(10, 4) - 18
    scores = pd.DataFrame({name: U.norm(dim=1).numpy() for name in reachability.SCORES})
    tables = reachability.extreme_tokens(scores, tokenizer, k=3)
    assert tables["top"]["||e||"].iloc[0].startswith(repr(tokenizer.decode([9])))
    assert tables["bottom"]["||e||"].iloc[0].startswith(repr(tokenizer.decode([4])))  # row 4 is nearest 0
    assert list(tables["top"].columns) == list(reachability.SCORES)


def test_win_shares_sample_both_ends_and_skip_tokens_without_a_best_state(tiny_llama_dir):
    model = _randomized(tiny_llama_dir)
    view = model.view
    with torch.no_grad():
        view.W_U[:, 5] = 0.0  # an all-zero unembedding row (untied model): no best state
    assert not reachability.has_best_state(view)[5] and reachability.has_best_state(view).sum() == view.vocab_size - 1
    scores = reachability.reachability_scores(view)["max logit"]
    drawn = reachability.win_shares(view, scores, n_tokens=40, share=0.01, seed=3)
    assert len(drawn) == 80 and 5 not in drawn["token"].tolist()
    eligible = scores.drop(5).sort_values()
    size = round(0.01 * len(eligible))
    assert set(drawn.loc[drawn["end"] == "bottom", "token"]) <= set(eligible.index[:size])
    assert set(drawn.loc[drawn["end"] == "top", "token"]) <= set(eligible.index[-size:])
    ranks, _ = reachability.rank_at_best_state(view, drawn["token"], batch_size=7)  # batches change nothing
    np.testing.assert_array_equal(drawn["rank"], ranks)
    np.testing.assert_array_equal(drawn["wins"], ranks == 0)
    again = reachability.win_shares(view, scores, n_tokens=40, share=0.01, seed=3)
    pd.testing.assert_frame_equal(drawn, again)


def test_drawn_sentences_are_distinct_rows_in_corpus_order():
    from lotlib.models.corpus import Corpus

    corpus = Corpus("toy", np.arange(40).reshape(20, 2))
    ids = geometry.drawn_sentences(corpus, 5, seed=3)
    assert ids.shape == (5, 2) and len(set(ids[:, 0])) == 5 and np.all(np.diff(ids[:, 0]) > 0)
    np.testing.assert_array_equal(ids, geometry.drawn_sentences(corpus, 5, seed=3))
    assert len(geometry.drawn_sentences(corpus, 99)) == 20


def test_embedding_tables_are_the_table_for_both_references():
    E = _states(8)
    E[3] = 0.0  # sent to zero by both references
    tables = geometry.embedding_tables(E, 1e-5)
    ref = Norm.unit("layer", 8, 1e-5)
    pd.testing.assert_frame_equal(
        tables["tables"][geometry.REFERENCES[0]], geometry.distance_table(geometry.row_distances(E, ref))
    )
    assert tables["skipped"] == dict.fromkeys(geometry.REFERENCES, 1) and tables["n_rows"] == 40
    assert tables["rms_cos_original_max"] < 1e-12  # RMSNorm(e) is parallel to e
    assert tables["mean_row_norm"] == pytest.approx(float(E.double().mean(0).norm()))
    checks = list(tables["identities"].values())
    worst = max(max(c["cos_original_vs_scaled"], c["cos_centered_vs_centered_scaled"]) for c in checks)
    worst = max(worst, max(c["norm_vs_eps_formula"] for c in checks) / 8**0.5)
    assert tables["violation"] == worst < 1e-5
