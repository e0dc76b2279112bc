"""The page machinery every design's report uses: jinja2 templating with autoescaping, inline SVG
charts, and pages written beside their index (templates/: the shared frame, stylesheet and script)."""
