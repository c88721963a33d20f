/// Writes bytes into a buffer whose size was computed beforehand (a message's parts, whose
/// sizes its writer reads first): a store and a move of the offset per write, where appending
/// to an array checks its uniqueness and capacity at every byte.
///
/// Each write checks that it fits. A byte or a run of bytes that does not is not written and
/// marks the writer ``overflowed`` (a varint stops at its first byte that does not fit), so a
/// size computed wrongly gives a result the caller refuses, never a write past the buffer.
///
/// For example:
/// ```swift
/// let bytes = RawBytesWriter.bytes(count: 3) { out in
///     out.byte(1 << 3 | 0)
///     out.varint(300)
/// }  // [0x08, 0xAC, 0x02]
/// ```
struct RawBytesWriter {
    private let base: UnsafeMutableRawPointer?
    private let capacity: Int
    /// The bytes written so far.
    private(set) var count = 0
    /// Whether a write did not fit.
    private(set) var overflowed = false

    init(_ buffer: UnsafeMutableRawBufferPointer) {
        self.base = buffer.baseAddress
        self.capacity = buffer.count
    }

    /// A new array of the `count` bytes `body` writes; nil when it writes more or fewer.
    static func bytes(count: Int, _ body: (inout RawBytesWriter) -> Void) -> [UInt8]? {
        guard count >= 0 else { return nil }
        var complete = false
        let bytes = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            var writer = RawBytesWriter(UnsafeMutableRawBufferPointer(buffer))
            body(&writer)
            complete = !writer.overflowed && writer.count == count
            initialized = complete ? count : 0
        }
        return complete ? bytes : nil
    }

    /// Replaces `bytes` with the `count` bytes `body` writes, in the array's own storage when it
    /// has the room; false, and `bytes` empty, when `body` writes more or fewer.
    static func write(count: Int, into bytes: inout [UInt8], _ body: (inout RawBytesWriter) -> Void) -> Bool {
        bytes.removeAll(keepingCapacity: true)
        guard count >= 0 else { return false }
        bytes.append(contentsOf: repeatElement(0, count: count))
        let complete = bytes.withUnsafeMutableBytes { buffer in
            var writer = RawBytesWriter(buffer)
            body(&writer)
            return !writer.overflowed && writer.count == count
        }
        if !complete { bytes.removeAll(keepingCapacity: true) }
        return complete
    }

    @inline(__always)
    mutating func byte(_ value: UInt8) {
        guard self.count < self.capacity, let base = self.base else {
            self.overflowed = true
            return
        }
        base.storeBytes(of: value, toByteOffset: self.count, as: UInt8.self)
        self.count += 1
    }

    /// `value` as a varint.
    @inline(__always)
    mutating func varint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            self.byte(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        self.byte(UInt8(value))
    }

    mutating func bytes(_ bytes: UnsafeRawBufferPointer) {
        guard let source = bytes.baseAddress, bytes.count > 0 else { return }
        guard bytes.count <= self.capacity - self.count, let base = self.base else {
            self.overflowed = true
            return
        }
        (base + self.count).copyMemory(from: source, byteCount: bytes.count)
        self.count += bytes.count
    }

    mutating func bytes(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { self.bytes($0) }
    }

    /// The UTF-8 of the string `string` points to, read where it lies.
    mutating func utf8(of string: UnsafePointer<String>) {
        let copied: Void? = string.pointee.utf8.withContiguousStorageIfAvailable { self.bytes(UnsafeRawBufferPointer($0)) }
        if copied == nil {
            for byte in string.pointee.utf8 { self.byte(byte) }
        }
    }
}
