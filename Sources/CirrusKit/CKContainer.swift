import CirrusModel
import CirrusWire
import Foundation
import NIOConcurrencyHelpers

/// A container of an app's databases (CloudKit's `CKContainer`), served by one `cirrusd`.
///
/// Each container keeps one multiplexed TLS connection to its server, opened when the first
/// operation needs it and reopened (with backoff) after it drops. Connection settings come
/// from the environment (`CIRRUS_SERVER`, `CIRRUS_CA`, `CIRRUS_CERT`, `CIRRUS_KEY`,
/// `CIRRUS_TOKEN`) unless given explicitly.
///
/// For example:
/// ```swift
/// let container = CKContainer(identifier: "iCloud.com.example.notes")
/// let saved = try await container.privateCloudDatabase.save(record)
/// ```
open class CKContainer: @unchecked Sendable, CustomStringConvertible {
    // @unchecked Sendable: every stored property is immutable (`let`); the operation queue and
    // the connection manager are thread-safe.

    /// The container's identifier, e.g. "iCloud.com.example.notes".
    public let containerIdentifier: String?
    /// Where the server is and how to authenticate.
    public let clientConfiguration: CirrusClientConfiguration
    let connectionManager: ConnectionManager
    /// Runs operations added with `add(_:)` (to the container or one of its databases).
    let operationQueue: OperationQueue

    /// The identifier `default()` uses: `CIRRUS_CONTAINER` from the environment, else this.
    public static let defaultContainerIdentifier = "iCloud.cirrus.default"

    private static let defaultContainer = NIOLockedValueBox<CKContainer?>(nil)

    /// The container named `identifier`, with connection settings from the environment.
    public convenience init(identifier containerIdentifier: String) {
        self.init(identifier: containerIdentifier, configuration: .fromEnvironment())
    }

    /// The container named `identifier` on the server `configuration` describes.
    public convenience init(identifier containerIdentifier: String, configuration: CirrusClientConfiguration) {
        self.init(
            identifier: containerIdentifier,
            connectionManager: ConnectionManager(configuration: configuration, container: containerIdentifier))
    }

    /// A container over a connection manager with its own timers (tests).
    init(identifier containerIdentifier: String, connectionManager: ConnectionManager) {
        let configuration = connectionManager.configuration
        self.containerIdentifier = containerIdentifier
        self.clientConfiguration = configuration
        self.connectionManager = connectionManager
        self.operationQueue = OperationQueue()
        self.operationQueue.name = "CKContainer \(containerIdentifier)"
    }

    deinit {
        // Nothing can add operations any more; streams still open finish first (GoAway).
        self.connectionManager.shutdown()
    }

    /// The app's default container (one shared instance).
    open class func `default`() -> CKContainer {
        Self.defaultContainer.withLockedValue { container in
            if let container { return container }
            let identifier = ProcessInfo.processInfo.environment["CIRRUS_CONTAINER"].flatMap { $0.isEmpty ? nil : $0 }
            let created = CKContainer(identifier: identifier ?? Self.defaultContainerIdentifier)
            container = created
            return created
        }
    }

    /// The current user's private database.
    open var privateCloudDatabase: CKDatabase { CKDatabase(container: self, scope: .private) }
    /// The database every user of the container shares.
    open var publicCloudDatabase: CKDatabase { CKDatabase(container: self, scope: .public) }
    /// The zones other users shared with the current user.
    open var sharedCloudDatabase: CKDatabase { CKDatabase(container: self, scope: .shared) }

    /// The database of `databaseScope`.
    open func database(with databaseScope: CKDatabase.Scope) -> CKDatabase {
        CKDatabase(container: self, scope: databaseScope)
    }

    /// Runs `operation` against this container.
    open func add(_ operation: CKOperation) {
        if operation.configuration.explicit.container == nil {
            operation.configuration.container = self
        }
        self.operationQueue.addOperation(operation)
    }

    public var description: String {
        "<CKContainer \(self.containerIdentifier ?? "?") \(self.connectionManager.serverDescription)>"
    }
}

extension CKContainer {
    /// The record name of the authenticated user (from the server's `HelloAck`), connecting if
    /// needed. A Cirrus addition used by tests and tools.
    public func authenticatedUserRecordName() async throws -> String {
        do {
            return try await self.connectionManager.connectionFailingOver().get().helloAck.userRecordName
        } catch {
            throw CKError.wrapping(error)
        }
    }

    /// One `Ping`/`Pong` round trip to the server, connecting if needed. A Cirrus addition.
    public func ping() async throws {
        do {
            try await self.connectionManager.ping().get()
        } catch {
            throw CKError.wrapping(error)
        }
    }
}
