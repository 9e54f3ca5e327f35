"""The READMEs: the Python snippets run as written (they share one namespace, in order);
benchmarks/README.md has one section per script."""
import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_blocks_run():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert blocks, "the README shows no Python"
    namespace = {}
    for block in blocks:
        exec(compile(block, str(README), "exec"), namespace)
    assert "search" in namespace and namespace["search"].best_params_
    # On labelled data the search tells the candidates apart (on random
    # points every score was about 0.39).
    scores = namespace["search"].cv_results_["mean_test_score"]
    assert scores.max() == 1.0 and scores.min() < scores.max()


def test_readme_installs_tools_without_rebuilding_the_package():
    """`pip install ".[doc]"` built the package again; a dependency group does not."""
    import tomllib

    pyproject = tomllib.loads((README.parent / "pyproject.toml").read_text())
    text = README.read_text()
    groups = re.findall(r"pip install --group (\w+)", text)
    assert {"test", "doc"} <= set(groups)
    assert set(groups) <= set(pyproject["dependency-groups"])
    extras = re.findall(r'pip install "?\.\[(\w+)\]', text)
    assert set(extras) <= set(pyproject["project"]["optional-dependencies"])
    assert "doc" not in extras and "test" not in extras


def test_every_benchmark_script_has_its_section():
    """benchmarks/README.md is the reference: a section (a level-2 heading) per
    script, and no section for a script that does not exist."""
    benchmarks = README.parent / "benchmarks"
    scripts = {path.name for path in benchmarks.glob("*.py")}
    headings = re.findall(r"^## (.*)$", (benchmarks / "README.md").read_text(), re.M)
    named = [set(re.findall(r"`(\w+\.py)`", heading)) for heading in headings]
    assert not scripts - set().union(*named), "scripts without a section"
    assert all(names and names <= scripts for names in named), [
        heading for heading, names in zip(headings, named) if not names or names - scripts]
