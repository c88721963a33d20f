internal import CProtobufC

/// A generated message and its protoc-c struct: how to build the struct from
/// the Swift value (all memory from an arena) and the value from the struct.
protocol CBackedMessage: WireMessage {
    /// The protoc-c struct, whose first member is a `ProtobufCMessage`.
    associatedtype CStruct

    /// The protoc-c descriptor of `CStruct` (static C data, never freed).
    static var cDescriptor: UnsafePointer<ProtobufCMessageDescriptor> { get }

    /// An initialised (all defaults) struct in `arena`.
    static func cAllocate(in arena: WireArena) -> UnsafeMutablePointer<CStruct>

    /// Sets every field of `c` from `self`, allocating strings, byte strings,
    /// arrays and sub-messages from `arena`.
    func cFill(_ c: UnsafeMutablePointer<CStruct>, arena: WireArena)

    /// The value of a struct unpacked by protobuf-c. Reads only; NULL pointers
    /// and unknown oneof cases are treated as absent.
    init(cStruct c: UnsafePointer<CStruct>)
}

extension CBackedMessage {
    /// A struct in `arena` holding this value.
    func cMake(in arena: WireArena) -> UnsafeMutablePointer<CStruct> {
        let c = Self.cAllocate(in: arena)
        cFill(c, arena: arena)
        return c
    }
}
