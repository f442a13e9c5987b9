"""``codexcore acp`` loads the ACP SDK with its models built on first use (adapters/acp/_sdk.py).

Run in a fresh interpreter: the SDK's models are made once per process, and
this test process may have imported ``acp`` already.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("acp")

_SCRIPT = textwrap.dedent(
    '''
    import pydantic
    from codexcore.adapters.acp._sdk import load_acp_sdk

    load_acp_sdk()
    from acp.schema import InitializeRequest, InitializeResponse

    # The SDK's models: built when first used, and they validate and dump as before.
    assert not InitializeRequest.__pydantic_complete__, "built at import"
    request = InitializeRequest.model_validate({"protocolVersion": 1})
    assert request.protocol_version == 1 and InitializeRequest.__pydantic_complete__
    dumped = InitializeResponse(protocolVersion=1).model_dump(by_alias=True)
    assert dumped["protocolVersion"] == 1, dumped
    try:
        InitializeRequest.model_validate({})  # protocolVersion is required
    except pydantic.ValidationError:
        pass
    else:
        raise AssertionError("a bad request validated")

    # Models defined afterwards (another library's, a user's) are as pydantic makes them.
    assert "defer_build" not in pydantic.BaseModel.model_config

    class Later(pydantic.BaseModel):
        model_config = pydantic.ConfigDict(use_attribute_docstrings=True)
        name: str
        """Its name."""

    assert Later.__pydantic_complete__, "a later model was deferred"
    assert Later.model_fields["name"].description == "Its name.", "docstrings lost"
    load_acp_sdk()  # again: a no-op
    print("ok")
    '''
)


def test_acp_models_are_built_on_first_use_and_later_models_untouched(tmp_path: Path) -> None:
    script = tmp_path / "load.py"  # a file: pydantic reads a class's docstrings from its source
    script.write_text(_SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok", done.stdout
