#!/usr/bin/env python3
"""Generates the Cirrus Swift message types from a FileDescriptorSet.

Usage: protoc-gen-swift-cirrus.py DESCRIPTOR_SET SWIFT_OUT_DIR TESTS_OUT_DIR

DESCRIPTOR_SET is the output of
`protoc-c --descriptor_set_out=F --include_imports --include_source_info …`.
Writes one `<file>.pb.swift` per .proto into SWIFT_OUT_DIR (value types plus the
conversion to and from the protoc-c structs) and `AllMessagesRoundTrip.swift`
into TESTS_OUT_DIR. Standard library only; output depends only on the input.
"""

import sys
from pathlib import Path

# ---------------------------------------------------------------------------
# Protobuf wire format, just enough to read descriptor.proto messages.
# ---------------------------------------------------------------------------


def read_varint(data, pos):
    result = 0
    shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("malformed varint in descriptor set")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def parse_fields(data):
    """Returns {field number: [raw values]} (ints for varints, bytes otherwise)."""
    fields = {}
    pos = 0
    while pos < len(data):
        tag, pos = read_varint(data, pos)
        number, wire_type = tag >> 3, tag & 7
        if wire_type == 0:
            value, pos = read_varint(data, pos)
        elif wire_type == 1:
            value, pos = data[pos:pos + 8], pos + 8
        elif wire_type == 2:
            length, pos = read_varint(data, pos)
            value, pos = data[pos:pos + length], pos + length
        elif wire_type == 5:
            value, pos = data[pos:pos + 4], pos + 4
        else:
            raise ValueError(f"unsupported wire type {wire_type} in descriptor set")
        fields.setdefault(number, []).append(value)
    return fields


def signed64(value):
    return value - (1 << 64) if value >= 1 << 63 else value


def text(fields, number, default=""):
    values = fields.get(number)
    return values[-1].decode("utf-8") if values else default


def integer(fields, number, default=0):
    values = fields.get(number)
    return signed64(values[-1]) if values else default


def packed_ints(fields, number):
    out = []
    for value in fields.get(number, []):
        if isinstance(value, int):
            out.append(signed64(value))
        else:
            pos = 0
            while pos < len(value):
                item, pos = read_varint(value, pos)
                out.append(signed64(item))
    return out


# descriptor.proto field numbers (stable).
FILE_NAME, FILE_PACKAGE, FILE_MESSAGE, FILE_ENUM, FILE_SOURCE_INFO = 1, 2, 4, 5, 9
MSG_NAME, MSG_FIELD, MSG_NESTED, MSG_ENUM, MSG_ONEOF = 1, 2, 3, 4, 8
FIELD_NAME, FIELD_NUMBER, FIELD_LABEL, FIELD_TYPE, FIELD_TYPE_NAME, FIELD_ONEOF = 1, 3, 4, 5, 6, 9
FIELD_PROTO3_OPTIONAL = 17
ENUM_NAME, ENUM_VALUE = 1, 2
VALUE_NAME, VALUE_NUMBER = 1, 2
LOC_PATH, LOC_LEADING, LOC_TRAILING = 1, 3, 4

LABEL_REPEATED = 3
T_DOUBLE, T_FLOAT, T_INT64, T_UINT64, T_INT32, T_FIXED64, T_FIXED32, T_BOOL = 1, 2, 3, 4, 5, 6, 7, 8
T_STRING, T_GROUP, T_MESSAGE, T_BYTES, T_UINT32, T_ENUM = 9, 10, 11, 12, 13, 14
T_SFIXED32, T_SFIXED64, T_SINT32, T_SINT64 = 15, 16, 17, 18

SWIFT_SCALAR = {
    T_DOUBLE: "Double", T_FLOAT: "Float",
    T_INT64: "Int64", T_SINT64: "Int64", T_SFIXED64: "Int64",
    T_UINT64: "UInt64", T_FIXED64: "UInt64",
    T_INT32: "Int32", T_SINT32: "Int32", T_SFIXED32: "Int32",
    T_UINT32: "UInt32", T_FIXED32: "UInt32",
    T_BOOL: "Bool", T_STRING: "String", T_BYTES: "[UInt8]",
}

SWIFT_DEFAULT = {
    "Double": "0", "Float": "0", "Int64": "0", "UInt64": "0", "Int32": "0",
    "UInt32": "0", "Bool": "false", "String": '""', "[UInt8]": "[]",
}

SWIFT_KEYWORDS = {
    "associatedtype", "class", "deinit", "enum", "extension", "fileprivate", "func",
    "import", "init", "inout", "internal", "let", "open", "operator", "private",
    "precedencegroup", "protocol", "public", "rethrows", "static", "struct", "subscript",
    "typealias", "var", "break", "case", "catch", "continue", "default", "defer", "do",
    "else", "fallthrough", "for", "guard", "if", "in", "repeat", "return", "throw",
    "switch", "where", "while", "Any", "as", "await", "false", "is", "nil", "self",
    "Self", "super", "throws", "true", "try", "_", "consume", "copy", "discard",
    "borrowing", "consuming", "some", "any", "Type", "Protocol",
}

# C and C++ keywords protoc-c appends "_" to (c_helpers.cc, kKeywordList).
C_KEYWORDS = set("""and and_eq asm auto bitand bitor bool break case catch char class compl const
const_cast continue default delete do double dynamic_cast else enum explicit extern false float for
friend goto if inline int long mutable namespace new not not_eq operator or or_eq private protected
public register reinterpret_cast return short signed sizeof static static_cast struct switch template
this throw true try typedef typeid typename union unsigned using virtual void volatile wchar_t while
xor xor_eq""".split())

# ---------------------------------------------------------------------------
# Names: Swift side and protoc-c side (mirrors protoc-c's c_helpers.cc).
# ---------------------------------------------------------------------------

SPECIAL_SEGMENTS = {"id": "ID", "ids": "IDs", "url": "URL", "urls": "URLs"}


def camel(name, lower_first):
    parts = [p for p in name.split("_") if p]
    out = []
    for index, part in enumerate(parts):
        if index == 0 and lower_first:
            out.append(part[0].lower() + part[1:])
        elif part.lower() in SPECIAL_SEGMENTS and part == part.lower():
            out.append(SPECIAL_SEGMENTS[part])
        else:
            out.append(part[0].upper() + part[1:])
    result = "".join(out)
    if result and result[0].isdigit():
        result = "_" + result
    return result


def escape(identifier):
    return f"`{identifier}`" if identifier in SWIFT_KEYWORDS else identifier


def c_to_camel(name):  # protoc-c ToCamel
    out, upper_next = [], True
    for ch in name:
        if ch == "_":
            upper_next = True
        elif upper_next:
            out.append(ch.upper())
            upper_next = False
        else:
            out.append(ch)
    return "".join(out)


def c_camel_to_lower(name):  # protoc-c CamelToLower
    out, was_upper = [], True
    for ch in name:
        is_upper = ch.isupper()
        if is_upper:
            if not was_upper:
                out.append("_")
            out.append(ch.lower())
        else:
            out.append(ch)
        was_upper = is_upper
    return "".join(out)


def c_camel_to_upper(name):  # protoc-c CamelToUpper
    out, was_upper = [], True
    for ch in name:
        is_upper = ch.isupper()
        if is_upper and not was_upper:
            out.append("_")
        out.append(ch.upper())
        was_upper = is_upper
    return "".join(out)


def c_type_name(full_name):
    return "__".join(c_to_camel(p) for p in full_name.split(".") if p)


def c_function_prefix(full_name):
    return "__".join(c_camel_to_lower(p) for p in full_name.split(".") if p)


def c_field_name(name):
    lowered = name.lower()
    return lowered + "_" if lowered in C_KEYWORDS else lowered


# ---------------------------------------------------------------------------
# Model
# ---------------------------------------------------------------------------


class Field:
    def __init__(self, fields, message):
        self.name = text(fields, FIELD_NAME)
        self.number = integer(fields, FIELD_NUMBER)
        self.repeated = integer(fields, FIELD_LABEL) == LABEL_REPEATED
        self.type = integer(fields, FIELD_TYPE)
        self.type_name = text(fields, FIELD_TYPE_NAME).lstrip(".")
        self.oneof_index = integer(fields, FIELD_ONEOF, None) if FIELD_ONEOF in fields else None
        if integer(fields, FIELD_PROTO3_OPTIONAL):
            raise SystemExit(f"{message.full_name}.{self.name}: proto3 `optional` is not supported by protoc-c")
        if self.type == T_GROUP:
            raise SystemExit(f"{message.full_name}.{self.name}: groups are not supported")
        self.message = message
        self.swift_name = camel(self.name, lower_first=True)
        self.c_name = c_field_name(self.name)
        self.doc = []
        self.boxed = False  # singular message field on a type cycle
        self.indirect = False  # oneof case on a type cycle or large
        self.out_of_line = ""  # why boxed / indirect


class Oneof:
    def __init__(self, name, message):
        self.name = name
        self.message = message
        self.fields = []
        self.doc = []

    @property
    def is_presence(self):
        return len(self.fields) == 1 and self.name == "_" + self.fields[0].name

    @property
    def c_case_name(self):
        return c_camel_to_lower(self.name) + "_case"


class Enum:
    def __init__(self, fields, parent_full, swift_parent, file):
        self.name = text(fields, ENUM_NAME)
        self.full_name = f"{parent_full}.{self.name}"
        self.swift_name = f"{swift_parent}.{self.name}"
        self.file = file
        self.doc = []
        self.values = []  # (number, swift case, doc list)
        prefix = c_camel_to_upper(self.name) + "_"
        seen = set()
        self.raw_values = [parse_fields(v) for v in fields.get(ENUM_VALUE, [])]
        for value in self.raw_values:
            name = text(value, VALUE_NAME)
            number = integer(value, VALUE_NUMBER)
            if number in seen:  # allow_alias: the first name wins
                continue
            seen.add(number)
            stripped = name[len(prefix):] if name.startswith(prefix) and len(name) > len(prefix) else name
            case = camel(stripped.lower(), lower_first=True)
            if case in ("unrecognized", "rawValue"):
                case += "_"
            self.values.append([number, case, []])
        if not any(number == 0 for number, _, _ in self.values):
            raise SystemExit(f"{self.full_name}: proto3 enums need a zero value")

    @property
    def default_case(self):
        return next(case for number, case, _ in self.values if number == 0)


class Message:
    def __init__(self, fields, parent_full, swift_parent, file, path):
        self.name = text(fields, MSG_NAME)
        self.full_name = f"{parent_full}.{self.name}"
        self.swift_name = f"{swift_parent}.{self.name}"
        self.file = file
        self.path = path
        self.doc = []
        self.c_type = c_type_name(self.full_name)
        self.c_prefix = c_function_prefix(self.full_name)
        self.oneofs = [Oneof(text(parse_fields(o), 1), self) for o in fields.get(MSG_ONEOF, [])]
        self.fields = [Field(parse_fields(f), self) for f in fields.get(MSG_FIELD, [])]
        for field in self.fields:
            if field.oneof_index is not None:
                self.oneofs[field.oneof_index].fields.append(field)
        self.nested = [
            Message(parse_fields(m), self.full_name, self.swift_name, file, path + [MSG_NESTED, i])
            for i, m in enumerate(fields.get(MSG_NESTED, []))
        ]
        self.enums = [
            Enum(parse_fields(e), self.full_name, self.swift_name, file)
            for e in fields.get(MSG_ENUM, [])
        ]
        self.enum_paths = [path + [MSG_ENUM, i] for i in range(len(self.enums))]
        nested_names = {m.name for m in self.nested} | {e.name for e in self.enums}
        for oneof in self.oneofs:
            swift_type = camel(oneof.name, lower_first=False)
            if swift_type in nested_names:
                swift_type += "Case"
            oneof.swift_type = f"{self.swift_name}.{swift_type}"
            oneof.swift_name = camel(oneof.name, lower_first=True)

    def members(self):
        """Stored members in declaration order: ("field", Field) or ("oneof", Oneof)."""
        out, seen = [], set()
        for field in self.fields:
            if field.oneof_index is None:
                out.append(("field", field))
            elif field.oneof_index not in seen:
                seen.add(field.oneof_index)
                oneof = self.oneofs[field.oneof_index]
                out.append(("field", oneof.fields[0]) if oneof.is_presence else ("oneof", oneof))
        return out

    def all_messages(self):
        yield self
        for nested in self.nested:
            yield from nested.all_messages()

    def all_enums(self):
        yield from self.enums
        for nested in self.nested:
            yield from nested.all_enums()


class ProtoFile:
    def __init__(self, fields):
        self.name = text(fields, FILE_NAME)
        self.package = text(fields, FILE_PACKAGE)
        self.messages = [
            Message(parse_fields(m), self.package, "Wire", self, [FILE_MESSAGE, i])
            for i, m in enumerate(fields.get(FILE_MESSAGE, []))
        ]
        self.enums = [Enum(parse_fields(e), self.package, "Wire", self) for e in fields.get(FILE_ENUM, [])]
        self.comments = {}
        for info in fields.get(FILE_SOURCE_INFO, []):
            for location in parse_fields(info).get(1, []):
                loc = parse_fields(location)
                doc = doc_lines(text(loc, LOC_LEADING)) + doc_lines(text(loc, LOC_TRAILING))
                if doc:
                    self.comments[tuple(packed_ints(loc, LOC_PATH))] = doc
        self.attach_docs()

    def attach_docs(self):
        def enum_docs(enum, path):
            enum.doc = self.comments.get(tuple(path), [])
            for index, value in enumerate(enum.raw_values):
                number = integer(value, VALUE_NUMBER)
                for entry in enum.values:
                    if entry[0] == number and not entry[2]:
                        entry[2] = self.comments.get(tuple(path + [ENUM_VALUE, index]), [])

        for index, enum in enumerate(self.enums):
            enum_docs(enum, [FILE_ENUM, index])
        for top in self.messages:
            for message in top.all_messages():
                message.doc = self.comments.get(tuple(message.path), [])
                for index, field in enumerate(message.fields):
                    field.doc = self.comments.get(tuple(message.path + [MSG_FIELD, index]), [])
                for index, oneof in enumerate(message.oneofs):
                    oneof.doc = self.comments.get(tuple(message.path + [MSG_ONEOF, index]), [])
                for enum, path in zip(message.enums, message.enum_paths):
                    enum_docs(enum, path)

    def all_messages(self):
        for message in self.messages:
            yield from message.all_messages()

    def all_enums(self):
        yield from self.enums
        for message in self.messages:
            yield from message.all_enums()


def doc_lines(comment):
    if not comment.strip():
        return []
    lines = comment.rstrip("\n").split("\n")
    out = []
    for line in lines:
        line = line.rstrip()
        out.append(line[1:] if line.startswith(" ") else line)
    while out and not out[0].strip():
        out.pop(0)
    while out and not out[-1].strip():
        out.pop()
    return out


# ---------------------------------------------------------------------------
# Type graph: which singular message edges lie on a cycle (need indirection).
# ---------------------------------------------------------------------------


def strongly_connected(nodes, edges):
    index, low, on_stack, stack, component = {}, {}, set(), [], {}
    counter = [0]
    for root in nodes:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, child = work.pop()
            if child == 0:
                index[node] = low[node] = counter[0]
                counter[0] += 1
                stack.append(node)
                on_stack.add(node)
            targets = edges.get(node, [])
            recurse = False
            while child < len(targets):
                target = targets[child]
                child += 1
                if target not in index:
                    work.append((node, child))
                    work.append((target, 0))
                    recurse = True
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            if recurse:
                continue
            if low[node] == index[node]:
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component[member] = node
                    if member == node:
                        break
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return component


def mark_cycles(messages):
    singular = {}
    for message in messages:
        singular[message.full_name] = sorted({
            f.type_name for f in message.fields if f.type == T_MESSAGE and not f.repeated
        })
    component = strongly_connected([m.full_name for m in messages], singular)
    sizes = {}
    for node, root in component.items():
        sizes[root] = sizes.get(root, 0) + 1
    for message in messages:
        for field in message.fields:
            if field.type != T_MESSAGE or field.repeated:
                continue
            same = component[message.full_name] == component[field.type_name]
            # A copy-on-write message is one pointer to its storage: it closes any cycle itself.
            if same and field.type_name not in COPY_ON_WRITE and (sizes[component[message.full_name]] > 1 or field.type_name == message.full_name):
                oneof = message.oneofs[field.oneof_index] if field.oneof_index is not None else None
                if oneof is None or oneof.is_presence:
                    field.boxed = True
                else:
                    field.indirect = True
                field.out_of_line = "on a cycle of message types"


# Inline payloads above this many bytes (estimated) are stored out of line.
# Without it a Frame carrying every operation's request and result inline
# would be kilobytes, and each copy of it a kilobytes memcpy plus retains.
OUT_OF_LINE_BYTES = 192

# (size, alignment, has spare bits for an Optional's tag) of Swift scalars.
SCALAR_LAYOUT = {
    T_DOUBLE: (8, 8, False), T_FLOAT: (4, 4, False), T_INT64: (8, 8, False), T_UINT64: (8, 8, False),
    T_INT32: (4, 4, False), T_FIXED64: (8, 8, False), T_FIXED32: (4, 4, False), T_BOOL: (1, 1, True),
    T_STRING: (16, 8, True), T_BYTES: (8, 8, True), T_UINT32: (4, 4, False), T_ENUM: (5, 4, True),
    T_SFIXED32: (4, 4, False), T_SFIXED64: (8, 8, False), T_SINT32: (4, 4, False), T_SINT64: (8, 8, False),
}
POINTER = (8, 8, True)


# Oneofs whose every message case is stored out of line, whatever its size. A `Frame` crosses
# the channel pipeline as an `NIOAny`, whose inline storage is three words: a frame of two
# words (its stream ID and one pointer) is not boxed again by every handler it passes, and a
# copy of it is one retain instead of a copy of its largest case's fields.
ALL_CASES_OUT_OF_LINE = {
    ("cirrus.v1.Frame", "kind"): "every case, so that a Frame is two words (NIOAny keeps three inline)",
}


# Messages whose fields live in one heap allocation shared by copies until one of them is
# changed (copy on write). A `Record` has about twenty reference-counted parts (IDs, strings,
# arrays); the server and the client copy records from request to plan to result to event,
# and each copy of an inline record retained every part and each destruction released it.
COPY_ON_WRITE = {
    "cirrus.v1.Record": "records are copied from request to plan to event;\n"
    "a copy retains one storage, not each of a record's twenty-odd parts",
    "cirrus.v1.Event": "an event is copied each time it is matched out of a frame,\n"
    "queued, and handed to its operation; a copy retains one storage, not each part of\n"
    "its payload (a saved record's ID, its record, its error)",
}


def mark_all_out_of_line(messages):
    for message in messages:
        for kind, member in message.members():
            if kind != "oneof":
                continue
            reason = ALL_CASES_OUT_OF_LINE.get((message.full_name, member.name))
            if reason is None:
                continue
            for field in member.fields:
                # A copy-on-write message is out of line already (one pointer to its storage).
                if field.type == T_MESSAGE and not field.indirect and field.type_name not in COPY_ON_WRITE:
                    field.indirect = True
                    field.out_of_line = reason


def mark_large(messages):
    """Boxes singular message fields and makes oneof cases indirect when the
    inline payload would exceed OUT_OF_LINE_BYTES. Sizes model Swift's layout
    (fields in order at their alignment; an Optional's tag uses spare bits when
    the payload has them, else one byte); fields already boxed for a cycle are
    one pointer, so the walk below never loops."""
    by_name = {m.full_name: m for m in messages}
    layouts = {}

    def optional(layout):
        size, align, spare = layout
        return layout if spare else (size + 1, align, True)

    def field_layout(field):
        if field.repeated:
            return POINTER
        if field.type != T_MESSAGE:
            return SCALAR_LAYOUT[field.type]
        # A copy-on-write message is one pointer to its storage, whatever its fields.
        if field.boxed or field.indirect or field.type_name in COPY_ON_WRITE:
            return POINTER
        return layout_of(by_name[field.type_name])

    def layout_of(message):
        if message.full_name in layouts:
            return layouts[message.full_name]
        offset, align, spare = 0, 1, False
        for kind, member in message.members():
            if kind == "field":
                field = member
                layout = field_layout(field)
                if field.type == T_MESSAGE and not field.repeated and layout[0] > OUT_OF_LINE_BYTES:
                    field.boxed = True
                    field.out_of_line = f"{layout[0]} bytes inline"
                    layout = POINTER
                if field.oneof_index is not None or (field.type == T_MESSAGE and not field.repeated):
                    layout = optional(layout)
            else:
                size, case_align = 0, 1
                for field in member.fields:
                    case = field_layout(field)
                    if field.type == T_MESSAGE and case[0] > OUT_OF_LINE_BYTES:
                        field.indirect = True
                        field.out_of_line = f"{case[0]} bytes inline"
                        case = POINTER
                    size, case_align = max(size, case[0]), max(case_align, case[1])
                layout = (size + 1, case_align, True)  # case tag; nil is one more tag value
            size, member_align, member_spare = layout
            offset = (offset + member_align - 1) // member_align * member_align + size
            align = max(align, member_align)
            spare = spare or member_spare
        layouts[message.full_name] = (offset, align, spare)
        return layouts[message.full_name]

    for message in messages:
        layout_of(message)


# ---------------------------------------------------------------------------
# Swift emission
# ---------------------------------------------------------------------------


class Writer:
    def __init__(self):
        self.lines = []
        self.level = 0

    def __call__(self, line=""):
        self.lines.append(("    " * self.level + line) if line else "")

    def doc(self, lines):
        for line in lines:
            self(("/// " + line).rstrip())

    def indent(self):
        self.level += 1

    def dedent(self):
        self.level -= 1

    def text(self):
        return "\n".join(self.lines) + "\n"


HEADER = "// Generated by Scripts/protoc-gen-swift-cirrus.py from {source}. DO NOT EDIT.\n// Regenerate with Scripts/generate-protos.sh.\n"


class Generator:
    def __init__(self, files):
        self.files = files
        self.messages = {m.full_name: m for f in files for m in f.all_messages()}
        self.enums = {e.full_name: e for f in files for e in f.all_enums()}
        mark_cycles(list(self.messages.values()))
        mark_all_out_of_line(list(self.messages.values()))
        mark_large(list(self.messages.values()))

    # -- types ---------------------------------------------------------------

    def element_type(self, field):
        if field.type == T_MESSAGE:
            return self.messages[field.type_name].swift_name
        if field.type == T_ENUM:
            return self.enums[field.type_name].swift_name
        return SWIFT_SCALAR[field.type]

    def field_type(self, field, presence):
        element = self.element_type(field)
        if field.repeated:
            return f"[{element}]"
        if field.type == T_MESSAGE or presence:
            return f"{element}?"
        return element

    def field_default(self, field, presence):
        if field.repeated:
            return "[]"
        if field.type == T_MESSAGE or presence:
            return "nil"
        if field.type == T_ENUM:
            return "." + escape(self.enums[field.type_name].default_case)
        return SWIFT_DEFAULT[SWIFT_SCALAR[field.type]]

    # -- declarations --------------------------------------------------------

    def emit_enum(self, w, enum):
        w.doc(enum.doc)
        w(f"public enum {enum.name}: Sendable, Hashable {{")
        w.indent()
        for number, case, doc in enum.values:
            w.doc(doc)
            w(f"case {escape(case)}")
        w("/// A value this version of the protocol does not know; kept so it round-trips.")
        w("case unrecognized(Int32)")
        w()
        w("/// The value's number on the wire.")
        w("public var rawValue: Int32 {")
        w.indent()
        w("switch self {")
        for number, case, _ in enum.values:
            w(f"case .{escape(case)}: {number}")
        w("case .unrecognized(let value): value")
        w("}")
        w.dedent()
        w("}")
        w()
        w("/// The case for a number on the wire; unknown numbers become `.unrecognized`.")
        w("public init(rawValue: Int32) {")
        w.indent()
        w("switch rawValue {")
        for number, case, _ in enum.values:
            w(f"case {number}: self = .{escape(case)}")
        w("default: self = .unrecognized(rawValue)")
        w("}")
        w.dedent()
        w("}")
        w.dedent()
        w("}")

    def emit_stored_members(self, w, message, access):
        """The message's fields and oneofs as stored properties (`access` is "public " or "")."""
        for kind, member in message.members():
            if kind == "field":
                field = member
                presence = field.oneof_index is not None
                swift_type = self.field_type(field, presence)
                name = escape(field.swift_name)
                w.doc(field.doc or (message.oneofs[field.oneof_index].doc if presence else []))
                if field.boxed:
                    w(f"{access}var {name}: {swift_type} {{")
                    w.indent()
                    w(f"get {{ _{field.swift_name}?.value }}")
                    w(f"set {{ _{field.swift_name} = newValue.map(WireBox.init) }}")
                    w.dedent()
                    w("}")
                    w(f"// Stored out of line: {field.out_of_line}.")
                    w(f"private var _{field.swift_name}: WireBox<{self.element_type(field)}>? = nil")
                else:
                    w(f"{access}var {name}: {swift_type} = {self.field_default(field, presence)}")
            else:
                oneof = member
                w.doc(oneof.doc)
                w(f"{access}var {escape(oneof.swift_name)}: {oneof.swift_type}? = nil")

    def emit_copy_on_write_members(self, w, message, reason):
        """Public properties that read and write one shared `WireStorage` of the stored fields."""
        for _, member in message.members():
            if member.swift_name in ("_storage", "_Fields", "__stored"):
                raise SystemExit(f"{message.full_name}.{member.name}: the name is taken by copy-on-write storage")
        lines = f"Stored out of line, copy on write: {reason}.".split("\n")
        for line in lines:
            w(f"// {line}")
        w("@usableFromInline var _storage: WireStorage<_Fields>")
        for kind, member in message.members():
            w()
            if kind == "field":
                presence = member.oneof_index is not None
                swift_type = self.field_type(member, presence)
                w.doc(member.doc or (message.oneofs[member.oneof_index].doc if presence else []))
            else:
                swift_type = f"{member.swift_type}?"
                w.doc(member.doc)
            name = escape(member.swift_name)
            # Inlinable, so that other modules read the field in place (borrowed) and copy it
            # only when they keep it; through a call, each read would be a coroutine whose
            # frame may not fit its caller's buffer and be allocated.
            w(f"@inlinable public var {name}: {swift_type} {{")
            w.indent()
            w(f"_read {{ yield _storage.fields.pointee.{name} }}")
            w(f"_modify {{ yield &_storage.uniqueFields.pointee.{name} }}")
            w.dedent()
            w("}")
        w()
        w("public static func == (lhs: Self, rhs: Self) -> Bool {")
        w.indent()
        w("lhs._storage.isShared(with: rhs._storage) || lhs._storage.fields.pointee == rhs._storage.fields.pointee")
        w.dedent()
        w("}")
        w()
        w("public func hash(into hasher: inout Hasher) { hasher.combine(_storage.fields.pointee) }")
        w()
        w("/// The stored fields, shared by copies until one of them changes.")
        w("@usableFromInline struct _Fields: Hashable, Sendable {")
        w.indent()
        self.emit_stored_members(w, message, "@usableFromInline ")
        w.dedent()
        w("}")

    def emit_message(self, w, message):
        w.doc(message.doc)
        w(f"public struct {message.name}: WireMessage {{")
        w.indent()
        members = message.members()
        copy_on_write = COPY_ON_WRITE.get(message.full_name)
        if copy_on_write is not None:
            self.emit_copy_on_write_members(w, message, copy_on_write)
        else:
            self.emit_stored_members(w, message, "public ")
        for kind, member in members:
            if kind == "oneof":
                w()
                w.doc(member.doc)
                whole = ALL_CASES_OUT_OF_LINE.get((message.full_name, member.name))
                if whole is not None:
                    w(f"// Stored out of line: {whole}.")
                # Case by case, not `indirect enum`: a copy-on-write case is out of line already.
                every = whole is not None and all(field.indirect for field in member.fields)
                enum_prefix = "indirect " if every else ""
                w(f"public {enum_prefix}enum {member.swift_type.rsplit('.', 1)[1]}: Sendable, Hashable {{")
                w.indent()
                for field in member.fields:
                    if field.indirect and whole is None:
                        w(f"// Stored out of line: {field.out_of_line}.")
                    elif whole is not None and not every and field.type_name in COPY_ON_WRITE:
                        w("// Copy on write: one pointer to its storage already.")
                    w.doc(field.doc)
                    prefix = "indirect " if field.indirect and not every else ""
                    w(f"{prefix}case {escape(field.swift_name)}({self.element_type(field)})")
                w.dedent()
                w("}")
        for enum in message.enums:
            w()
            self.emit_enum(w, enum)
        for nested in message.nested:
            w()
            self.emit_message(w, nested)
        w()
        w("/// A value with every field at its default.")
        w("public init() {}" if copy_on_write is None else "public init() { _storage = WireStorage(_Fields()) }")
        if members:
            w()
            w("/// A value with the given fields; omitted fields keep their defaults.")
            params = []
            for kind, member in members:
                if kind == "field":
                    presence = member.oneof_index is not None
                    params.append(f"{escape(member.swift_name)}: {self.field_type(member, presence)}"
                                  f" = {self.field_default(member, presence)}")
                else:
                    params.append(f"{escape(member.swift_name)}: {member.swift_type}? = nil")
            w("public init(")
            w.indent()
            for index, param in enumerate(params):
                w(param + ("," if index < len(params) - 1 else ""))
            w.dedent()
            w(") {")
            w.indent()
            target = "self" if copy_on_write is None else "__stored.pointee"
            if copy_on_write is not None:
                # Written in place into the one storage: no copy of the fields is made.
                w("_storage = WireStorage(_Fields())")
                w("let __stored = _storage.fields")
            for kind, member in members:
                w(f"{target}.{escape(member.swift_name)} = {escape(member.swift_name)}")
            w.dedent()
            w("}")
        w.dedent()
        w("}")

    # -- conversion ----------------------------------------------------------

    def to_c(self, field, value):
        """Swift expression converting `value` (one element) to its C representation."""
        if field.type == T_STRING:
            return f"arena.cString({value})"
        if field.type == T_BYTES:
            return f"arena.binaryData({value})"
        if field.type == T_BOOL:
            return f"({value} ? 1 : 0)"
        if field.type == T_ENUM:
            return f".init(rawValue: .init(truncatingIfNeeded: {value}.rawValue))"
        if field.type == T_MESSAGE:
            return f"{value}.cMake(in: arena)"
        return value

    def from_c(self, field, value):
        """Swift expression converting one C element `value` to Swift."""
        if field.type == T_STRING:
            return f"WireCConvert.string({value})"
        if field.type == T_BYTES:
            return f"WireCConvert.bytes({value})"
        if field.type == T_BOOL:
            return f"{value} != 0"
        if field.type == T_ENUM:
            return f"{self.enums[field.type_name].swift_name}(rawValue: Int32(truncatingIfNeeded: {value}.rawValue))"
        if field.type == T_MESSAGE:
            return f"{self.messages[field.type_name].swift_name}(cStruct: {value})"
        return value

    def emit_conversion(self, w, message):
        c_type = message.c_type
        w(f"extension {message.swift_name}: CBackedMessage {{")
        w.indent()
        w(f"typealias CStruct = {c_type}")
        w()
        w("static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> {")
        w.indent()
        w(f"var message = {c_type}()")
        w(f"{message.c_prefix}__init(&message)")
        w("return message.base.descriptor")
        w.dedent()
        w("}")
        w()
        w(f"static func cAllocate(in arena: WireArena) -> UnsafeMutablePointer<{c_type}> {{")
        w.indent()
        w(f"let message = arena.allocate({c_type}.self)")
        w(f"{message.c_prefix}__init(message)")
        w("return message")
        w.dedent()
        w("}")
        w()
        copy_on_write = message.full_name in COPY_ON_WRITE
        if copy_on_write:
            # The fields are read in place: through the public accessors each would be retained.
            w(f"func cFill(_ c: UnsafeMutablePointer<{c_type}>, arena: WireArena) {{")
            w.indent()
            w("_storage.fields.pointee.cFill(c, arena: arena)")
            w.dedent()
            w("}")
        else:
            self.emit_fill_c(w, message)
        w()
        self.emit_init_from_c(w, message)
        w.dedent()
        w("}")
        if copy_on_write:
            w()
            w(f"extension {message.swift_name}._Fields {{")
            w.indent()
            # Mutating, though it writes nothing: called on the storage's `pointee`, a
            # non-mutating method got a copy of the whole fields (a retain of every part per
            # record encoded); a mutating one gets their address.
            self.emit_fill_c(w, message, mutating=True)
            w.dedent()
            w("}")

    def emit_fill_c(self, w, message, mutating=False):
        c_type = message.c_type
        members = message.members()
        prefix = "mutating " if mutating else ""
        w(f"{prefix}func cFill(_ c: UnsafeMutablePointer<{c_type}>, arena: WireArena) {{")
        w.indent()
        if not members:
            w("_ = (c, arena)")
        for kind, member in members:
            if kind == "field" and member.oneof_index is None:
                f = member
                name = "self." + escape(f.swift_name)
                if f.repeated:
                    w(f"(c.pointee.n_{f.c_name}, c.pointee.{f.c_name}) = arena.array({name}) {{ {self.to_c(f, '$0')} }}")
                elif f.type == T_MESSAGE:
                    w(f"if let value = {name} {{ c.pointee.{f.c_name} = {self.to_c(f, 'value')} }}")
                elif f.type in (T_STRING, T_BYTES):
                    # Empty keeps protoc-c's default (no allocation).
                    w(f"if !{name}.isEmpty {{ c.pointee.{f.c_name} = {self.to_c(f, name)} }}")
                else:
                    w(f"c.pointee.{f.c_name} = {self.to_c(f, name)}")
            elif kind == "field":
                f = member
                oneof = message.oneofs[f.oneof_index]
                w(f"if let value = self.{escape(f.swift_name)} {{")
                w.indent()
                w(f"c.pointee.{oneof.c_case_name} = .init(rawValue: {f.number})")
                w(f"c.pointee.{f.c_name} = {self.to_c(f, 'value')}")
                w.dedent()
                w("}")
            else:
                oneof = member
                w(f"switch self.{escape(oneof.swift_name)} {{")
                w("case nil: break")
                for f in oneof.fields:
                    w(f"case .{escape(f.swift_name)}(let value)?:")
                    w.indent()
                    w(f"c.pointee.{oneof.c_case_name} = .init(rawValue: {f.number})")
                    w(f"c.pointee.{f.c_name} = {self.to_c(f, 'value')}")
                    w.dedent()
                w("}")
        w.dedent()
        w("}")

    def emit_init_from_c(self, w, message):
        c_type = message.c_type
        members = message.members()
        w(f"init(cStruct c: UnsafePointer<{c_type}>) {{")
        w.indent()
        # A copy-on-write message allocates its storage once and fills the fields in place.
        copy_on_write = message.full_name in COPY_ON_WRITE
        target = "__stored.pointee" if copy_on_write else "self"
        if copy_on_write:
            w("self.init()")
            w("let __stored = _storage.fields")
        else:
            w("self.init()")
        for kind, member in members:
            if kind == "field" and member.oneof_index is None:
                f = member
                name = f"{target}." + escape(f.swift_name)
                if f.repeated:
                    if f.type == T_MESSAGE:
                        w(f"{name} = WireCConvert.messages(c.pointee.{f.c_name}, count: c.pointee.n_{f.c_name})")
                    else:
                        w(f"{name} = WireCConvert.array(c.pointee.{f.c_name}, count: c.pointee.n_{f.c_name}) {{ {self.from_c(f, '$0')} }}")
                elif f.type == T_MESSAGE:
                    w(f"if let value = c.pointee.{f.c_name} {{ {name} = {self.from_c(f, 'value')} }}")
                else:
                    w(f"{name} = {self.from_c(f, 'c.pointee.' + f.c_name)}")
            elif kind == "field":
                f = member
                oneof = message.oneofs[f.oneof_index]
                w(f"if c.pointee.{oneof.c_case_name}.rawValue == {f.number} {{")
                w.indent()
                self.emit_case_read(w, f, f"{target}." + escape(f.swift_name), lambda v: v)
                w.dedent()
                w("}")
            else:
                oneof = member
                w(f"switch c.pointee.{oneof.c_case_name}.rawValue {{")
                for f in oneof.fields:
                    w(f"case {f.number}:")
                    w.indent()
                    self.emit_case_read(w, f, f"{target}." + escape(oneof.swift_name),
                                        lambda v, f=f: f".{escape(f.swift_name)}({v})")
                    w.dedent()
                w("default: break  // not set, or a case this version does not know: absent")
                w("}")
        w.dedent()
        w("}")

    def emit_case_read(self, w, field, target, wrap):
        source = f"c.pointee.{field.c_name}"
        if field.type in (T_MESSAGE, T_STRING):
            w(f"if let value = {source} {{ {target} = {wrap(self.from_c(field, 'value'))} }}")
        else:
            w(f"{target} = {wrap(self.from_c(field, source))}")

    def emit_forwarding(self, w, message):
        name = message.swift_name
        w(f"extension {name} {{")
        w.indent()
        w("public var serializedSize: Int { WireCodec.serializedSize(of: self) }")
        w("public func serializedBytes() -> [UInt8] { WireCodec.serializedBytes(of: self) }")
        w("public func serialize(into buffer: inout ByteBuffer) { WireCodec.serialize(self, into: &buffer) }")
        w("public func serialize(into buffer: inout ByteBuffer, arena: WireArena) {")
        w.indent()
        w("WireCodec.serialize(self, into: &buffer, arena: arena)")
        w.dedent()
        w("}")
        w("public init(serializedBytes bytes: some Collection<UInt8>) throws(WireError) {")
        w.indent()
        w("self = try WireCodec.decode(Self.self, from: bytes)")
        w.dedent()
        w("}")
        w("/// Decodes from an array; the same as the `some Collection<UInt8>` form, without generic overhead.")
        w("public init(serializedBytes bytes: [UInt8]) throws(WireError) {")
        w.indent()
        w("self = try WireCodec.decode(Self.self, from: bytes)")
        w.dedent()
        w("}")
        w("public init(buffer: ByteBuffer) throws(WireError) { self = try WireCodec.decode(Self.self, from: buffer) }")
        w("public static func decode(_ bytes: UnsafeRawBufferPointer, arena: WireArena) throws(WireError) -> Self {")
        w.indent()
        w("try WireCodec.decode(Self.self, from: bytes, arena: arena)")
        w.dedent()
        w("}")
        w.dedent()
        w("}")

    def swift_file(self, proto):
        w = Writer()
        w.lines.append(HEADER.format(source=proto.name).rstrip("\n"))
        if proto.messages:
            w()
            w("internal import CCirrusProto")
            w("internal import CProtobufC")
            w("public import NIOCore")
        tops_enums = proto.enums
        tops = proto.messages
        if tops_enums or tops:
            w()
            w("extension Wire {")
            w.indent()
            first = True
            for enum in tops_enums:
                if not first:
                    w()
                first = False
                self.emit_enum(w, enum)
            for message in tops:
                if not first:
                    w()
                first = False
                self.emit_message(w, message)
            w.dedent()
            w("}")
        for message in proto.all_messages():
            w()
            self.emit_forwarding(w, message)
            w()
            self.emit_conversion(w, message)
        return w.text()

    # -- tests ---------------------------------------------------------------

    def sample_function(self, message):
        return "sample" + message.swift_name[len("Wire."):].replace(".", "_")

    def sample_value(self, field, ordinal, element_index=0):
        t = field.type
        i = ordinal + element_index
        if t == T_STRING:
            strings = ['"héllo 👋🏽 世界 e\\u{301} ✓"', '"Ünïcödé ✓ 中文 🇨🇭 a\\u{308}"', '"日本語テキスト 🧪 ñ"', '"Z̤͔ͧ̑̓ä͖̭̈̇lͮ̒ͫǒ̭"']
            return strings[i % len(strings)]
        if t == T_BYTES:
            return "[0x00, 0xFF, 0x7F, 0x80, 0x00, 0x01]" if i % 2 == 0 else "[0xFF, 0x00]"
        if t == T_BOOL:
            return "true"
        if t in (T_DOUBLE, T_FLOAT):
            kind = "Double" if t == T_DOUBLE else "Float"
            values = [f"{kind}.infinity", f"-{kind}.infinity", f"{kind}.greatestFiniteMagnitude",
                      f"-{kind}.greatestFiniteMagnitude", "-1.5e30", f"{kind}.leastNonzeroMagnitude"]
            return values[i % len(values)]
        if t == T_ENUM:
            enum = self.enums[field.type_name]
            choices = [f".{escape(case)}" for number, case, _ in enum.values if number != 0] + [".unrecognized(4242)"]
            return choices[i % len(choices)]
        swift = SWIFT_SCALAR[t]
        values = {"Int64": ["Int64.min", "Int64.max", "-1"], "Int32": ["Int32.min", "Int32.max", "-1"],
                  "UInt64": ["UInt64.max", "1", "UInt64(UInt32.max) + 1"], "UInt32": ["UInt32.max", "1", "300"]}[swift]
        return values[i % len(values)]

    def emit_sample(self, w, message):
        name = self.sample_function(message)
        w(f"/// Every field of `{message.swift_name}` set; nested messages filled down to `depth` 0.")
        w(f"static func {name}(depth: Int) -> {message.swift_name} {{")
        w.indent()
        if not message.members():
            w(f"{message.swift_name}()")
            w.dedent()
            w("}")
            return
        w(f"var value = {message.swift_name}()")
        w("guard depth > 0 else { return value }")
        for ordinal, (kind, member) in enumerate(message.members()):
            if kind == "oneof":
                f = member.fields[0]
                w(f"value.{escape(member.swift_name)} = .{escape(f.swift_name)}({self.element_expr(f, ordinal)})")
                continue
            f = member
            target = f"value.{escape(f.swift_name)}"
            if f.repeated:
                elements = [self.element_expr(f, ordinal, k) for k in range(3)]
                w(f"{target} = [{', '.join(elements)}]")
            elif f.oneof_index is not None and f.type != T_MESSAGE:
                # Presence field: the zero value must still come back as present.
                w(f"{target} = {self.field_default(f, False) if f.type != T_ENUM else self.zero_enum(f)}")
            else:
                w(f"{target} = {self.element_expr(f, ordinal)}")
        w("return value")
        w.dedent()
        w("}")

    def zero_enum(self, field):
        return "." + escape(self.enums[field.type_name].default_case)

    def element_expr(self, field, ordinal, element_index=0):
        if field.type == T_MESSAGE:
            return f"{self.sample_function(self.messages[field.type_name])}(depth: depth - 1)"
        return self.sample_value(field, ordinal, element_index)

    def test_file(self):
        w = Writer()
        w.lines.append(HEADER.format(source="the .proto files").rstrip("\n"))
        w()
        w("import CirrusWire")
        w("import Testing")
        w()
        w("/// Sample values of every generated message, used by the round-trip tests below.")
        w("enum GeneratedSamples {")
        w.indent()
        messages = [m for f in self.files for m in f.all_messages()]
        w("/// Every message type with all fields at their defaults.")
        w("static let empty: [WireSample] = [")
        w.indent()
        for m in messages:
            w(f'WireSample("{m.swift_name}", {m.swift_name}()),')
        w.dedent()
        w("]")
        w()
        w("/// Every message type with every field set (first oneof case, presence fields at zero).")
        w("static let maximal: [WireSample] = [")
        w.indent()
        for m in messages:
            w(f'WireSample("{m.swift_name}", {self.sample_function(m)}(depth: 3)),')
        w.dedent()
        w("]")
        w()
        w("/// One value per case of every oneof (presence fields set to a non-default value).")
        w("static let oneofCases: [WireSample] = [")
        w.indent()
        for m in messages:
            for ordinal, (kind, member) in enumerate(m.members()):
                if kind == "oneof":
                    for f in member.fields:
                        value = f".{escape(f.swift_name)}({self.element_expr(f, ordinal).replace('depth - 1', '1')})"
                        w(f'WireSample("{m.swift_name}.{member.swift_name}.{f.swift_name}", '
                          f'{m.swift_name}({escape(member.swift_name)}: {value})),')
                elif member.oneof_index is not None:
                    f = member
                    value = self.element_expr(f, ordinal).replace("depth - 1", "1")
                    w(f'WireSample("{m.swift_name}.{f.swift_name}", {m.swift_name}({escape(f.swift_name)}: {value})),')
        w.dedent()
        w("]")
        for m in messages:
            w()
            self.emit_sample(w, m)
        w()
        path = self.recursion_path()
        w("/// Field numbers from `Wire.Frame` to a message on a type cycle, then around the cycle;")
        w("/// nil when the protocol has no recursive message reachable from `Frame`.")
        if path is None:
            w("static let frameRecursion: (prefix: [UInt32], cycle: [UInt32])? = nil")
        else:
            w(f"static let frameRecursion: (prefix: [UInt32], cycle: [UInt32])? = ({path[0]}, {path[1]})")
        w.dedent()
        w("}")
        w()
        w("@Test(arguments: GeneratedSamples.empty)")
        w("func emptyMessageRoundTrips(_ sample: WireSample) throws {")
        w.indent()
        w("try sample.checkRoundTrip()")
        w.dedent()
        w("}")
        w()
        w("@Test(arguments: GeneratedSamples.maximal)")
        w("func maximalMessageRoundTrips(_ sample: WireSample) throws {")
        w.indent()
        w("try sample.checkRoundTrip()")
        w.dedent()
        w("}")
        w()
        w("@Test(arguments: GeneratedSamples.oneofCases)")
        w("func oneofCaseRoundTrips(_ sample: WireSample) throws {")
        w.indent()
        w("try sample.checkRoundTrip()")
        w.dedent()
        w("}")
        return w.text()

    def recursion_path(self):
        frame = next((m for m in self.messages.values() if m.name == "Frame" and m.swift_name == "Wire.Frame"), None)
        if frame is None:
            return None
        edges = {name: [(f.number, f.type_name) for f in m.fields if f.type == T_MESSAGE]
                 for name, m in self.messages.items()}
        component = strongly_connected(sorted(self.messages), {k: [t for _, t in v] for k, v in edges.items()})

        def find_path(start, goal_test):
            queue, seen = [(start, [])], {start}
            while queue:
                node, path = queue.pop(0)
                for number, target in edges[node]:
                    if goal_test(target):
                        return target, path + [number]
                    if target not in seen:
                        seen.add(target)
                        queue.append((target, path + [number]))
            return None

        def on_cycle(name):
            return any(component[t] == component[name] for _, t in edges[name])

        if on_cycle(frame.full_name):
            start, prefix = frame.full_name, []
        else:
            found = find_path(frame.full_name, on_cycle)
            if found is None:
                return None
            start, prefix = found
        cycle = find_path(start, lambda t: t == start)
        return prefix, cycle[1]


def main():
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    data = Path(sys.argv[1]).read_bytes()
    files = [ProtoFile(parse_fields(f)) for f in parse_fields(data).get(1, [])]
    for f in files:
        if f.package != "cirrus.v1":
            raise SystemExit(f"{f.name}: only package cirrus.v1 is supported (got '{f.package}')")
    generator = Generator(files)
    swift_out, tests_out = Path(sys.argv[2]), Path(sys.argv[3])
    swift_out.mkdir(parents=True, exist_ok=True)
    tests_out.mkdir(parents=True, exist_ok=True)
    for proto in sorted(files, key=lambda f: f.name):
        stem = proto.name.rsplit("/", 1)[-1].removesuffix(".proto")
        (swift_out / f"{stem}.pb.swift").write_text(generator.swift_file(proto), encoding="utf-8")
    (tests_out / "AllMessagesRoundTrip.swift").write_text(generator.test_file(), encoding="utf-8")


if __name__ == "__main__":
    main()
