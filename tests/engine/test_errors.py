import pytest

from pools.engine import EngineError, QuantityError, RenderError, RuleError, TimeoutFormatError


def test_it_prefixes_the_message_with_the_path_when_there_is_one():
    error = EngineError("bad value", "spec.containers[0].image")
    assert str(error) == "spec.containers[0].image: bad value"
    assert error.message == "bad value"
    assert error.path == "spec.containers[0].image"


def test_it_shows_only_the_message_without_a_path():
    error = EngineError("bad value")
    assert str(error) == "bad value"
    assert error.path == ""


@pytest.mark.parametrize("cls", [QuantityError, TimeoutFormatError, RenderError, RuleError])
def test_every_engine_error_is_a_value_error(cls):
    error = cls("nope", "x")
    assert isinstance(error, EngineError)
    assert isinstance(error, ValueError)
    assert str(error) == "x: nope"
