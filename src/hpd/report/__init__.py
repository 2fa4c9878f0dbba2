"""Reports: the boundary inspector (static HTML) and shared helpers for JSON outputs and manifests."""

from .common import base_manifest, write_json
from .inspector import inspector_data, render_html, write_inspector

__all__ = ["base_manifest", "inspector_data", "render_html", "write_inspector", "write_json"]
