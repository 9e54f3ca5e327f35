"""The command line (python -m sktrellis)."""
import numpy as np
import pytest

from sktrellis.__main__ import main


def test_default_run_on_the_bundled_data(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    assert "13,749,310,575" in out  # (2*12-3)!! trees
    assert "MAP tree (Newick): (" in out and out.count("setosa") >= 4
    assert "log Z =" in out and "most probable clusters" in out


def test_csv_with_names_and_plot(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    path = tmp_path / "points.csv"
    rows = ["name,x,y"] + [f"p{i},{i % 3},{i // 3}" for i in range(6)]
    path.write_text("\n".join(rows) + "\n")
    image = tmp_path / "tree.png"
    assert main([str(path), "--n-clusters", "2", "--plot", str(image)]) == 0
    out = capsys.readouterr().out
    assert "p0" in out and "6 points, 2 features" in out
    assert image.stat().st_size > 1000


@pytest.mark.parametrize(
    "content, match",
    [
        (None, "cannot read"),
        ("x,y\n", "no data rows"),
        ("x,y\n1,2\n", "minimum of 2"),
        ("x,y\n1,2\n3\n", "fields"),
        ("a,b\nu,v\nw,z\n", "no numeric column"),
    ],
)
def test_bad_files_exit_with_a_message(tmp_path, capsys, content, match):
    path = tmp_path / "data.csv"
    if content is not None:
        path.write_text(content)
    with pytest.raises(SystemExit) as exit_info:
        main([str(path)])
    assert exit_info.value.code == 2
    assert match in capsys.readouterr().err


def test_too_many_rows(tmp_path, capsys):
    path = tmp_path / "big.csv"
    np.savetxt(path, np.random.default_rng(0).normal(size=(40, 2)), delimiter=",",
               header="a,b", comments="")
    with pytest.raises(SystemExit):
        main([str(path)])
    assert "n_samples=40" in capsys.readouterr().err
