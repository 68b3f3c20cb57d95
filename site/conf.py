"""Sphinx configuration of the course's website (`make site`): Sphinx + MyST-NB + sphinx-book-theme.

One build per edition, from the repository root as the source folder: ``-t en`` (the English pages) or
``-t zh`` (the Chinese ones); which files each edition has, and everything the course adds to the stack
(the language switch, where outputs were measured, solutions folded, links between the editions),
is in ``fp16lab_site.py`` beside this file. The notebooks are rendered from their stored outputs and
never executed.
"""

import os
import sys

sys.path.insert(0, os.path.abspath("."))  # Sphinx runs this file from its own folder (site/)

import fp16lab_site  # noqa: E402

EDITION = "zh" if tags.has("zh") else "en"  # noqa: F821 (Sphinx provides `tags`)
ED = fp16lab_site.EDITIONS[EDITION]

project = "fp16lab"
author = "the fp16lab authors"
copyright = "the fp16lab authors, MIT License"
language = ED["language"]
root_doc = ED["root"]
include_patterns = list(ED["pages"])
exclude_patterns = ["build", ".*", "notebooks/work", "**/.ipynb_checkpoints"]
fp16lab_edition = EDITION

extensions = ["myst_nb", "sphinx-mathjax-offline", "fp16lab_site"]

# MyST-NB: stored outputs only, never a kernel; headings get anchors as GitHub makes them.
nb_execution_mode = "off"
nb_merge_streams = True
myst_heading_anchors = 4
myst_enable_extensions = ["dollarmath", "html_image"]
suppress_warnings = ["myst.header"]  # lessons jump from "# title" to "### subsection" in a few places

html_theme = "sphinx_book_theme"
html_title = ED["title"]
html_static_path = ["_static"]
html_css_files = ["fp16lab-site.css"]
html_js_files = ["fp16lab-site.js"]
templates_path = ["_templates"]
html_use_index = False
html_last_updated_fmt = None
html_theme_options = {
    "article_header_end": ["fp16lab-lang-switch.html", "article-header-buttons.html"],
    "use_download_button": True,
    "use_fullscreen_button": False,
    "home_page_in_toc": True,
    "show_toc_level": 2,
    "navigation_with_keys": False,
}
# Chinese search: jieba splits the text into words (fp16lab_site adds the glossary's terms to its dictionary).
html_search_language = "zh" if EDITION == "zh" else "en"
