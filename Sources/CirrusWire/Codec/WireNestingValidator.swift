// protobuf-c.h reaches Swift through CCirrusProto's headers too; its enum
// constants (PROTOBUF_C_TYPE_MESSAGE) are only visible with both imports.
internal import CCirrusProto
internal import CProtobufC

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Walks protobuf wire bytes once, before protobuf-c unpacks them, and rejects
/// what would make the unpacker or the C-to-Swift conversion misbehave: nesting
/// of sub-messages deeper than ``maximumDepth`` (protobuf-c recurses per level,
/// so a few MiB of nesting would overflow the stack), malformed varints, tags,
/// lengths, wire types protobuf-c does not support (groups), and string fields
/// holding a NUL byte (protobuf-c hands strings over NUL-terminated, so
/// `"a\0b"` would silently arrive as `"a"`: two different names would become
/// one).
enum WireNestingValidator {
    /// The deepest sub-message nesting accepted; the outer message is depth 0.
    static let maximumDepth = 64

    static func validate(
        _ bytes: UnsafeRawBufferPointer,
        descriptor: UnsafePointer<ProtobufCMessageDescriptor>
    ) throws(WireError) {
        try walk(bytes, from: 0, to: bytes.count, descriptor: descriptor, depth: 0)
    }

    /// Recursion is bounded by `maximumDepth`.
    private static func walk(
        _ bytes: UnsafeRawBufferPointer,
        from start: Int,
        to end: Int,
        descriptor: UnsafePointer<ProtobufCMessageDescriptor>?,
        depth: Int
    ) throws(WireError) {
        var position = start
        while position < end {
            let tag = try readVarint(bytes, &position, end)
            let number = tag >> 3
            guard number >= 1, number <= 0x1FFF_FFFF else {
                throw .malformedMessage("invalid field number \(number)")
            }
            switch tag & 7 {
            case 0:
                _ = try readVarint(bytes, &position, end)
            case 1:
                guard end - position >= 8 else { throw .malformedMessage("truncated fixed64 field") }
                position += 8
            case 5:
                guard end - position >= 4 else { throw .malformedMessage("truncated fixed32 field") }
                position += 4
            case 2:
                let length = try readVarint(bytes, &position, end)
                guard length <= UInt64(end - position) else {
                    throw .malformedMessage("length \(length) runs past the end of the message")
                }
                let fieldEnd = position + Int(length)
                switch field(descriptor, number: UInt32(number)) {
                case .message(let sub):
                    guard depth < maximumDepth else {
                        throw .malformedMessage("messages nested deeper than \(maximumDepth) levels")
                    }
                    try walk(bytes, from: position, to: fieldEnd, descriptor: sub, depth: depth + 1)
                case .string:
                    if let base = bytes.baseAddress, memchr(base + position, 0, fieldEnd - position) != nil {
                        throw .malformedMessage("string field \(number) contains a NUL byte")
                    }
                case .other:
                    break
                }
                position = fieldEnd
            default:
                throw .malformedMessage("unsupported wire type \(tag & 7)")
            }
        }
    }

    private static func readVarint(
        _ bytes: UnsafeRawBufferPointer,
        _ position: inout Int,
        _ end: Int
    ) throws(WireError) -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while position < end, shift < 64 {
            let byte = bytes[position]
            position += 1
            result |= UInt64(byte & 0x7F) << shift
            if byte < 0x80 { return result }
            shift += 7
        }
        throw .malformedMessage("malformed varint")
    }

    private enum FieldKind {
        case message(UnsafePointer<ProtobufCMessageDescriptor>)
        case string
        case other
    }

    /// What field `number` of `descriptor` holds, as far as the walk cares.
    private static func field(
        _ descriptor: UnsafePointer<ProtobufCMessageDescriptor>?,
        number: UInt32
    ) -> FieldKind {
        guard let descriptor, let fields = descriptor.pointee.fields else { return .other }
        // protoc-c emits `fields` sorted by number.
        var low = 0
        var high = Int(descriptor.pointee.n_fields) - 1
        while low <= high {
            let middle = (low + high) / 2
            let field = fields[middle]
            if field.id == number {
                if field.type == PROTOBUF_C_TYPE_STRING { return .string }
                guard field.type == PROTOBUF_C_TYPE_MESSAGE,
                    let sub = field.descriptor?.assumingMemoryBound(to: ProtobufCMessageDescriptor.self)
                else { return .other }
                return .message(UnsafePointer(sub))
            }
            if field.id < number { low = middle + 1 } else { high = middle - 1 }
        }
        return .other
    }
}
