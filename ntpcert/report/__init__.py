"""The report layer: text and JSON renderings of results, and figures (no computation)."""
