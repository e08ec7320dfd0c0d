"""The ``geometry`` quantity of sweeps and the example spec ``examples/sweeps/geometry_centred_support.toml``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ntpcert.errors import InputError
from ntpcert.experiments.sweep import compute_point, load_spec, parse_spec, point_instance
from ntpcert.geometry.analysis import PROXY_OPTIMAL_GAP
from ntpcert.geometry.certificate import nuclear_norm
from ntpcert.geometry.pattern import SupportPattern

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "sweeps" / "geometry_centred_support.toml"


def test_example_spec_asks_for_geometry_only() -> None:
    spec = load_spec(EXAMPLE)
    assert spec.quantities == ("geometry",)
    assert len(spec.points) == 200 and {p.V for p in spec.points} == {6}


@pytest.mark.parametrize("index", [0, 37, 91, 150, 199])
def test_example_points_give_certified_geometry(index: int) -> None:
    spec = load_spec(EXAMPLE)
    point = spec.points[index]
    row = compute_point(spec.settings, point)
    assert row["error"] is None
    v = row["values"]
    assert v["geo_relative_gap"] <= 1e-8 and v["geo_max_defect"] <= 1e-6
    pattern = SupportPattern.from_instance(point_instance(point, spec.seed, max_count=10))
    assert v["geo_r"] == pattern.r and 1 <= v["geo_rank"] <= pattern.V - 1
    proxy = nuclear_norm(pattern.centered_support())
    if v["geo_proxy_optimal"] is True:
        assert v["geo_proxy_gap"] <= PROXY_OPTIMAL_GAP
        assert abs(proxy - v["geo_nuclear_norm"]) <= 1e-6 * proxy
    elif v["geo_proxy_optimal"] is False:
        assert v["geo_nuclear_norm"] < proxy * (1 - PROXY_OPTIMAL_GAP)


def test_both_answers_occur_on_support_size_two() -> None:
    """At V = 6, m = 8, k = 2 the centred support matrix is L^mm for some seeds and beaten for others."""
    spec = parse_spec({"quantities": ["geometry"], "grid": {"m": 8, "d": 2, "V": 6, "k": 2, "seeds": 8}})
    answers = [compute_point(spec.settings, p)["values"]["geo_proxy_optimal"] for p in spec.points]
    assert True in answers and False in answers


def test_unknown_quantity_named() -> None:
    with pytest.raises(InputError, match="quantities"):
        parse_spec({"quantities": ["geometri"], "grid": {"m": 2, "d": 1, "V": 2, "k": 1}})


def test_rank_never_exceeds_v_minus_one_since_centred() -> None:
    # 1^T L^mm = 0, so the rank is at most V - 1 whatever m is
    spec = parse_spec({"quantities": ["geometry"], "grid": {"m": 16, "d": 2, "V": 4, "k": [1, 3], "seeds": 2}})
    ranks = [compute_point(spec.settings, p)["values"]["geo_rank"] for p in spec.points]
    assert max(ranks) <= 3 and np.all(np.asarray(ranks) >= 1)
