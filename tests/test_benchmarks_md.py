from pathlib import Path

from kernels.benchmarks_md import write_section


def test_sections_are_replaced_not_appended(tmp_path: Path) -> None:
    path = tmp_path / "BENCHMARKS.md"
    write_section("kernels", "old figures", path)
    write_section("runtime", "runtime figures", path)
    write_section("kernels", "new figures", path)
    text = path.read_text()
    assert "new figures" in text and "old figures" not in text
    assert text.index("new figures") < text.index("runtime figures")
