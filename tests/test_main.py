"""The command line (python -m sktrellis)."""
import re

import numpy as np
import pytest

from sktrellis.__main__ import main


def test_default_run_on_the_bundled_data(capsys):
    with pytest.warns(UserWarning, match="'test, then temper'"):
        assert main([]) == 0
    out = capsys.readouterr().out
    assert "13,749,310,575" in out  # (2*12-3)!! trees
    assert "MAP tree (Newick; " in out and out.count("setosa") >= 4
    assert "log Z =" in out and "most probable clusters" in out
    assert "(beta='auto': few features, test then temper (p = " in out


def test_same_estimator_and_defaults_as_the_python_api(tmp_path, capsys):
    """The CLI fits ExactHierarchicalClustering(Dasgupta()) on the data as given."""
    from sktrellis import ExactHierarchicalClustering

    X = np.random.default_rng(0).normal(size=(7, 12))
    X[:3, :6] += 3.0
    path = tmp_path / "data.csv"
    np.savetxt(path, X, delimiter=",", header=",".join(f"f{i}" for i in range(12)),
               comments="")
    assert main([str(path), "--top", "1"]) == 0
    out = capsys.readouterr().out
    model = ExactHierarchicalClustering().fit(np.loadtxt(path, delimiter=",", skiprows=1))
    assert f"beta_ = {model.beta_:.4g} (beta='auto': calibrated" in out
    assert f"log Z = {model.log_partition_:.6f}" in out


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


def test_missing_value_names_the_row_and_column(tmp_path, capsys):
    """A blank numeric cell turned its column into row names."""
    path = tmp_path / "data.csv"
    path.write_text("a,b,name\n1,2,p\n3,,q\n5,6,r\n")
    with pytest.raises(SystemExit) as exit_info:
        main([str(path)])
    assert exit_info.value.code == 2
    assert "line 3, column 'b': missing value" in capsys.readouterr().err


@pytest.mark.parametrize("cell", ["inf", "-inf", "nan", "1e400"])
def test_non_finite_cell_names_the_row_and_column(tmp_path, capsys, cell):
    """An inf cell was reported as "Input X contains NaN", with no place."""
    path = tmp_path / "data.csv"
    path.write_text(f"a,b,name\n1,2,p\n3,4,q\n5,{cell},r\n")
    with pytest.raises(SystemExit) as exit_info:
        main([str(path)])
    assert exit_info.value.code == 2
    assert f"line 4, column 'b': '{cell}' is not a finite number" in capsys.readouterr().err


# Powers of two, so that the data are exactly those of unit scale, rescaled.
@pytest.mark.parametrize("scale", [2.0**-996, 2.0**996, 2.0**1020])
def test_values_near_the_float_limits_standardise_as_at_unit_scale(tmp_path, capsys, scale):
    """Standardising values near 1e308 overflowed (x - mean, then its square)."""
    X = np.random.default_rng(0).uniform(-8, 8, size=(6, 2))  # |X * 2**1020| < 9e307
    outputs = []
    for factor in (1.0, scale):
        path = tmp_path / "data.csv"
        np.savetxt(path, X * factor, delimiter=",", header="a,b", comments="", fmt="%.17g")
        assert main([str(path), "--n-clusters", "2"]) == 0
        out = capsys.readouterr().out
        lines = [line for line in out.splitlines() if not line.startswith("time:")]
        # Branch lengths are distances, in the data's units: compare them scaled back.
        (line,) = [line for line in lines if line.startswith("MAP tree (Newick")]
        newick = line.split("clade support): ")[1]
        lengths = [float(length) / factor for length in re.findall(r":([^,();]+)", newick)]
        outputs.append(([other for other in lines if other != line],
                        re.sub(r":[^,();]+", "", newick), lengths))
    # The standardised data, and so every number the CLI prints, are those of unit scale.
    assert outputs[1][:2] == outputs[0][:2]
    np.testing.assert_allclose(outputs[1][2], outputs[0][2], rtol=1e-5)


def test_text_column_still_names_the_rows(tmp_path, capsys):
    path = tmp_path / "data.csv"
    path.write_text("a,b,name\n1,2,p\n3,1,q\n5,6,r\n")
    assert main([str(path), "--n-clusters", "2", "--top", "1"]) == 0
    out = capsys.readouterr().out
    assert "3 points, 2 features" in out
    newick = out.split("clade support): ")[1].splitlines()[0]
    assert all(f"{name}:" in newick for name in "pqr")


@pytest.mark.parametrize(
    "argv, match",
    [
        (["--top", "-1"], "--top: must be a positive integer"),
        (["--top", "0"], "--top: must be a positive integer"),
        (["--n-clusters", "0"], "--n-clusters: must be a positive integer"),
        (["--energy", "ginkgo", "--beta", "2"], "--beta applies to --energy dasgupta and hcc"),
        (["--beta", "nan"], "--beta must be a finite number"),
        (["--plot", "/nonexistent-folder/tree.png"], "cannot be written"),
    ],
)
def test_bad_arguments_are_refused_before_any_work(argv, match, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert match in captured.err and "log Z" not in captured.out


def test_program_name_follows_how_it_was_started(monkeypatch):
    from sktrellis.__main__ import build_parser

    monkeypatch.setattr("sys.argv", ["/usr/bin/sktrellis", "--help"])
    assert build_parser().prog == "sktrellis"
    monkeypatch.setattr("sys.argv", ["/x/sktrellis/__main__.py"])
    assert build_parser().prog == "python -m sktrellis"


def test_defaults_are_the_apis_and_shown_in_help(capsys):
    import inspect

    from sktrellis import ExactHierarchicalClustering
    from sktrellis.__main__ import build_parser

    api = inspect.signature(ExactHierarchicalClustering).parameters["n_clusters"].default
    assert build_parser().parse_args([]).n_clusters == api
    with pytest.raises(SystemExit):
        main(["--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert f"n_clusters) (default: {api})" in help_text
    assert "(default: 8)" in help_text and "(default: dasgupta)" in help_text
    assert main(["--top", "1"]) == 0
    assert f"{api} clusters (the partition agreeing best" in capsys.readouterr().out


@pytest.mark.parametrize("cell", ["NA", "-", '"1,000"', "\0", "n/a"])
def test_a_non_numeric_cell_in_a_numeric_column_is_an_error(tmp_path, capsys, cell):
    """Such a column was taken as text and left out: exit 0 with one feature fewer."""
    path = tmp_path / "data.csv"
    path.write_text(f"a,b,name\n1,2,p\n3,4,q\n5,{cell},r\n7,8,s\n")
    with pytest.raises(SystemExit) as exit_info:
        main([str(path)])
    assert exit_info.value.code == 2
    assert "line 4, column 'b'" in capsys.readouterr().err


def test_the_roles_of_the_columns_are_printed(tmp_path, capsys):
    """A second text column was dropped without a word."""
    path = tmp_path / "data.csv"
    path.write_text("id,a,group,b\np,1,x,2\nq,3,y,1\nr,5,x,6\ns,2,y,2\n")
    assert main([str(path), "--top", "1"]) == 0
    out = capsys.readouterr().out
    assert "4 points, 2 features" in out
    assert "features: a, b" in out
    assert "row names: column 'id'" in out
    assert "not used (text columns after the one naming the rows): 'group'" in out


@pytest.mark.parametrize("separator, name", [(";", "semicolon"), ("\t", "tab")])
def test_semicolon_and_tab_separated_files_are_read(tmp_path, capsys, separator, name):
    rows = [["name", "x", "y"]] + [[f"p{i}", str(i % 3), str(i // 3)] for i in range(6)]
    path = tmp_path / "data.csv"
    path.write_text("\n".join(separator.join(row) for row in rows) + "\n")
    assert main([str(path), "--top", "1"]) == 0
    out = capsys.readouterr().out
    assert "6 points, 2 features" in out and f"separator: {name}" in out
    # European decimal commas in a semicolon file: an error naming the cell.
    path.write_text("x;y\n1,5;2\n2,5;3\n4,0;1\n")
    with pytest.raises(SystemExit):
        main([str(path)])
    assert "line 2, column 'x': '1,5' is not a number" in capsys.readouterr().err


def test_an_overlong_cell_is_a_clear_error(tmp_path, capsys):
    """A cell past csv's 131,072-character limit gave a _csv.Error traceback."""
    path = tmp_path / "data.csv"
    path.write_text("a,b\n1,2\n3," + "4" * 200_000 + "\n")
    with pytest.raises(SystemExit) as exit_info:
        main([str(path)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "line 3" in err and "131,072 characters" in err and "comma as separator" in err


def test_only_informative_clusters_are_listed(capsys):
    """The root's two children are one event: one line, the complement beside it."""
    assert main(["--top", "3"]) == 0
    out = capsys.readouterr().out
    listed = out.split("children):\n")[1].split("time:")[0].strip().splitlines()
    assert len(listed) == 3
    everyone = {f"{species}_{i}" for species, rows in
                (("setosa", range(4)), ("versicolor", range(4, 8)),
                 ("virginica", range(8, 12))) for i in rows}
    clusters = [set(line.split("{")[1].split("}")[0].split(", ")) for line in listed]
    for i, first in enumerate(clusters):
        for second in clusters[i + 1:]:
            assert first | second != everyone or first & second
    assert "and its complement: " in listed[0]


def test_newick_output_carries_distances_and_supports(capsys):
    from scipy.spatial.distance import pdist

    from sktrellis import ExactHierarchicalClustering
    from sktrellis.datasets import load_iris12

    assert main(["--top", "1"]) == 0
    newick = capsys.readouterr().out.split("clade support): ")[1].splitlines()[0]
    iris = load_iris12()
    model = ExactHierarchicalClustering().fit(iris.data)
    # The root's label is its support, 1, and the whole tree is as tall as
    # the mean distance between the root's two children (within the data's range).
    assert newick.endswith(")1;")
    assert f"{model.clade_support()[0]:.3g}" in newick
    leaf = float(newick.split("setosa_0:")[1].split(",")[0].split(")")[0])
    assert 0 < leaf <= pdist(iris.data).max()


def test_warnings_are_printed_as_the_command_lines_own():
    """Not as Python's default, which names runpy's frame as their place."""
    import io

    from sktrellis.__main__ import show_warning

    out = io.StringIO()
    show_warning(UserWarning("few features"), UserWarning, "x.py", 1, file=out)
    assert out.getvalue() == "warning: few features\n"


@pytest.mark.slow
def test_the_main_job_warns_without_a_python_location():
    import subprocess
    import sys

    job = subprocess.run([sys.executable, "-m", "sktrellis"], capture_output=True, text=True,
                         timeout=600, check=True)
    assert job.stderr.startswith("warning: beta='auto'")
    assert "runpy" not in job.stderr and "UserWarning" not in job.stderr
