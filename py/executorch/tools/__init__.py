"""Command-line tools shipped with executorch."""
