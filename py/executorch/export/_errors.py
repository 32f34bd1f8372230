"""Errors the exporter raises."""


class ExportError(Exception):
    """The module cannot be exported (dynamic shapes, unsupported values, ...)."""


class UnsupportedOperatorError(ExportError):
    """The graph needs an operator that no registered kernel implements."""

    def __init__(self, operator: str, node: str, supported: list[str]) -> None:
        self.operator = operator
        self.node = node
        super().__init__(
            f"operator {operator} (graph node '{node}') is not supported by the executorch kernels; "
            f"{len(supported)} operators are supported, e.g. {', '.join(sorted(supported)[:8])}, ..."
        )
