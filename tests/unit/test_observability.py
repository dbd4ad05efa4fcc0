"""The one Logger/Tracer/Metrics: what tracing costs when it is off."""

from __future__ import annotations

from rushmem.observability import NoTracer, tracing_enabled


def test_the_tracers_decorators_are_transparent_when_tracing_is_off() -> None:
    tracer = NoTracer()

    def handler(event: dict[str, int], context: object) -> int:
        return event["n"]

    assert tracer.capture_lambda_handler(handler) is handler
    assert tracer.capture_lambda_handler(capture_response=False)(handler) is handler
    assert tracer.capture_method(handler) is handler
    assert not tracing_enabled({})
    assert tracing_enabled({"LAMBDA_TASK_ROOT": "/var/task"})
    assert not tracing_enabled({"LAMBDA_TASK_ROOT": "/var/task", "POWERTOOLS_TRACE_DISABLED": "true"})
    assert not tracing_enabled({"LAMBDA_TASK_ROOT": "/var/task", "AWS_SAM_LOCAL": "true"})
