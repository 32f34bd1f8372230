"""How the build under test was configured, as the test targets pass it in the environment."""

import os


def env_flag(name: str) -> bool:
    value = os.environ.get(name)
    assert value in ("0", "1"), f"{name} must be set to 0 or 1 by the test target, got {value!r}"
    return value == "1"
