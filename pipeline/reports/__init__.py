"""The HTML reports, rendered by jinja2 templates with autoescaping (templates/)."""
