"""The notebooks of examples/notebooks run end to end: their code cells, in order, in one
namespace, with matplotlib drawing to files (the Agg backend) in a temporary directory."""

import json
import os
import pathlib

import pytest

NOTEBOOKS = pathlib.Path(__file__).resolve().parents[2] / "examples" / "notebooks"


@pytest.mark.parametrize("notebook", sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")))
def test_notebook_runs(notebook, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.chdir(tmp_path)
    cells = json.loads((NOTEBOOKS / notebook).read_text())["cells"]
    namespace = {"__name__": "__notebook__"}
    for i, cell in enumerate(c for c in cells if c["cell_type"] == "code"):
        source = "".join(cell["source"])
        exec(compile(source, "%s, cell %d" % (notebook, i), "exec"), namespace)
    # Each notebook draws its figure.
    assert list(tmp_path.glob("*.png")), os.listdir(tmp_path)


def test_there_are_notebooks():
    assert len(list(NOTEBOOKS.glob("*.ipynb"))) >= 2
