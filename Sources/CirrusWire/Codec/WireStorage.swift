/// The heap storage of a message whose fields are shared by its copies until one of them
/// changes (copy on write); generated code uses it for the messages the generator lists in
/// `COPY_ON_WRITE`. A value holding one replaces it with a copy before writing unless it is
/// the only holder (`isKnownUniquelyReferenced`), so a storage two values share is never
/// written.
///
/// The fields live in the storage object's own allocation (a `ManagedBuffer` header), at an
/// address that does not move while the object lives, and the generated accessors reach them
/// through ``fields``: a read borrows the one field in place, where reading a class's stored
/// property would copy the whole fields value, retaining each of its parts, first.
@usableFromInline
struct WireStorage<Value: Hashable & Sendable>: @unchecked Sendable {
    // @unchecked: the fields are written only through a reference its holder has just found
    // to be the only one (see the type's comment), so no other thread can be reading them
    // then; Array and Dictionary share their storage across threads under the same rule.
    // Only the holding struct reaches the storage, and Swift checks every access to it.
    // (`ManagedBuffer` itself is never `Sendable`, so the object is held in this struct.)
    @usableFromInline var buffer: Buffer

    @usableFromInline
    final class Buffer: ManagedBuffer<Value, UInt8> {
        @inlinable
        static func make(_ value: Value) -> Buffer {
            unsafeDowncast(Self.create(minimumCapacity: 0) { _ in value }, to: Buffer.self)
        }
    }

    /// A storage of its own holding `value`.
    @inlinable
    init(_ value: Value) {
        self.buffer = Buffer.make(value)
    }

    /// The fields, valid while the holder keeps this storage (across each of its accesses).
    @inlinable
    var fields: UnsafeMutablePointer<Value> {
        self.buffer.withUnsafeMutablePointerToHeader { $0 }
    }

    /// The fields to write, in a storage of this holder's own: copied first when another
    /// holder shares them.
    @inlinable
    var uniqueFields: UnsafeMutablePointer<Value> {
        mutating get {
            if !isKnownUniquelyReferenced(&self.buffer) {
                self.buffer = Buffer.make(self.fields.pointee)
            }
            return self.fields
        }
    }

    /// Whether both hold the very same storage (so their fields are equal).
    @inlinable
    func isShared(with other: Self) -> Bool {
        self.buffer === other.buffer
    }
}
