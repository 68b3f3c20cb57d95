"""Server side of the learner's lab: everything outside ``work/`` is read-only.

:class:`ReferenceContentsManager` is Jupyter Server's file manager with two rules:

- a path outside the writable folders (default: ``work``, relative to the lab's root
  ``notebooks/``) reports ``writable: false``, so JupyterLab shows its read-only indicator and
  offers "Save As" only; saving, renaming, deleting or restoring a checkpoint there is refused
  with HTTP 403 and a message naming the learner's own copy. The rule does not rely on file
  permissions, so it holds when the lab runs as root too;
- in the learner's notebooks, a save drops progress-bar outputs whose widget state is not saved
  with them (closed bars, or any bar when JupyterLab does not save widget state), which would
  otherwise read "model not found" once reopened.

``python -m fp16lab lab`` selects it with ``--ServerApp.contents_manager_class``; this module
imports jupyter_server, so only the server loads it.
"""

from __future__ import annotations

from typing import Any

from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager
from tornado import web
from traitlets import List, Unicode

from fp16lab.course.outputs import drop_orphan_widgets

__all__ = ["ReferenceContentsManager"]


class ReferenceContentsManager(AsyncLargeFileManager):
    """Files outside ``writable_dirs`` are the course's reference: readable, never written."""

    writable_dirs = List(
        Unicode(), default_value=["work"], config=True,
        help="Folders (relative to the root, '/'-separated) where the learner may save; default ['work'].",
    )

    def is_reference(self, path: str) -> bool:
        """True for a path outside every writable folder (the folders themselves are writable)."""
        p = path.strip("/")
        return not any(p == d.strip("/") or p.startswith(d.strip("/") + "/") for d in self.writable_dirs)

    async def _refusal(self, path: str, what: str) -> web.HTTPError:
        """A 403 whose message is true: a reference file names your copy if you have one; a new file, work/."""
        work, name = self.writable_dirs[0], path.strip("/").split("/")[-1]
        if not await self._exists(path):
            return web.HTTPError(403, f"only {work}/ is yours to write in this lab: {path.strip('/')} cannot be {what} "
                                      f"here. Save it into {work}/ (File > Save As: {work}/{name}).")
        copy = None
        for candidate in (f"{work}/{path.strip('/')}", f"{work}/{name}"):  # zh/02_x.ipynb: work/zh/02_x.ipynb
            if copy is None and await self._exists(candidate):
                copy = candidate
        where = f"Work in your copy, {copy}" if copy else f"Use File > Save As into {work}/"
        return web.HTTPError(403, f"{path.strip('/')} is part of the course's reference and is read-only in this "
                                  f"lab, so it cannot be {what}. {where} (your copies live in {work}/).")

    async def _exists(self, path: str) -> bool:
        found = self.file_exists(path) or self.dir_exists(path)
        return bool(await found) if hasattr(found, "__await__") else bool(found)

    async def new_untitled(self, path: str = "", type: str = "", ext: str = "") -> Any:
        """New files go into the learner's folder: File > New in a reference folder creates it in work/."""
        if self.is_reference(path.rstrip("/") + "/Untitled"):
            path = self.writable_dirs[0]
        return await super().new_untitled(path=path, type=type, ext=ext)

    def is_writable(self, path: str) -> bool:
        return False if self.is_reference(path) else bool(super().is_writable(path))

    async def save(self, model: dict[str, Any], path: str = "") -> Any:
        """Refuse the reference; in the learner's notebooks, drop progress bars whose widget state
        is not saved with them (they would read "model not found" once reopened)."""
        if self.is_reference(path):
            raise await self._refusal(path, "saved")
        if model.get("type") == "notebook" and isinstance(model.get("content"), dict):
            dropped = drop_orphan_widgets(model["content"])
            if dropped:
                self.log.info("fp16lab: %s: dropped %d widget output(s) without saved state", path.strip("/"), dropped)
        return await super().save(model, path)

    async def rename_file(self, old_path: str, new_path: str) -> Any:
        for p in (old_path, new_path):
            if self.is_reference(p):
                raise await self._refusal(p, "renamed")
        return await super().rename_file(old_path, new_path)

    async def delete_file(self, path: str) -> Any:
        if self.is_reference(path):
            raise await self._refusal(path, "deleted")
        return await super().delete_file(path)

    async def restore_checkpoint(self, checkpoint_id: str, path: str) -> Any:
        if self.is_reference(path):
            raise await self._refusal(path, "restored from a checkpoint")
        return await super().restore_checkpoint(checkpoint_id, path)
