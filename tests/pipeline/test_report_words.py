"""One vocabulary: the glossary the HTML shows is the one docs/report.md has."""

from __future__ import annotations

from pathlib import Path

from pipeline.html_report import GLOSSARY, glossary_html

DOC = Path(__file__).resolve().parents[2] / "docs" / "report.md"


def test_the_page_and_the_docs_say_the_same_words() -> None:
    text = DOC.read_text()
    words = text[text.index("### Words"):text.index("### Why a pair was never received")]
    listed = [line for line in words.splitlines() if line.startswith("* **")]
    assert listed == [f"* **{term}**: {meaning}." for term, meaning in GLOSSARY]
    html = glossary_html()
    for term, _ in GLOSSARY:
        assert f"<dt>{term}</dt>" in html
    terms = [t for t, _ in GLOSSARY]
    assert "never received" in terms and "lost" in terms
