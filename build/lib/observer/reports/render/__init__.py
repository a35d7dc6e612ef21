"""Rendering of built reports: each report's content as blocks, written as Markdown, one
self-contained HTML page (inline CSS and SVG charts) and JSON, in English or Chinese."""
