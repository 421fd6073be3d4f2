"""`text.word_count`: a toolhost extension tool written in Python.

Built into a WebAssembly component by componentize-py (see build.sh); the
bindings (`wit_world`) are generated from toolhost's WIT at build time.
Exceptions other than `Err(ToolError)` trap the component (it is built with
--stub-wasi, so printing a traceback is impossible): the host reports them as
`sandbox.guest_trap` and keeps serving.
"""
import json

from wit_world import exports
from wit_world.imports import log, types
from componentize_py_types import Err

INPUT_SCHEMA = json.dumps({
    "type": "object",
    "properties": {
        "text": {"type": "string", "description": "The text to count."}
    },
    "required": ["text"],
    "additionalProperties": False,
})

OUTPUT_SCHEMA = json.dumps({
    "type": "object",
    "properties": {
        "words": {"type": "integer"},
        "chars": {"type": "integer"},
        "lines": {"type": "integer"},
    },
    "required": ["words", "chars", "lines"],
})


def _error(code: str, message: str, structured=None) -> Err:
    return Err(types.ToolError(
        code=code,
        message=message,
        structured=None if structured is None else json.dumps(structured),
    ))


class Tool(exports.Tool):
    def describe(self) -> types.Descriptor:
        return types.Descriptor(
            native_name="text.word_count",
            title="Word count",
            description="Count the words, characters and lines of a text.",
            input_schema=INPUT_SCHEMA,
            output_schema=OUTPUT_SCHEMA,
            annotations=types.Annotations(
                read_only=True,
                mutating=False,
                control=False,
                idempotent=True,
                open_world=False,
                source_kind=None,
            ),
        )

    def call(self, arguments: str) -> types.ToolOutput:
        try:
            args = json.loads(arguments)
        except ValueError as e:
            raise _error("tool.invalid_arguments", f"Arguments are not valid JSON: {e}.")
        if not isinstance(args, dict) or not isinstance(args.get("text"), str):
            raise _error("tool.invalid_arguments",
                         'Pass an object with a string field "text".')
        text = args["text"]
        counts = {
            "words": len(text.split()),
            "chars": len(text),
            "lines": len(text.splitlines()),
        }
        log.log(log.Level.DEBUG, f"word_count: {counts['words']} words")
        return types.ToolOutput(
            content=f"{counts['words']} words, {counts['chars']} characters, {counts['lines']} lines.",
            structured=json.dumps(counts),
            resource_refs=[],
            effect=None,
        )
