internal import CProtobufC
import NIOCore

/// The generic encode and decode paths every generated message forwards to.
enum WireCodec {
    // MARK: Encoding

    /// Builds the C struct tree of `message` in `arena`, runs `body` on it and
    /// resets the arena.
    private static func withCMessage<M: CBackedMessage, Result>(
        _ message: M,
        arena: WireArena,
        _ body: (UnsafePointer<ProtobufCMessage>) -> Result
    ) -> Result {
        defer { arena.reset() }
        let c = message.cMake(in: arena)
        return body(UnsafeRawPointer(c).assumingMemoryBound(to: ProtobufCMessage.self))
    }

    static func serializedSize<M: CBackedMessage>(of message: M) -> Int {
        WireArena.withScratch { arena in
            withCMessage(message, arena: arena) { protobuf_c_message_get_packed_size($0) }
        }
    }

    static func serializedBytes<M: CBackedMessage>(of message: M) -> [UInt8] {
        WireArena.withScratch { arena in
            withCMessage(message, arena: arena) { c in
                let size = protobuf_c_message_get_packed_size(c)
                return [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
                    guard let base = buffer.baseAddress else { return }
                    count = protobuf_c_message_pack(c, base)
                }
            }
        }
    }

    static func serialize<M: CBackedMessage>(_ message: M, into buffer: inout ByteBuffer) {
        WireArena.withScratch { arena in
            serialize(message, into: &buffer, arena: arena)
        }
    }

    static func serialize<M: CBackedMessage>(_ message: M, into buffer: inout ByteBuffer, arena: WireArena) {
        withCMessage(message, arena: arena) { c in
            let size = protobuf_c_message_get_packed_size(c)
            guard size > 0 else { return }
            buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: size) { bytes in
                guard let base = bytes.baseAddress else { return 0 }
                return protobuf_c_message_pack(c, base.assumingMemoryBound(to: UInt8.self))
            }
        }
    }

    // MARK: Decoding

    static func decode<M: CBackedMessage>(
        _: M.Type,
        from bytes: UnsafeRawBufferPointer,
        arena: WireArena
    ) throws(WireError) -> M {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return M() }
        let descriptor = M.cDescriptor
        // protobuf-c unpacks sub-messages recursively; bound the depth first.
        try WireNestingValidator.validate(bytes, descriptor: descriptor)
        defer { arena.reset() }
        let unpacked = arena.withDecodingAllocator { allocator in
            protobuf_c_message_unpack(descriptor, allocator, bytes.count, base.assumingMemoryBound(to: UInt8.self))
        }
        guard let unpacked else {
            throw .malformedMessage("not a valid \(String(cString: descriptor.pointee.name)) message")
        }
        return M(cStruct: UnsafeRawPointer(unpacked).assumingMemoryBound(to: M.CStruct.self))
    }

    static func decode<M: CBackedMessage>(_: M.Type, from buffer: ByteBuffer) throws(WireError) -> M {
        let result = buffer.withUnsafeReadableBytes { bytes in
            Result { () throws(WireError) in
                try WireArena.withScratch { (arena) throws(WireError) in
                    try decode(M.self, from: bytes, arena: arena)
                }
            }
        }
        return try result.get()
    }

    static func decode<M: CBackedMessage>(_: M.Type, from bytes: [UInt8]) throws(WireError) -> M {
        try bytes.withUnsafeBytes { bytes in
            Result { () throws(WireError) in
                try WireArena.withScratch { (arena) throws(WireError) in
                    try decode(M.self, from: bytes, arena: arena)
                }
            }
        }.get()
    }

    static func decode<M: CBackedMessage>(_: M.Type, from bytes: some Collection<UInt8>) throws(WireError) -> M {
        func decodeContiguous(_ buffer: UnsafeBufferPointer<UInt8>) -> Result<M, WireError> {
            Result { () throws(WireError) in
                try WireArena.withScratch { (arena) throws(WireError) in
                    try decode(M.self, from: UnsafeRawBufferPointer(buffer), arena: arena)
                }
            }
        }
        if let result = bytes.withContiguousStorageIfAvailable(decodeContiguous) {
            return try result.get()
        }
        return try Array(bytes).withUnsafeBufferPointer(decodeContiguous).get()
    }
}
