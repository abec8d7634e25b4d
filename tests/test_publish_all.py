"""scripts/publish_all.sh over two machine sessions: the first stages its finished data sets
(STAGE, PUBLISH=0), the second rebuilds its store from the staged JSON, computes only what
is left, checks the units it recomputed against the staged ones and publishes."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "publish_all.sh"


def _run(tmp_path: Path, data_dir: Path, store: Path, **env: str) -> str:
    base = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            "MODELS": "stl", "REAL_REPS": "2", "JOBS": "1", "RACES": "",
            "STORE": str(store), "OUT": str(tmp_path / "out"), "DATA_DIR": str(data_dir),
            "MTLBENCH_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run(["bash", str(SCRIPT)], cwd=REPO, env={**base, **env},
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc.stdout


@pytest.mark.timeout(900)
def test_a_staged_republication_resumes_on_a_new_store_and_publishes(shared_data_dir, tmp_path):
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")
    stage, out = tmp_path / "staging", tmp_path / "out"
    first = _run(tmp_path, shared_data_dir, tmp_path / "a.sqlite", STAGE=str(stage),
                 PUBLISH="0", DATASETS="lenk")
    assert "PUBLISH=0" in first
    assert not out.exists(), "PUBLISH=0 must not write the published folder"
    staged = json.loads((stage / "lenk.json").read_text())
    assert len(staged["units"]) == 2, "the finished data set is staged"

    # a new machine: the store is gone, the staged folder is what was committed
    second = _run(tmp_path, shared_data_dir, tmp_path / "b.sqlite", STAGE=str(stage),
                  DATASETS="lenk")
    assert "restored 1 unit(s)" in second, second          # repetition 1 of lenk
    assert "1 already in the store" in second, second      # lenk: only repetition 0 rerun
    assert "0 differ" in second, second                    # rerun rep 0 == staged rep 0
    def scores(doc: dict) -> dict:
        return {(u["model"], u["rep"]): (u["key"], u["test_auc"]) for u in doc["units"]}

    published = scores(json.loads((out / "lenk.json").read_text()))
    assert sorted(published) == [("stl", 0), ("stl", 1)]
    assert published == scores(staged)     # same keys and scores as the first session's
