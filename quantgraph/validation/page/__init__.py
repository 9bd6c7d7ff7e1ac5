"""The self-contained HTML page of a validation (validate --report): its sections, SVG charts,
CSS and script."""
