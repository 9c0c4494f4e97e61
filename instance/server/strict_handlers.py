"""Method handlers that parse the request themselves, so a body that is not a valid protobuf is
INVALID_ARGUMENT rather than grpcio's own INTERNAL "Exception deserializing request!".

grpcio aborts with INTERNAL when a handler's ``request_deserializer`` raises, and no interceptor
runs before it. A handler registered without a deserializer receives the raw bytes; the wrapper
here parses them and aborts with INVALID_ARGUMENT when they do not parse. Built from the service
descriptor, so every method of the ``.proto`` is covered, including ones added later.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import grpc
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import DecodeError, Message
from google.protobuf.message_factory import GetMessageClass

#: how much of the parser's message the error repeats
_MAX_DETAIL = 200


def _serialize(message: Message) -> bytes:
    return message.SerializeToString()


def _serialize_unary(reply: Message | bytes) -> bytes:
    """A unary reply: a message, or bytes already serialized (a reply passed through from another
    instance as it came) sent as they are."""
    if type(reply) is bytes:
        return reply
    return reply.SerializeToString()  # type: ignore[union-attr]  # not bytes: a message


def _parse(request_type: type[Message], full_name: str, data: bytes) -> tuple[Message | None, str]:
    """The request, or None and why not."""
    try:
        return request_type.FromString(data), ""
    except (DecodeError, ValueError) as e:
        return None, f"request body is not a valid {full_name} message: {str(e)[:_MAX_DETAIL]}"


def _parsing(behavior: Callable[..., Any], request_type: type[Message],
             full_name: str, with_bytes: bool) -> Callable[[bytes, Any], Any]:
    """A unary handler parsing its request. A coroutine ``behavior`` gets a coroutine handler,
    which a grpc.aio server runs on its loop; a plain one runs on the server's thread pool."""
    if inspect.iscoroutinefunction(behavior):
        async def handle_async(data: bytes, context: grpc.aio.ServicerContext) -> Any:
            request, error = _parse(request_type, full_name, data)
            if request is None:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, error)
            if with_bytes:
                return await behavior(request, context, data)
            return await behavior(request, context)
        return handle_async

    def handle(data: bytes, context: grpc.ServicerContext) -> Any:
        request, error = _parse(request_type, full_name, data)
        if request is None:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, error)
        if with_bytes:
            return behavior(request, context, data)
        return behavior(request, context)
    return handle


def _parsing_stream(behavior: Callable[..., Any], request_type: type[Message],
                    full_name: str) -> Callable[[bytes, Any], Any]:
    """A server-streaming handler parsing its request. For a plain ``behavior``, a generator, so a
    grpc.aio server runs all of its work (the parse, the first page) on its thread pool, none on
    its loop; for an async generator, one (run on the loop)."""
    if inspect.isasyncgenfunction(behavior):
        async def handle_async(data: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            request, error = _parse(request_type, full_name, data)
            if request is None:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, error)
            async for reply in behavior(request, context):
                yield reply
        return handle_async

    def handle(data: bytes, context: grpc.ServicerContext) -> Iterator[Any]:
        request, error = _parse(request_type, full_name, data)
        if request is None:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, error)
        yield from behavior(request, context)
    return handle


def strict_method_handlers(servicer: object, service: ServiceDescriptor) -> dict[str, grpc.RpcMethodHandler]:
    """The handlers of every method of ``service`` that ``servicer`` implements, by method name.
    A unary method named in the servicer's ``WITH_BYTES`` is called as ``behavior(request,
    context, data)``, ``data`` the request's bytes as received, and may return its reply as bytes
    already serialized (a request passed on to another instance as it came, and its reply)."""
    with_bytes: frozenset[str] = getattr(servicer, "WITH_BYTES", frozenset())
    handlers: dict[str, grpc.RpcMethodHandler] = {}
    for method in service.methods:
        behavior = getattr(servicer, method.name, None)
        if behavior is None:
            continue
        request_type = GetMessageClass(method.input_type)
        if method.client_streaming:  # a stream of requests: grpcio parses each one
            make = (grpc.stream_stream_rpc_method_handler if method.server_streaming
                    else grpc.stream_unary_rpc_method_handler)
            handlers[method.name] = make(behavior, request_deserializer=request_type.FromString,
                                         response_serializer=_serialize)
            continue
        if method.server_streaming:
            handlers[method.name] = grpc.unary_stream_rpc_method_handler(
                _parsing_stream(behavior, request_type, method.input_type.full_name), response_serializer=_serialize)
            continue
        handlers[method.name] = grpc.unary_unary_rpc_method_handler(
            _parsing(behavior, request_type, method.input_type.full_name, method.name in with_bytes),
            response_serializer=_serialize_unary)
    return handlers


def add_strict_handlers(server: grpc.Server | grpc.aio.Server, servicer: object, service: ServiceDescriptor) -> None:
    """Serve ``service`` by ``servicer`` on ``server`` (before it starts) as registered methods, as
    grpcio's generated code does: gRPC matches a call to its handler itself, with no search of the
    generic handlers (the health and reflection services) per call."""
    server.add_registered_method_handlers(service.full_name, strict_method_handlers(servicer, service))
