"""errors.one_line: the one way to make an exception or a text one line (the run backends' error
records, the submission checks' reasons, the file readers' messages all call it)."""

from __future__ import annotations

from eebench.errors import one_line


def test_an_exception_is_its_message_folded_or_its_type_name():
    assert one_line(ValueError("a\n  b\tc")) == "a b c"
    assert one_line(KeyError()) == "KeyError"
    assert one_line(ValueError("x" * 500)) == "x" * 200
    assert one_line(ValueError("bad"), named=True) == "ValueError: bad"
    assert one_line(ValueError(""), named=True) == "ValueError"
    assert one_line(OSError("y" * 3000), limit=2000, named=True) == "OSError: " + "y" * 2000


def test_a_text_cut_short_says_so_within_its_limit():
    assert one_line("short", 10, cut="...") == "short"
    assert one_line("a  b\nc", 10, cut="...") == "a b c"
    assert one_line("x" * 20, 10, cut="...") == "x" * 7 + "..."
    assert len(one_line("x" * 20, 10, cut="...")) == 10
    assert one_line("") == ""  # a text that says nothing stays empty


def test_escaped_shows_what_a_terminal_would_act_on():
    line = one_line("a\x1b[31mred\u202e\nb", 300, cut="...", escaped=True)
    assert line == "a\\x1b[31mred\\u202e\\nb"
    assert one_line("é ü", escaped=True) == "é ü"
