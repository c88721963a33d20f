/// The heap storage of a message whose fields are shared by its copies until one of them
/// changes (copy on write); generated code uses it for the messages the generator lists in
/// `COPY_ON_WRITE`. A value holding one replaces it with a copy before writing unless it is
/// the only holder (`isKnownUniquelyReferenced`), so a storage two values share is never
/// written.
final class WireStorage<Value: Hashable & Sendable>: @unchecked Sendable {
    // @unchecked: `value` is written only through a reference its holder has just found to be
    // the only one (see the type's comment), so no other thread can be reading it then;
    // Array and Dictionary share their storage across threads under the same rule.
    // Exclusivity is not checked again here: only its holder, a struct, reaches the storage,
    // and Swift already checks every access to that struct; a dynamic check on each field
    // read made encoding a record measurably slower.
    @exclusivity(unchecked) var value: Value

    init(_ value: Value) {
        self.value = value
    }
}
