from pathlib import Path

from gpurt.bench.markdown import write_section


def test_sections_are_replaced_not_appended(tmp_path: Path) -> None:
    path = tmp_path / "BENCHMARKS.md"
    write_section("kernels", "old figures", path)
    write_section("runtime", "runtime figures", path)
    write_section("kernels", "new figures", path)
    text = path.read_text()
    assert "new figures" in text and "old figures" not in text
    assert text.index("new figures") < text.index("runtime figures")


def test_load_note_reports_the_load_average_and_the_core_count(monkeypatch) -> None:
    import os

    from gpurt.bench import markdown as benchmarks_md

    monkeypatch.setattr(os, "getloadavg", lambda: (3.25, 0.0, 0.0))
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert benchmarks_md.load_note() == "load average 3.2 on 2 cores when written"


def test_the_writer_writes_the_repositorys_own_file() -> None:
    from gpurt.bench import markdown

    assert Path(__file__).resolve().parents[1] / "BENCHMARKS.md" == markdown.DEFAULT_PATH
    assert markdown.DEFAULT_PATH.is_file()
