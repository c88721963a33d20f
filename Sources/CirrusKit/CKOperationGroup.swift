import CirrusWire
import Foundation
import NIOConcurrencyHelpers

/// Related operations that belong together (CloudKit's `CKOperationGroup`): a name and expected
/// sizes for the server's logs, and a `defaultConfiguration` that operations of the group
/// inherit for values they do not set themselves.
///
/// For example:
/// ```swift
/// let group = CKOperationGroup()
/// group.name = "Initial Sync"
/// group.defaultConfiguration.timeoutIntervalForRequest = 20
/// operation.group = group
/// ```
open class CKOperationGroup: @unchecked Sendable, CustomStringConvertible {
    // @unchecked Sendable: all mutable state is in `storage`, a lock-protected box.

    /// Orders of magnitude of the data a group moves.
    public enum TransferSize: Int, Sendable, Hashable {
        case unknown = 0
        case kilobytes = 1
        case megabytes = 2
        case tensOfMegabytes = 3
        case hundredsOfMegabytes = 4
        case gigabytes = 5
        case tensOfGigabytes = 6
        case hundredsOfGigabytes = 7
    }

    private struct Storage {
        var defaultConfiguration = CKOperation.Configuration()
        var name: String?
        var quantity = 0
        var expectedSendSize = TransferSize.unknown
        var expectedReceiveSize = TransferSize.unknown
    }

    /// A unique identifier, stable for the group's life.
    public let operationGroupID: String
    private let storage = NIOLockedValueBox(Storage())

    public init() {
        self.operationGroupID = UUID().uuidString
    }

    /// The group a wire message describes (a long-lived operation fetched from the server).
    init(wire: Wire.OperationGroup) {
        self.operationGroupID = wire.operationGroupID.isEmpty ? UUID().uuidString : wire.operationGroupID
        self.storage.withLockedValue { storage in
            storage.defaultConfiguration = CKOperation.Configuration(
                explicit: .init(wire: wire.defaultConfiguration)
            )
            storage.name = wire.name.isEmpty ? nil : wire.name
            storage.quantity = Int(clamping: wire.quantity)
            storage.expectedSendSize = TransferSize(rawValue: Int(wire.expectedSendSize.rawValue)) ?? .unknown
            storage.expectedReceiveSize = TransferSize(rawValue: Int(wire.expectedReceiveSize.rawValue)) ?? .unknown
        }
    }

    /// Values the group's operations use where they set none themselves. Assigning copies.
    open var defaultConfiguration: CKOperation.Configuration! {
        get { self.storage.withLockedValue { $0.defaultConfiguration } }
        set {
            let copy = newValue?.copy() ?? CKOperation.Configuration()
            self.storage.withLockedValue { $0.defaultConfiguration = copy }
        }
    }

    /// A name for logs and diagnostics.
    open var name: String? {
        get { self.storage.withLockedValue { $0.name } }
        set { self.storage.withLockedValue { $0.name = newValue } }
    }

    /// How many items the group expects to move.
    open var quantity: Int {
        get { self.storage.withLockedValue { $0.quantity } }
        set { self.storage.withLockedValue { $0.quantity = newValue } }
    }

    /// How much the group expects to upload.
    open var expectedSendSize: TransferSize {
        get { self.storage.withLockedValue { $0.expectedSendSize } }
        set { self.storage.withLockedValue { $0.expectedSendSize = newValue } }
    }

    /// How much the group expects to download.
    open var expectedReceiveSize: TransferSize {
        get { self.storage.withLockedValue { $0.expectedReceiveSize } }
        set { self.storage.withLockedValue { $0.expectedReceiveSize = newValue } }
    }

    public var description: String {
        "<CKOperationGroup \(self.operationGroupID) \(self.name ?? "unnamed")>"
    }

    /// The group as the wire sends it in `Open.group`.
    var wire: Wire.OperationGroup {
        let storage = self.storage.withLockedValue { $0 }
        return Wire.OperationGroup(
            operationGroupID: self.operationGroupID,
            name: storage.name ?? "",
            quantity: UInt64(max(storage.quantity, 0)),
            expectedSendSize: Wire.TransferSize(rawValue: Int32(storage.expectedSendSize.rawValue)),
            expectedReceiveSize: Wire.TransferSize(rawValue: Int32(storage.expectedReceiveSize.rawValue)),
            defaultConfiguration: storage.defaultConfiguration.explicit.wire
        )
    }
}
