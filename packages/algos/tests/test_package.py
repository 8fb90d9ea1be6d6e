"""The package stands alone: torch and numpy, no gymnasium, no other vlarl package."""

import subprocess
import sys

import vlarl_algos


def test_importing_the_package_pulls_in_no_env_library():
    code = (
        "import sys, vlarl_algos; "
        "loaded = [m for m in ('gymnasium', 'ray', 'transformers', 'vlarl_envs', 'vlarl_policies') "
        "if m in sys.modules]; "
        "print(','.join(loaded))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""


def test_every_public_function_documents_its_shapes():
    functions = [name for name in vlarl_algos.__all__ if callable(getattr(vlarl_algos, name))]
    assert "groups_with_signal" in functions and "SIGNAL_TOLERANCE" not in functions  # constants document no shapes
    for name in functions:
        doc = getattr(vlarl_algos, name).__doc__
        assert doc and ("[" in doc or "Same arguments, shapes" in doc), name
