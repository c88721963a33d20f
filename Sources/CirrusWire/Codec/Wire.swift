public import NIOCore

/// The namespace of the Cirrus protocol messages generated from `Protos/cirrus/v1`.
///
/// For example:
/// ```swift
/// let frame = Wire.Frame(streamID: 3, kind: .ping(.init(nonce: 7)))
/// let bytes = frame.serializedBytes()
/// let back = try Wire.Frame(serializedBytes: bytes)
/// ```
public enum Wire {}

/// A protocol message that encodes to and decodes from the protobuf wire format.
///
/// Every generated message conforms. Encoding and decoding go through the
/// protobuf-c structs of `CCirrusProto`; all C memory comes from a ``WireArena``
/// and is released before the call returns.
///
/// For example:
/// ```swift
/// var buffer = ByteBufferAllocator().buffer(capacity: frame.serializedSize)
/// frame.serialize(into: &buffer)
/// let decoded = try Wire.Frame(buffer: buffer)
/// ```
public protocol WireMessage: Sendable, Hashable {
    /// A value with every field at its default.
    init()

    /// The number of bytes ``serializedBytes()`` returns.
    var serializedSize: Int { get }

    /// The message in protobuf wire format.
    func serializedBytes() -> [UInt8]

    /// Appends the message in protobuf wire format to `buffer`, packing straight
    /// into its writable bytes. Uses this thread's scratch arena.
    func serialize(into buffer: inout ByteBuffer)

    /// Appends the message in protobuf wire format to `buffer`, taking all
    /// temporary memory from `arena` (reset before returning).
    func serialize(into buffer: inout ByteBuffer, arena: WireArena)

    /// Decodes a message from protobuf wire format.
    ///
    /// - throws: ``WireError`` with code `.malformedMessage` when the bytes are
    ///   not a valid message of this type or nest messages more than 64 deep.
    init(serializedBytes bytes: some Collection<UInt8>) throws(WireError)

    /// Decodes a message from the readable bytes of `buffer`, in place.
    ///
    /// - throws: ``WireError`` with code `.malformedMessage`.
    init(buffer: ByteBuffer) throws(WireError)

    /// Decodes a message from `bytes`, taking all temporary memory from `arena`
    /// (reset before returning). Use one arena per channel or thread.
    ///
    /// - throws: ``WireError`` with code `.malformedMessage`.
    static func decode(_ bytes: UnsafeRawBufferPointer, arena: WireArena) throws(WireError) -> Self
}
