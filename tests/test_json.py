"""mtlbench._json: the one JSON cleaner (results, unit keys, kit, published tables)."""
import json
import math

import numpy as np
from hypothesis import given, strategies as st

from mtlbench._json import config_json, jsonable
from mtlbench.protocol import config_json as protocol_config_json

floats = st.floats(allow_nan=True, allow_infinity=True, width=64)


def test_numpy_values_become_plain_python():
    obj = {1: np.float64(0.5), "a": np.arange(3), "b": (np.int64(2), np.bool_(True)),
           "c": [np.float32(1.5)]}
    out = jsonable(obj)
    assert out == {"1": 0.5, "a": [0, 1, 2], "b": [2, True], "c": [1.5]}
    assert type(out["a"][0]) is int and type(out["b"][1]) is bool
    json.dumps(out)


@given(st.lists(floats, max_size=6))
def test_strict_turns_non_finite_into_none_and_keeps_the_rest(values):
    for obj in (values, np.array(values, dtype=np.float64), {"x": values}):
        out = jsonable(obj, strict=True)
        flat = out["x"] if isinstance(out, dict) else out
        assert flat == [v if math.isfinite(v) else None for v in values]
        json.dumps(out, allow_nan=False)  # strict JSON


@given(st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=5))
def test_config_json_is_canonical(d):
    reordered = dict(reversed(list(d.items())))
    assert config_json(d) == config_json(reordered) == protocol_config_json(d)
    assert " " not in config_json({k: 1 for k in d if " " not in k})
