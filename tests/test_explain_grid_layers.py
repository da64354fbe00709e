"""The attention grid drawn for the layers a person picks: its data holds only the cells drawn,
its axis names the layers drawn, and the browser evaluates no formula per cell."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from core.analysis.explain import AttentionMaps
from core.charts.attention_maps import attention_grid_chart
from core.errors import UserError


def _maps(layers: int, heads: int, seq: int) -> AttentionMaps:
    weights = np.random.default_rng(1).dirichlet(np.ones(seq), size=(layers, heads, seq))
    return AttentionMaps(tuple(f"t{i}" for i in range(seq)), weights, has_cls=True)


def _labels(axis: dict) -> list[int]:
    """The axis's labels, its Vega expression (a list indexed by a rounded number) in Python."""
    return [
        eval(
            axis["labelExpr"],
            {"__builtins__": {}, "round": round},
            {"datum": SimpleNamespace(value=v)},
        )
        for v in axis["values"]
    ]


def test_one_layer_holds_only_that_layers_cells():
    maps = _maps(6, 12, 5)
    chart = attention_grid_chart(maps, layers=[5])
    data = chart.data
    assert len(data) == 12 * 5 * 5  # one layer: 12 heads of 5 x 5, not 6 x 12 x 5 x 5
    assert set(data["layer"]) == {6}  # tooltips name the model's own layer number
    head_3 = data[(data["head"] == 3) & (data["query"] == 1)].sort_values("key")
    assert head_3["weight"].to_numpy() == pytest.approx(maps.weights[5, 2, 1])
    spec = chart.to_dict()
    assert _labels(spec["encoding"]["y"]["axis"]) == [6]
    assert _labels(spec["encoding"]["x"]["axis"]) == list(range(1, 13))
    assert "layer 6" in spec["title"]["text"]


def test_layers_are_drawn_in_order_one_block_apart_and_all_by_default():
    maps = _maps(4, 2, 3)
    some = attention_grid_chart(maps, layers=[3, 0])
    assert _labels(some.to_dict()["encoding"]["y"]["axis"]) == [1, 4]
    first = some.data[some.data["layer"] == 1]
    fourth = some.data[some.data["layer"] == 4]
    assert first["y"].min() == 0 and fourth["y"].min() == pytest.approx(3 * 1.25)  # next block
    assert (some.data["y2"] - some.data["y"] == 1).all() and (
        some.data["x2"] - some.data["x"] == 1
    ).all()
    every = attention_grid_chart(maps)
    assert len(every.data) == 4 * 2 * 3 * 3 and every.height > some.height
    assert every.to_dict()["title"]["text"].startswith("Every head (")


def test_the_browser_computes_nothing_per_cell():
    spec = attention_grid_chart(_maps(2, 2, 4), layers=[1]).to_dict()
    assert "transform" not in spec
    assert spec["mark"]["aria"] is False  # no described string per cell


@pytest.mark.parametrize("layers", [[], [6], [-1]])
def test_layers_out_of_range_are_refused(layers):
    with pytest.raises(UserError, match="choose one or more"):
        attention_grid_chart(_maps(6, 2, 3), layers=layers)
