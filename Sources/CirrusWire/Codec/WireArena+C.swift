internal import CProtobufC

extension WireArena {
    /// Uninitialised memory for one `T`.
    func allocate<T>(_: T.Type) -> UnsafeMutablePointer<T> {
        allocate(byteCount: MemoryLayout<T>.stride, alignment: MemoryLayout<T>.alignment)
            .bindMemory(to: T.self, capacity: 1)
    }

    /// A NUL-terminated copy of `string`'s UTF-8.
    ///
    /// protobuf-c strings are C strings, so a string containing NUL is sent
    /// truncated before its first NUL.
    func cString(_ string: String) -> UnsafeMutablePointer<CChar> {
        // Read in place (native and small strings are contiguous); `withUTF8` would need a
        // mutable copy of the string, retained and released for every string encoded.
        if let copied = string.utf8.withContiguousStorageIfAvailable({ self.cString(utf8: UnsafeRawBufferPointer($0)) }) {
            return copied
        }
        var string = string
        return string.withUTF8 { self.cString(utf8: UnsafeRawBufferPointer($0)) }
    }

    private func cString(utf8: UnsafeRawBufferPointer) -> UnsafeMutablePointer<CChar> {
        let pointer = allocate(byteCount: utf8.count + 1, alignment: 1)
        if let base = utf8.baseAddress {
            pointer.copyMemory(from: base, byteCount: utf8.count)
        }
        pointer.storeBytes(of: 0, toByteOffset: utf8.count, as: UInt8.self)
        return pointer.bindMemory(to: CChar.self, capacity: utf8.count + 1)
    }

    /// A copy of `bytes` as protobuf-c binary data (never a NULL data pointer).
    func binaryData(_ bytes: [UInt8]) -> ProtobufCBinaryData {
        let pointer = allocate(byteCount: bytes.count, alignment: 1)
        bytes.withUnsafeBytes { source in
            if let base = source.baseAddress {
                pointer.copyMemory(from: base, byteCount: source.count)
            }
        }
        return ProtobufCBinaryData(len: bytes.count, data: pointer.bindMemory(to: UInt8.self, capacity: bytes.count))
    }

    /// A C array of `values.count` elements made by `transform`; (0, nil) when empty.
    func array<Element, CElement>(
        _ values: [Element],
        _ transform: (Element) -> CElement
    ) -> (Int, UnsafeMutablePointer<CElement>?) {
        guard !values.isEmpty else { return (0, nil) }
        let pointer = allocate(
            byteCount: MemoryLayout<CElement>.stride * values.count,
            alignment: MemoryLayout<CElement>.alignment
        ).bindMemory(to: CElement.self, capacity: values.count)
        for index in values.indices {
            (pointer + index).initialize(to: transform(values[index]))
        }
        return (values.count, pointer)
    }

    /// Runs `body` with a protobuf-c allocator that takes memory from this
    /// arena (bounded by `decodeByteLimit`) and never frees.
    func withDecodingAllocator<Result>(_ body: (UnsafeMutablePointer<ProtobufCAllocator>) -> Result) -> Result {
        var allocator = ProtobufCAllocator(
            alloc: { data, size in
                guard let data else { return nil }
                // protobuf-c calls this once per sub-message, string and array it unpacks: the
                // guaranteed reference spares a retain and a release per call (the arena is
                // kept alive by `withExtendedLifetime` below for as long as the allocator is).
                return Unmanaged<WireArena>.fromOpaque(data)._withUnsafeGuaranteedRef {
                    $0.allocateForDecoder(byteCount: size)
                }
            },
            free: { _, _ in },
            allocator_data: Unmanaged.passUnretained(self).toOpaque()
        )
        return withExtendedLifetime(self) { body(&allocator) }
    }
}
