"""A griffe extension for the API reference: the docstrings' reST habits, as Markdown.

The package's docstrings follow the Google style with a few reStructuredText
roles (``:class:`Key```, ``:meth:`verify```) and singular ``Example:``
sections holding doctest lines. mkdocstrings renders Markdown, so this
extension, loaded from ``mkdocs.yml``, rewrites them when the reference is
built: a role becomes inline code, ``Example:`` becomes ``Examples:`` (which
mkdocstrings renders as code), and ``# doctest: +SKIP`` flags are dropped.
Nothing in the package changes.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:class|meth|func|attr|data|exc|mod|obj):`~?([^`]+)`")
_EXAMPLE = re.compile(r"^(\s*)Example:\s*$", re.MULTILINE)
_DOCTEST_FLAG = re.compile(r"\s*# doctest: \+\w+")


def markdown_docstring(text: str) -> str:
    """The docstring ``text`` with reST roles and singular ``Example:`` rewritten."""
    text = _ROLE.sub(r"`\1`", text)
    text = _EXAMPLE.sub(r"\1Examples:", text)
    return _DOCTEST_FLAG.sub("", text)


class MarkdownDocstrings(griffe.Extension):
    """Rewrite every docstring once the object tree is complete."""

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:  # noqa: ARG002
        """Rewrite ``obj``'s docstring in place."""
        if obj.docstring is not None:
            obj.docstring.value = markdown_docstring(obj.docstring.value)
