/// Immutable heap storage that breaks a cycle of message types (a message that
/// contains itself through singular fields). Generated code uses it only for
/// fields on such a cycle; values keep value semantics because a box is never
/// mutated, only replaced.
final class WireBox<Value: Hashable & Sendable>: Hashable, Sendable {
    let value: Value

    init(_ value: Value) {
        self.value = value
    }

    static func == (lhs: WireBox, rhs: WireBox) -> Bool {
        lhs === rhs || lhs.value == rhs.value
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(value)
    }
}
