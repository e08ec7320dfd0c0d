"""A checkpoint series of a trained model: the LM tutorial's partly separable GPT-2
(``benchmarks/train_small_gpt2.py --recipe partly-separable``, d = 8, read with ``--context tokens:1``)
trained for 1,500 steps with a checkpoint every 150 (``checkpoint-0`` the initial model: 11 in all), then
``compare first800.txt --model checkpoints`` gives one table and one figure against the step.

Trains for about three minutes and compares for about ten (each checkpoint's limits are those of data
that are not separable: the split, W_fin by Newton, W^mm_P); run with
``pytest -m slow -s tests/test_checkpoint_series_slow.py``. The table is printed and, when
``NTPCERT_SLOW_OUT`` names a directory, the run is kept there (``series.csv``, ``series.png``, ``series.json``).
"""

from __future__ import annotations

import csv
import importlib.util
import json
import math
import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from ntpcert.cli import main  # noqa: E402

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "train_small_gpt2.py"
STEPS, EVERY = 1500, 150
#: Columns every row must have finite (the motion from the second row on).
FINITE = ("entropy", "loss", "excess_loss", "rel_dist_F", "W_star_norm", "margin_min", "margin_median",
          "margin_positive", "norm", "h_norm")
MOTION = ("h_change", "h_change_rel", "h_change_max_row", "raw_W_change", "raw_W_change_rel")


def _train(out: Path) -> None:
    spec = importlib.util.spec_from_file_location("train_small_gpt2", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    torch.set_num_threads(1)  # a shared machine: more threads only contend
    mod.train(str(out), STEPS, save_every=EVERY, **mod.RECIPES["partly-separable"])


def _num(cell: str) -> float:
    return float("nan") if cell == "" else float(cell)


@pytest.mark.slow
def test_a_trained_models_checkpoints_give_one_table_and_one_figure(tmp_path, capsys):
    out = Path(os.environ.get("NTPCERT_SLOW_OUT") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    _train(out)
    capsys.readouterr()  # the training's own lines
    table, figure = out / "series.csv", out / "series.png"
    assert main(["compare", str(out / "first800.txt"), "--model", str(out / "checkpoints"), "--context", "tokens:1",
                 "--json", "--table", str(table), "--figure", str(figure), "--force"]) == 0
    series = json.loads(capsys.readouterr().out)
    (out / "series.json").write_text(json.dumps(series, indent=1), encoding="utf-8")
    steps = list(range(0, STEPS + 1, EVERY))
    assert series["steps_from"] == "folder names" and [r["step"] for r in series["checkpoints"]] == steps
    with open(table, encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["step"]) for r in rows] == steps  # one table, a row per checkpoint
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and figure.stat().st_size > 10_000
    for i, r in enumerate(rows):
        for k in FINITE + (MOTION if i else ()):
            assert math.isfinite(_num(r[k])), (r["step"], k, r[k])
        assert r["compatible"] in ("true", "false") and r["separable"] in ("true", "false", "")
    assert all(r[k] == "" for r in rows[:1] for k in MOTION)
    excess = [_num(r["excess_loss"]) for r in rows]
    # training lowers CE - H on these contexts overall: the last checkpoints well below the first
    assert sum(excess[-3:]) / 3 < 0.8 * sum(excess[:3]) / 3 and excess[-1] < excess[0]
    # the instance moves between every pair of checkpoints, and the decoder with it
    assert all(_num(r["h_change"]) > 0 and _num(r["raw_W_change"]) > 0 for r in rows[1:])
    # more contexts have their support on top at the end than at initialisation
    assert _num(rows[-1]["margin_positive"]) > _num(rows[0]["margin_positive"])
    keys = ("step", "separable", "nonseparable_pairs", "excess_loss", "loss_over_L_star", "rel_dist_F", "cos_perp_mm",
            "margin_min", "margin_median", "margin_positive", "h_change_rel", "raw_W_change_rel")
    with capsys.disabled():
        print("\n" + " | ".join(keys))
        for r in rows:
            print(" | ".join(r[k] if k in ("step", "separable", "nonseparable_pairs") or r[k] == ""
                             else f"{float(r[k]):.4g}" for k in keys))
