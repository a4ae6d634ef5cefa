"""The bad-input corpus: one record per case, shared by every ``cases_<area>.py`` module.

A case is a command a user could type with input that is wrong. The rule every case is held to
(``test_corpus.py``): the command exits non-zero, prints exactly one line on stderr that names the
file or option and the field, and says how to fix it; no Python traceback; and nothing under the
case's folder is written, changed or deleted.

Each area of the tool keeps its cases in its own module beside this one, ``cases_<area>.py``,
exposing ``CASES: list[BadInput]``; ``test_corpus.py`` collects every such module.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class BadInput:
    """One bad input and what the one stderr line must say about it.

    ``argv[0]`` names the program: ``serve-system`` (the CLI), ``chi_scripts/NAME.py`` (a script of
    the repository), or ``ansible-playbook`` / ``ansible`` (the virtual environment's). The other
    arguments may use ``{tmp}`` (the case's own folder, also the working directory) and ``{repo}``
    (the repository root). ``files`` are written into ``{tmp}`` before the run (str as UTF-8, bytes
    as they are); ``env`` is added to the environment. ``expect`` are substrings that must all appear
    in the stderr line (case-sensitive, after ``{tmp}`` is substituted): the file, the field, the fix.
    """

    id: str
    argv: tuple[str, ...]
    expect: tuple[str, ...]
    files: dict[str, str | bytes] = field(default_factory=dict)
    #: symbolic links made in ``{tmp}`` before the run: path -> target (``{tmp}`` substituted)
    links: dict[str, str] = field(default_factory=dict)
    #: named pipes made in ``{tmp}`` before the run (a reader that opens one waits forever)
    fifos: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    #: seconds before the run is abandoned (the case then fails)
    timeout: float = 120.0
    #: only for programs that are not ours and print warnings no setting turns off (ansible-playbook
    #: lists every inventory plugin's failure as a multi-line warning before its one ``[ERROR]`` line):
    #: a line prefix; then exactly one stderr line with this prefix is required, and it is the line
    #: checked. Our own commands never use it.
    error_prefix: str = ""
