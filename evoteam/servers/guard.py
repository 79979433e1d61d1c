"""Every request gets an answer: the MCP server class all of evoteam's servers are built from.

Two gaps of the MCP SDK are closed here, at our layer:

- Over stdio, a line the SDK cannot read as JSON-RPC (malformed JSON, a lone UTF-16 surrogate
  escape such as `\\ud800`, nesting deeper than the parser allows) is dropped without a reply,
  and the client waits forever. `EvoServer` answers it with a JSON-RPC error carrying the
  request's id when it can be recovered (else `null`, as JSON-RPC prescribes).
- Arguments that do not fit a tool's signature came back as pydantic's multi-line dump with
  documentation URLs; they come back as one line per bad field. An argument a tool does not
  have was silently dropped (an agent believed it had been used); it is refused, naming the
  valid ones.

And the agent's context is spent once, on what it needs (`compact.py`): published input schemas
carry no generated titles or `anyOf [X, null]` wrappers, and a result's text is compact JSON
without null or empty fields (`structuredContent` keeps the full object the output schema names).
"""

from __future__ import annotations

import difflib
import io
import json
import os
from typing import Any

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import ErrorData, JSONRPCError, TextContent, jsonrpc_message_adapter
from mcp_types.jsonrpc import INVALID_REQUEST, PARSE_ERROR
from pydantic import ValidationError

from evoteam.servers.compact import compact_description, compact_input_schema, compact_text, text_omit
from evoteam.servers.stdio_lines import OVERSIZED_KEY, bounded_lines, oversized_message

MAX_ERROR_CHARS = 600

# Descriptors (read, write) the next stdio session speaks on instead of the process's stdin and
# stdout: set by the fast-start front (evoteam/servers/front.py), which owns the real wire.
_pipes: tuple[int, int] | None = None


def speak_on(read_fd: int, write_fd: int) -> None:
    """Make `EvoServer.run_stdio_async` in this process speak on these descriptors (they stay
    the caller's to close)."""
    global _pipes
    _pipes = (read_fd, write_fd)


def _stdio_streams() -> tuple[Any, Any]:
    """The streams for `stdio_server`: the client's lines, bounded in size (stdio_lines.py),
    and None for stdout (the SDK's own) unless `speak_on` was called."""
    if _pipes is None:
        try:
            return BoundedStdin(_take_stdin()), None
        except (ImportError, OSError):  # no fcntl (Windows) or no descriptor to copy: the SDK's own
            return None, None
    read_fd, write_fd = _pipes
    # As the SDK wraps stdout: UTF-8.
    stdout = io.TextIOWrapper(os.fdopen(write_fd, "wb", closefd=False), encoding="utf-8", write_through=True)
    return BoundedStdin(read_fd), anyio.wrap_file(stdout)


def _take_stdin() -> int:
    """A private copy of stdin for the session, fd 0 pointed at the null device: as the SDK
    does for the stdin it reads itself, so that a child process never reads the client's
    messages. (A stream passed to the SDK is not claimed by it.)"""
    import fcntl

    wire = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return wire


class BoundedStdin:
    """The client's lines as the SDK's stdio transport iterates them (text, UTF-8, undecodable
    bytes replaced: guard answers what is not JSON), read in a worker thread with no line held
    over `stdio_lines.MAX_LINE_BYTES`."""

    def __init__(self, fd: int):
        self._lines = bounded_lines(fd)

    def __aiter__(self) -> BoundedStdin:
        return self

    async def __anext__(self) -> str:
        line = await anyio.to_thread.run_sync(next, self._lines, None, abandon_on_cancel=True)
        if line is None:
            raise StopAsyncIteration
        return line.decode("utf-8", "replace")


def one_line(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def describe_validation(exc: ValidationError, schema: dict | None = None) -> str:
    """One line for all bad fields, without pydantic's URLs or echoed input: what was wrong and where.
    With the tool's input ``schema``, a field it does not have is named with the fields it has
    there (a model wrote `roles.0.reads` for `reads_first` and read only "Extra inputs are not
    permitted"; model-play 2026-12-04)."""
    parts, listed = [], set()
    for err in exc.errors(include_url=False, include_input=False):
        where = ".".join(str(part) for part in err["loc"]) or "arguments"
        msg = err["msg"]
        if err.get("type") == "extra_forbidden" and schema and err["loc"]:
            fields = _fields_at(schema, list(err["loc"][:-1]))
            if fields:
                near = _nearest(str(err["loc"][-1]), fields)
                msg = f"no such field{f' (did you mean {near!r}?)' if near else ''}"
                if (there := tuple(err["loc"][:-1])) not in listed:  # each place's fields once
                    listed.add(there)
                    msg += f"; the fields here: {', '.join(fields)}"
        elif err.get("type") in ("model_type", "dict_type") and schema and (fields := _fields_at(schema, list(err["loc"]))):
            msg = f"should be an object with the fields {', '.join(fields)}"  # a model passed "parallel" here
        parts.append(f"{where}: {msg}")
    return one_line("invalid arguments: " + "; ".join(dict.fromkeys(parts)))


def _nearest(name: str, fields: list[str]) -> str | None:
    """The field a mistyped name most likely meant: one it begins (`reads` for `reads_first`), or
    one close in spelling; None rather than a poor guess (`mission` is not `isolation`)."""
    low = name.lower()
    starts = [f for f in fields if f.lower().startswith(low) or low.startswith(f.lower())]
    if starts:
        return min(starts, key=len)
    near = difflib.get_close_matches(name, fields, n=1, cutoff=0.7)
    return near[0] if near else None


def _fields_at(schema: dict, loc: list) -> list[str] | None:
    """The property names of the object at ``loc`` in a JSON schema (refs, arrays and unions
    followed), or None where the path leads nowhere."""
    def resolve(node: dict | None) -> dict | None:
        for _ in range(20):  # a ref or a union, unwrapped until an object or an array
            if not isinstance(node, dict):
                return None
            if "$ref" in node:
                node = schema.get("$defs", {}).get(node["$ref"].rsplit("/", 1)[-1])
            elif "anyOf" in node or "oneOf" in node:
                node = next((o for o in node.get("anyOf") or node.get("oneOf") if o.get("type") != "null"), None)
            else:
                return node
        return None

    node = resolve(schema)
    for part in loc:
        node = resolve((node or {}).get("items") if isinstance(part, int) else (node or {}).get("properties", {}).get(part))
        if node is None:
            return None
    return list(node.get("properties", {})) or None


class EvoServer(MCPServer):
    """`MCPServer` that answers every request with a result or a one-line error."""

    async def list_tools(self):
        tools = await super().list_tools()
        return [t.model_copy(update={"input_schema": compact_input_schema(t.input_schema),
                                     "description": compact_description(t.description)}) for t in tools]

    async def call_tool(self, name: str, arguments: dict[str, Any], context=None):
        from evoteam.servers.arguments import keep_strings, out_of_bounds

        tool = self._tool_manager.get_tool(name)
        _refuse_unknown_arguments(tool, name, arguments)
        if tool is not None:
            keep_strings(tool)  # a JSON-looking string stays a string where a string is accepted
        bad = out_of_bounds(arguments or {})
        if bad:
            raise ToolError(f"{name}: invalid arguments: {bad}")
        try:
            result = await super().call_tool(name, arguments, context)
        except UnexpectedToolError as exc:
            # The cause stays in the server's log (no internal exception name reaches the caller);
            # the caller learns it was not their input.
            raise UnexpectedToolError(f"{name} failed inside the server; the server's log has the details") \
                from exc.__cause__
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                raise ToolError(f"{name}: {describe_validation(exc.__cause__, getattr(tool, 'parameters', None))}") \
                    from exc.__cause__
            raise ToolError(one_line(str(exc))) from exc
        structured = getattr(result, "structured_content", None)
        if structured is not None and not result.is_error:
            tool = self._tool_manager.get_tool(name)
            omit = text_omit(tool.fn_metadata.output_model, structured) if tool is not None else frozenset()
            result = result.model_copy(update={"content": [TextContent(type="text",
                                                                       text=compact_text(structured, omit))]})
        return result

    async def run_stdio_async(self) -> None:
        async with stdio_server(*_stdio_streams()) as (read_stream, write_stream):
            await self._lowlevel_server.run(
                AnsweringReadStream(read_stream, write_stream), write_stream,
                self._lowlevel_server.create_initialization_options())


def _refuse_unknown_arguments(tool, name: str, arguments: dict[str, Any]) -> None:
    """A tool error naming each argument the tool does not have, and the ones it has."""
    if tool is None or not isinstance(arguments, dict):
        return  # the SDK answers an unknown tool itself
    valid = list((tool.parameters or {}).get("properties", {}))
    unknown = [key for key in arguments if key not in valid]
    if unknown:
        raise ToolError(one_line(f"{name}: unknown argument{'s' if len(unknown) > 1 else ''} "
                                 f"{', '.join(repr(k) for k in unknown)}; {name} takes: {', '.join(valid) or 'nothing'}"))


class AnsweringReadStream:
    """A transport's read stream that answers the lines it could not read instead of passing
    the parse exception on (where the SDK drops it)."""

    def __init__(self, inner, write_stream):
        self._inner = inner
        self._write = write_stream

    @property
    def last_context(self):
        return getattr(self._inner, "last_context", None)

    async def __aenter__(self) -> AnsweringReadStream:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc) -> Any:
        return await self._inner.__aexit__(*exc)

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> AnsweringReadStream:
        return self

    async def __anext__(self):
        while True:
            item = await self._inner.__anext__()
            if not isinstance(item, Exception):
                return item
            reply = unreadable_reply(item)
            try:
                await self._write.send(SessionMessage(reply))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                raise StopAsyncIteration from None


class AnswerUnreadableHTTP:
    """ASGI middleware for the streamable-HTTP endpoints: a POST body that is not a JSON-RPC
    message gets the same one-line JSON-RPC error as over stdio, with the request's id (the
    SDK answers with pydantic's dump and no id). Runs inside authentication: only a caller
    with a valid token gets this far; bodies without a length or over `max_body` go on to the
    SDK, which refuses them by size."""

    def __init__(self, app, max_body: int):
        self.app, self.max_body = app, max_body

    async def __call__(self, scope, receive, send) -> None:
        if (scope["type"] != "http" or scope["method"] != "POST"
                or not getattr(scope.get("user"), "is_authenticated", False)):
            return await self.app(scope, receive, send)
        length = dict(scope.get("headers") or []).get(b"content-length", b"")
        if not length.isdigit() or int(length) > self.max_body:
            return await self.app(scope, receive, send)
        chunks, more = [], True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return await self.app(scope, _replay([], message, receive), send)
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        try:
            jsonrpc_message_adapter.validate_json(body, by_name=False)
        except ValidationError as exc:
            reply = unreadable_reply(exc).model_dump_json(by_alias=True, exclude_unset=True).encode()
            await send({"type": "http.response.start", "status": 400,
                        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(reply)).encode())]})
            await send({"type": "http.response.body", "body": reply})
            return
        await self.app(scope, _replay([body], None, receive), send)


def _replay(bodies: list[bytes], pending, receive):
    """A `receive` that first hands back what was already read."""
    queue = [{"type": "http.request", "body": b, "more_body": False} for b in bodies]
    if pending is not None:
        queue.append(pending)

    async def replay():
        return queue.pop(0) if queue else await receive()

    return replay


def unreadable_reply(exc: Exception) -> JSONRPCError:
    """The JSON-RPC error for a message the transport could not read."""
    line = _raw_input(exc)
    if isinstance(line, dict):  # JSON, but not a JSON-RPC message
        request_id = line.get("id") if isinstance(line.get("id"), int | str) else None
        if isinstance(size := line.get(OVERSIZED_KEY), int):  # stands for a line too long to read
            return JSONRPCError(jsonrpc="2.0", id=request_id,
                                error=ErrorData(code=INVALID_REQUEST, message=oversized_message(size)))
        return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(
            code=INVALID_REQUEST, message="Invalid request: not a JSON-RPC 2.0 request, notification or response"))
    request_id = find_request_id(line) if line is not None else None
    code, message = PARSE_ERROR, "Parse error: the message is not valid JSON"
    try:
        decoded = json.loads(line) if line is not None else None
    except RecursionError:
        message = "Parse error: the message nests deeper than this server accepts; flatten the arguments"
    except ValueError:
        message = "Parse error: the message is not valid JSON; send one JSON-RPC object per line"
    else:
        if line is not None and has_lone_surrogate(decoded):
            message = ("Parse error: the message contains a lone UTF-16 surrogate escape (e.g. \\ud800), "
                       "which is not text; send valid Unicode")
        elif line is not None:
            code = INVALID_REQUEST
            message = "Invalid request: not a JSON-RPC 2.0 request, notification or response"
            if _nesting_too_deep(exc):
                code, message = PARSE_ERROR, ("Parse error: the message nests deeper than this server "
                                              "accepts; flatten the arguments")
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=message))


def _raw_input(exc: Exception) -> str | dict | None:
    """The line the transport could not read (or the object, when it was JSON but not JSON-RPC)."""
    if isinstance(exc, ValidationError):
        for err in exc.errors():
            value = err.get("input")
            if isinstance(value, bytes):
                return value.decode("utf-8", "replace")
            if isinstance(value, str | dict):
                return value
    return None


def _nesting_too_deep(exc: Exception) -> bool:
    return isinstance(exc, ValidationError) and any("recursion" in e["msg"].lower() for e in exc.errors())


def has_lone_surrogate(value: Any) -> bool:
    """Whether any string in a decoded JSON value holds an unpaired surrogate (iterative:
    the value may be nested deeply)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if any("\ud800" <= ch <= "\udfff" for ch in item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def find_request_id(text: str) -> int | str | None:
    """The top-level "id" of a JSON object, read without a recursive parser (the text may be
    too deep or otherwise unreadable). None when there is none or it cannot be told."""
    depth, i, n = 0, 0, len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            end = _string_end(text, i)
            if end < 0:
                return None
            if depth == 1:
                j = end + 1
                while j < n and text[j] in " \t\r\n":
                    j += 1
                if j < n and text[j] == ":" and text[i + 1:end] == "id":
                    return _scalar(text, j + 1)
            i = end + 1
            continue
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        i += 1
    return None


def _string_end(text: str, start: int) -> int:
    i = start + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == '"':
            return i
        i += 1
    return -1


def _scalar(text: str, start: int) -> int | str | None:
    i = start
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    if i < len(text) and text[i] == '"':
        end = _string_end(text, i)
        if end < 0:
            return None
        try:
            value = json.loads(text[i:end + 1])
        except ValueError:
            return None
        return value if not has_lone_surrogate(value) and len(value) <= 200 else None
    j = i
    while j < len(text) and (text[j].isdigit() or text[j] == "-"):
        j += 1
    try:
        return int(text[i:j]) if j > i and j - i <= 20 else None
    except ValueError:
        return None
