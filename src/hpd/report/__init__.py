"""Reports: the boundary inspector (static HTML) and the results tables and plots."""

from .inspector import inspector_data, render_html, write_inspector

__all__ = ["inspector_data", "render_html", "write_inspector"]
