"""Start JupyterLab for a learner: their workspace ready, the reference read-only, widgets kept.

``python -m fp16lab lab`` (what ``make lab`` runs; on Windows, run it directly):

1. makes the workspace: a copy of every lesson and student copy in ``notebooks/work/``
   that is not there yet (:mod:`fp16lab.course.workspace`; existing work is never touched);
2. starts JupyterLab on ``notebooks/`` on localhost, with a token, opening the start page
   ``notebooks/README.md`` rendered as a page;
3. keeps the reference read-only in that lab: every file outside ``work/`` shows JupyterLab's
   read-only indicator and cannot be saved (:mod:`fp16lab.course.labserver`), so running and
   saving any lesson leaves ``git status`` clean; the tab of a reference lesson reads
   "reference · <name>", so it is never mistaken for the learner's copy of the same name;
4. saves widget state with each notebook (JupyterLab's "Save Jupyter widget state" setting),
   so the progress bars of a saved lesson still render after a reload instead of
   "Error displaying widget: model not found".

The settings go to a lab-settings folder inside the workspace (``work/.lab-settings``), merged
over the environment's own defaults, with the tab style in its ``custom/custom.css`` (JupyterLab's
``custom_css``, served from that folder); nothing outside the repository is changed.

``--lang zh`` (``make lab LAB_LANG=zh``) is the Chinese edition: the work copies come from
``notebooks/zh/`` into ``notebooks/work/zh/``, the lab opens ``zh/README.md``, its kernels run with
``FP16LAB_LANG=zh`` (hints, banners and the doctor in Chinese, :mod:`fp16lab.labs.runtime.i18n`) and
JupyterLab's own interface is Chinese (the ``jupyterlab-language-pack-zh-CN`` language pack, selected
by the ``locale`` setting in this lab's own settings folder, ``work/zh/.lab-settings``). Every lab sets
``FP16LAB_LANG`` to its language, so a shell's setting does not mix the languages.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fp16lab.checks import boolean, positive_int, text
from fp16lab.checks import path as _path
from fp16lab.course import paths as _paths
from fp16lab.labs.runtime.i18n import LANG_ENV, check_lang, tr

__all__ = [
    "SETTINGS_OVERRIDES",
    "CONTENTS_MANAGER",
    "LOCALES",
    "write_lab_settings",
    "lab_command",
    "lab_env",
    "lab_settings_dir",
    "start_page",
    "configure",
    "add_parser",
    "REFERENCE_TAB_CSS",
    "TOKEN_ENV",
    "MIN_TOKEN_CHARS",
    "is_local",
    "check_bind",
    "new_token",
]

SETTINGS_OVERRIDES: dict[str, dict[str, Any]] = {
    # keep tqdm's progress bars renderable after a save and reload
    "@jupyter-widgets/jupyterlab-manager:plugin": {"saveState": True},
    # open the start page (and other markdown) as a rendered page, not in the text editor
    "@jupyterlab/docmanager-extension:plugin": {"defaultViewers": {"markdown": "Markdown Preview"}},
    # no "receive official Jupyter news?" pop-up on every fresh start, no update check (a classroom is offline)
    "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False},
}
CONTENTS_MANAGER = "fp16lab.course.labserver.ReferenceContentsManager"
TOKEN_ENV = "JUPYTER_TOKEN"  # Jupyter Server's own variable: the token stays out of the process list
MIN_TOKEN_CHARS = 16
SETTINGS_DIR = ".lab-settings"
# JupyterLab's interface language per course language (a language pack's locale); English is JupyterLab's own
LOCALES = {"zh": "zh_CN"}
TRANSLATION_PLUGIN = "@jupyterlab/translation-extension:plugin"
CUSTOM_DIR = "custom"  # in the settings folder: JupyterLab's custom.css, served by --LabApp.custom_css
# A tab's tooltip (its title attribute) is JupyterLab's "Name: …\nPath: …" caption, in any interface language;
# a notebook whose path is not under work/ is reference material. The label comes from the i18n catalogue.
REFERENCE_TAB_CSS = """/* fp16lab: the tab of a reference lesson (outside work/) says so; written by python -m fp16lab lab */
.lm-DockPanel-tabBar .lm-TabBar-tab[title*=".ipynb"]:not([title*=": work/"]) {{
  max-width: 320px;
}}
.lm-DockPanel-tabBar .lm-TabBar-tab[title*=".ipynb"]:not([title*=": work/"]) .lm-TabBar-tabLabel {{
  font-style: italic;
}}
.lm-DockPanel-tabBar .lm-TabBar-tab[title*=".ipynb"]:not([title*=": work/"]) .lm-TabBar-tabLabel::before {{
  content: "{label}";
  font-weight: 600;
}}
/* the learner's student copy (work/student/, work/zh/student/) beside their copy of the same lesson */
.lm-DockPanel-tabBar .lm-TabBar-tab[title*="work/student/"] .lm-TabBar-tabLabel::before,
.lm-DockPanel-tabBar .lm-TabBar-tab[title*="work/zh/student/"] .lm-TabBar-tabLabel::before {{
  content: "{student}";
  font-weight: 600;
}}
"""
# JupyterLab (4.5 and 4.6 alike) builds the read-only badge of a document's toolbar without its translator, so
# the badge reads "notebook is read-only" whatever the language pack; in another language, ours says it instead
# (its tooltip, a title attribute, stays English).
READ_ONLY_BADGE_CSS = """/* fp16lab: the read-only badge of a reference lesson, in the lab's language */
.jp-Toolbar-item[data-jp-item-name="read-only-indicator"] .jp-ToolbarLabelComponent {{
  font-size: 0;
}}
.jp-Toolbar-item[data-jp-item-name="read-only-indicator"] .jp-ToolbarLabelComponent::after {{
  content: "{badge}";
  font-size: var(--jp-ui-font-size1);
}}
"""


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in extra.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _env_overrides() -> dict[str, Any]:
    """The overrides this environment's JupyterLab already has (overrides.d/*.json, overrides.json)."""
    try:
        from jupyterlab.commands import get_app_dir
    except ImportError:
        return {}
    folder = Path(get_app_dir()) / "settings"
    merged: dict[str, Any] = {}
    for f in [*sorted((folder / "overrides.d").glob("*.json")), folder / "overrides.json"]:
        if f.is_file():
            try:
                merged = _merge(merged, json.loads(f.read_text(encoding="utf-8")))
            except (OSError, ValueError):
                continue
    return merged


def _write(path: Path, text: str) -> None:
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def write_lab_settings(folder: "str | Path", *, lang: str = "en") -> Path:
    """Write the lab's application settings (the environment's overrides + ours) and its tab style into ``folder``.

    ``lang="zh"`` also sets JupyterLab's interface language (``locale`` zh_CN, from the language pack)
    and labels reference tabs in Chinese.
    """
    check_lang(lang)
    target = _path("folder", folder)
    target.mkdir(parents=True, exist_ok=True)
    data = _merge(_env_overrides(), SETTINGS_OVERRIDES)
    if lang in LOCALES:
        data = _merge(data, {TRANSLATION_PLUGIN: {"locale": LOCALES[lang]}})
    _write(target / "overrides.json", json.dumps(data, indent=1, sort_keys=True) + "\n")
    (target / CUSTOM_DIR).mkdir(exist_ok=True)
    def css_text(label: str) -> str:
        return label.replace("\\", "\\\\").replace('"', '\\"')

    css = REFERENCE_TAB_CSS.format(label=css_text(tr("reference · ", lang=lang)),
                                   student=css_text(tr("exercises · ", lang=lang)))
    if lang != "en":
        css += READ_ONLY_BADGE_CSS.format(badge=css_text(tr("read-only reference", lang=lang)))
    _write(target / CUSTOM_DIR / "custom.css", css)
    return target


def lab_command(
    notebooks: "str | Path",
    *,
    port: int = 8888,
    open_browser: bool = True,
    token: str | None = None,
    start: str = "README.md",
    settings_dir: "str | Path | None" = None,
    ip: str = "127.0.0.1",
    token_in_env: bool = False,
) -> list[str]:
    """The ``jupyter lab`` command line for a learner's lab on the folder ``notebooks``.

    Bound to ``ip`` (default 127.0.0.1, this machine only); the token is JupyterLab's own random
    one unless ``token`` is given; ``token_in_env=True`` leaves it off the command line (which
    anyone on the machine can read in the process list) for the caller to pass in ``JUPYTER_TOKEN``
    (:func:`lab_env`), as ``python -m fp16lab lab`` does. A non-local ``ip`` is refused without a
    token (:func:`check_bind`). The browser opens ``start`` (relative to ``notebooks``).
    Defaults: port 8888, open a browser, the start page, settings in ``notebooks/work/.lab-settings``.
    ``--allow-root`` only when run as root (containers, lab servers).
    """
    nbdir = _path("notebooks", notebooks).resolve()
    if positive_int("port", port) > 65535:
        raise ValueError(f"port must be an int in 1..65535, got {port!r}")
    open_browser = boolean("open_browser", open_browser)
    token = text("token", token) if token is not None else None
    ip = check_bind(ip, token, allow_env_token=False)
    token_in_env = boolean("token_in_env", token_in_env)
    start = text("start", start)
    settings = _path("settings_dir", settings_dir) if settings_dir is not None else nbdir / "work" / SETTINGS_DIR
    cmd = [
        sys.executable, "-m", "jupyter", "lab",
        f"--ServerApp.root_dir={nbdir}",
        f"--ServerApp.ip={ip}",
        f"--ServerApp.port={port}",
        f"--ServerApp.contents_manager_class={CONTENTS_MANAGER}",
        f"--LabApp.app_settings_dir={settings}",
        f"--LabApp.default_url=/lab/tree/{start}",
        "--LabApp.custom_css=True",  # the reference tabs' label, from the settings folder's custom/custom.css
        f"--ServerApp.tornado_settings=static_custom_path={settings / CUSTOM_DIR}",
    ]
    if token is not None and not token_in_env:
        cmd.append(f"--IdentityProvider.token={token}")
    if not open_browser:
        cmd.append("--no-browser")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    return cmd


def is_local(ip: str) -> bool:
    """True when ``ip`` binds this machine only: ``localhost`` or a loopback address (127.0.0.0/8, ::1)."""
    import ipaddress

    host = text("ip", ip).strip().strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name or "" (every interface): reachable from the network
        return False


def check_bind(ip: str, token: str | None, *, allow_env_token: bool = True, name: str = "ip") -> str:
    """``ip`` if a lab may bind it with ``token``: a non-local address needs a token of
    :data:`MIN_TOKEN_CHARS` or more characters (given, or in ``JUPYTER_TOKEN`` when ``allow_env_token``),
    since anyone who reaches the port and has the token runs code as the account that started the lab.
    An empty token (Jupyter's way to switch authentication off) is refused everywhere."""
    ip = text(name, ip).strip()
    token = text("token", token) if token is not None else None
    allow_env_token = boolean("allow_env_token", allow_env_token)
    if not ip or any(c.isspace() for c in ip):
        raise ValueError(f"{name} must be an address or host name without spaces ('0.0.0.0' for every "
                         f"interface), got {ip!r}")
    _check_resolves(name, ip)
    given = token if token is not None else (os.environ.get(TOKEN_ENV) if allow_env_token else None)
    if given is not None and not given.strip():
        raise ValueError(f"token must not be empty (an empty token switches Jupyter's authentication off), "
                         f"got {given!r}")
    if not is_local(ip) and (given is None or len(given.strip()) < MIN_TOKEN_CHARS):
        shown = "none" if given is None else f"{len(given.strip())} characters"
        raise ValueError(
            f"{name} {ip!r} can be reached from other machines, so the lab needs a token of at least "
            f"{MIN_TOKEN_CHARS} characters (got {shown}): add --token auto (a random one, printed with the URL) "
            f"or --token YOURS (or set {TOKEN_ENV}); for this machine only, leave out --ip")
    return ip


def _check_resolves(name: str, ip: str) -> None:
    """Refuse a host name this machine cannot resolve (a typo would only fail later, inside the server)."""
    import ipaddress
    import socket

    try:
        ipaddress.ip_address(ip.strip("[]"))
        return
    except ValueError:
        pass
    try:
        socket.getaddrinfo(ip, None)
    except (socket.gaierror, UnicodeError):
        raise ValueError(f"{name} {ip!r} is neither an IP address nor a host name this machine resolves") from None


def new_token() -> str:
    """A random lab token (URL-safe, 32 characters)."""
    import secrets

    return secrets.token_urlsafe(24)


def start_page(lang: str = "en") -> str:
    """The start page of a language's lab, relative to notebooks/: README.md or zh/README.md."""
    return "README.md" if check_lang(lang) == "en" else f"{lang}/README.md"


def lab_settings_dir(notebooks: "str | Path", lang: str = "en") -> Path:
    """This lab's settings folder: notebooks/work/.lab-settings, or work/zh/.lab-settings for Chinese."""
    work = _path("notebooks", notebooks) / "work"
    return work / SETTINGS_DIR if check_lang(lang) == "en" else work / lang / SETTINGS_DIR


def lab_env(lang: str = "en", base: "Mapping[str, str] | None" = None, *, token: str | None = None) -> dict[str, str]:
    """The lab's environment (``base``, default this process's): ``FP16LAB_LANG`` set for its kernels,
    and ``token`` (if given) in ``JUPYTER_TOKEN``, where Jupyter Server reads it (not in the process list)."""
    if base is not None and not isinstance(base, Mapping):
        raise TypeError(f"base must be a mapping of environment variables or None, got {type(base).__name__}")
    env = dict(os.environ if base is None else base)
    env[LANG_ENV] = check_lang(lang)
    if token is not None:
        env[TOKEN_ENV] = text("token", token)
    return env


def _lab(args: argparse.Namespace) -> int:
    from fp16lab.course.workspace import prepare

    if not 1 <= args.port <= 65535:
        raise ValueError(f"--port must be 1..65535, got {args.port!r}")
    lang = check_lang(args.lang, "--lang")
    root = _paths.repo_root()
    nbdir = _paths.notebooks_dir(root)
    start = args.open or start_page(lang)
    if not (nbdir / start).exists():
        raise ValueError(f"--open must name a file under {str(nbdir)!r}, e.g. work/00_setup_and_verify.ipynb; "
                         f"got {start!r}")
    settings = lab_settings_dir(nbdir, lang)
    token = new_token() if args.token == "auto" else args.token
    ip = check_bind(args.ip, token, name="--ip")
    if token is None and not is_local(ip):
        token = os.environ[TOKEN_ENV]  # check_bind found it there
    cmd = lab_command(nbdir, port=args.port, open_browser=not args.no_browser, start=start, settings_dir=settings,
                      ip=ip, token=token, token_in_env=True)
    if args.dry_run:
        shown = f"{TOKEN_ENV}=<hidden> " if token else ""
        print(f"{LANG_ENV}={lang} {shown}" + " ".join(cmd))
        return 0
    print(prepare(root, lang=lang), flush=True)
    write_lab_settings(settings, lang=lang)
    print(tr("starting JupyterLab on {nbdir} (lessons outside work/ are read-only here; Ctrl-C stops it)",
             lang=lang, nbdir=nbdir), flush=True)
    if not is_local(ip):
        import socket

        host = socket.getfqdn() if ip in ("", "0.0.0.0", "::") else ip
        print(tr("reachable from other machines: http://{host}:{port}/lab?token={token}", lang=lang,
                 host=host, port=args.port, token=token), flush=True)
    env = lab_env(lang, token=token)
    if os.name == "posix":
        os.execve(cmd[0], cmd, env)  # the lab takes over this process: Ctrl-C goes straight to it
    return subprocess.call(cmd, env=env)


def configure(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the lab options to ``parser``."""
    parser.add_argument("--port", type=int, default=8888, help="port (default 8888; the next free one if taken)")
    parser.add_argument("--ip", default="127.0.0.1", metavar="ADDRESS",
                        help="address to bind (default 127.0.0.1: this machine only); a shared server: "
                             "0.0.0.0 or its own address, which needs --token")
    parser.add_argument("--token", default=None, metavar="TOKEN",
                        help=f"the lab's token: 'auto' for a random one, or at least {MIN_TOKEN_CHARS} characters "
                             f"(default: JupyterLab's own random token; {TOKEN_ENV} is read too). Passed to "
                             "JupyterLab in its environment, not on its command line")
    parser.add_argument("--no-browser", action="store_true", help="do not open a browser; open the printed URL")
    parser.add_argument("--open", default=None, metavar="PATH",
                        help="open this file under notebooks/ instead of the start page, e.g. "
                             "work/02_amp_training_loop.ipynb")
    parser.add_argument("--lang", default="en", metavar="LANG",
                        help="en (default) or zh: the Chinese edition (notebooks/zh/, copies in work/zh/, "
                             "Chinese hints and JupyterLab in Chinese)")
    parser.add_argument("--dry-run", action="store_true", help="print the jupyter command and change nothing")
    parser.set_defaults(func=_lab)
    return parser


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Register ``lab`` as a subcommand of ``python -m fp16lab``."""
    p = sub.add_parser("lab", help="open JupyterLab on your workspace (what `make lab` runs)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    configure(p)
