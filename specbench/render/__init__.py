"""Rendering numbers for people: formats, Markdown and rich tables, HTML pages and figures (plots/)."""
