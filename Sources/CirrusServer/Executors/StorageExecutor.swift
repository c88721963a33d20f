import CirrusStore
import CirrusWire
import Logging

/// Runs the record and zone operations — `CKModifyRecordsOperation`,
/// `CKFetchRecordsOperation`, `CKModifyRecordZonesOperation`, `CKFetchRecordZonesOperation`,
/// and the change feeds `CKFetchRecordZoneChangesOperation`, `CKFetchDatabaseChangesOperation` —
/// against a ``RecordStorage``, streaming each per-item callback as an event.
///
/// The caller's database follows from the `Open`: the private database is the caller's own,
/// the public one is shared by all. Operation kinds this executor does not run are refused on
/// their stream with `SERVER_REJECTED_REQUEST`, naming the kind.
public struct StorageExecutor: OperationExecutor {
    /// Items one operation may carry, as CloudKit.
    public static let maximumItems = 400

    let storage: any RecordStorage
    let tokens: ChangeTokenSealer
    let logger: Logger
    /// Wakes the notification watches when the storage commits notifications.
    public let notifications: NotificationHub
    /// The user directory the identity kinds read and write (in the same storage).
    public let users: UserDirectory
    /// Where asset content lives as files (uploads, downloads, content of saved records); nil =
    /// assets travel inline and are kept in the storage, and `UploadAsset`/`DownloadAsset`
    /// are refused.
    public let assets: AssetStore?
    /// Where push delivery lag is recorded; nil = not recorded.
    let metrics: ServerMetrics?
    /// What goes before the path of every share URL: the address clients reach the server at
    /// (`https://host:port`).
    public let shareURLBase: String
    /// The callers' shared-database access, kept while no share changes.
    let sharedAccess = SharedAccessCache()

    /// - parameter tokens: seals the change tokens handed to clients; keep its secret across
    ///   restarts (see ``ServerSecret``) or every client's tokens stop working. Ephemeral by default.
    /// - parameter users: the directory over `storage` the server also refuses disabled users
    ///   with (``ServerConfiguration/users``); a fresh one when nil.
    /// - parameter assets: the asset file store over the same `storage`.
    /// - parameter metrics: records push delivery lag (`cirrus_notification_delivery_seconds`).
    /// - parameter shareURLBase: the server's address in share URLs (`https://host:port`).
    public init(
        storage: any RecordStorage,
        tokens: ChangeTokenSealer = .ephemeral(),
        users: UserDirectory? = nil,
        assets: AssetStore? = nil,
        metrics: ServerMetrics? = nil,
        shareURLBase: String = "https://localhost:7443",
        logger: Logger = Logger(label: "cirrusd.operations")
    ) {
        self.storage = storage
        self.shareURLBase = shareURLBase
        self.assets = assets
        self.metrics = metrics
        self.tokens = tokens
        self.logger = logger
        self.notifications = NotificationHub(observing: storage)
        self.users = users ?? UserDirectory(storage: storage, logger: logger)
    }

    nonisolated(nonsending) public func run(
        _ open: Wire.Open, caller: ClientIdentity, stream: OperationStream
    ) async -> OperationCompletion {
        guard let request = open.request else {
            return .failure(.invalidArguments, "Open carries no request")
        }
        // A kind this executor does not run is refused by name before anything is looked up.
        guard self.runs(request) else {
            return Self.refusal(of: request)
        }
        // Container-level kinds carry no database scope: they run before any database is
        // looked up.
        switch request {
        case .fetchNotificationChanges(let request):
            return await self.completion(of: open) {
                try await self.fetchNotificationChanges(request, open, caller: caller, stream: stream)
            }
        case .watchNotifications(let request):
            return await self.completion(of: open) {
                try await self.watchNotifications(request, open, caller: caller, stream: stream)
            }
        case .markNotificationsRead(let request):
            return await self.completion(of: open) {
                try await self.markNotificationsRead(request, open, caller: caller)
            }
        case .modifyBadge(let request):
            return await self.completion(of: open) {
                try await self.modifyBadge(request, open, caller: caller)
            }
        case .fetchUserRecordID, .accountStatus, .applicationPermission, .discoverUserIdentities,
            .discoverAllUserIdentities, .fetchWebAuthToken:
            return await self.completion(of: open) {
                try await self.runIdentityKind(request, open, caller: caller, stream: stream)
            }
        case .fetchShareMetadata, .fetchShareParticipants, .acceptShares:
            return await self.completion(of: open) {
                try await self.runSharingKind(request, open, caller: caller, stream: stream)
            }
        default:
            break
        }
        let database: DatabaseKey
        do {
            database = try Self.database(for: open, caller: caller)
        } catch {
            return OperationCompletion(error: error.error)
        }
        let context = Context(
            database: database,
            caller: caller,
            owners: ZoneOwnerMapping(
                databaseOwner: database.owner,
                downloads: self.assets.map { AssetDownloadIssuer(assets: $0, user: caller.userRecordName) },
                caller: caller.userRecordName, shareURLBase: self.shareURLBase),
            stream: stream,
            run: stream.run
        )
        if database.scope == .shared && Self.runsInSharedDatabase(request) {
            return await self.completion(of: open) { try await self.runShared(request, context) }
        }
        return await self.completion(of: open) {
            switch request {
            case .modifyRecords(let request):
                return try await self.modifyRecords(request, context)
            case .fetchRecords(let request):
                return try await self.fetchRecords(request, context)
            case .query(let request):
                return try await self.query(request, context)
            case .modifyRecordZones(let request):
                return try await self.modifyRecordZones(request, context)
            case .fetchRecordZones(let request):
                return try await self.fetchRecordZones(request, context)
            case .fetchRecordZoneChanges(let request):
                return try await self.fetchRecordZoneChanges(request, context)
            case .fetchDatabaseChanges(let request):
                return try await self.fetchDatabaseChanges(request, context)
            case .modifySubscriptions(let request):
                return try await self.modifySubscriptions(request, context)
            case .fetchSubscriptions(let request):
                return try await self.fetchSubscriptions(request, context)
            case .uploadAsset(let request):
                return try await self.uploadAsset(request, context)
            case .downloadAsset(let request):
                return try await self.downloadAsset(request, context)
            default:
                return Self.refusal(of: request)
            }
        }
    }

    /// The kinds this executor runs; every other kind is refused with `SERVER_REJECTED_REQUEST`
    /// naming it, before any database lookup, and is never registered as long-lived.
    public func runs(_ request: Wire.Open.Request) -> Bool {
        switch request {
        case .modifyRecords, .fetchRecords, .query, .modifyRecordZones, .fetchRecordZones, .fetchRecordZoneChanges,
            .fetchDatabaseChanges, .modifySubscriptions, .fetchSubscriptions, .fetchNotificationChanges,
            .watchNotifications, .fetchUserRecordID, .accountStatus, .applicationPermission, .discoverUserIdentities,
            .discoverAllUserIdentities, .fetchWebAuthToken, .markNotificationsRead, .modifyBadge,
            .fetchShareMetadata, .fetchShareParticipants, .acceptShares:
            return true
        case .uploadAsset, .downloadAsset:
            return self.assets != nil
        case .fetchLongLivedOperationIDs, .fetchLongLivedOperation:
            return false
        }
    }

    /// The refusal of a kind this executor does not run.
    static func refusal(of request: Wire.Open.Request) -> OperationCompletion {
        .failure(.serverRejectedRequest, "\(Self.kindName(request)) is not run by this server")
    }

    /// What `body` returned, or the completion its error calls for.
    nonisolated(nonsending) private func completion(
        of open: Wire.Open, _ body: nonisolated(nonsending) () async throws -> OperationCompletion
    ) async -> OperationCompletion {
        do {
            return try await body()
        } catch let error as StoreError {
            return OperationCompletion(error: error.operationError)
        } catch is CancellationError {
            return .failure(.operationCancelled, "the operation was cancelled")
        } catch {
            self.logger.error("operation \(open.operationID) failed: \(error)")
            return .failure(.internalError, "the server failed to run the operation")
        }
    }

    struct Context {
        let database: DatabaseKey
        let caller: ClientIdentity
        let owners: ZoneOwnerMapping
        let stream: OperationStream
        /// Set when the operation is long-lived: its events go to its journal.
        let run: LongLivedRun?
        /// Set for a zone of the shared database: the records of the zone shared with the caller
        /// (the change feed leaves out the others).
        var sharedRecords: SharedRecords? = nil

        /// Where a long-lived operation continues after a restart; nil when it starts afresh.
        var checkpoint: LongLivedCheckpoint? { run?.checkpoint }

        /// Item errors a long-lived operation journaled before a restart.
        var priorErrors: [Wire.ItemError] { run?.priorErrors ?? [] }

        /// Sends `payloads` in order. A long-lived operation journals them in one transaction
        /// with `checkpoint`, the position to continue from once they are journaled.
        func emit(_ payloads: [Wire.Event.Payload], checkpoint: @autoclosure () -> LongLivedCheckpoint) async throws {
            if let run {
                try Task.checkCancellation()
                try await run.journal(payloads, checkpoint: checkpoint())
                return
            }
            try await stream.emit(contentsOf: payloads)
        }

        /// Sends `payloads` in order, as ``emit(_:checkpoint:)`` does; those already in wire
        /// format go out as they are (a long-lived operation decodes them to journal them).
        func emit(
            _ payloads: [OperationStream.Payload], checkpoint: @autoclosure () -> LongLivedCheckpoint
        ) async throws {
            guard run == nil else {
                let decoded = try payloads.map { payload throws(WireError) in try payload.decoded() }
                try await self.emit(decoded, checkpoint: checkpoint())
                return
            }
            try await stream.emit(payloads: payloads)
        }
    }

    /// Why an `Open` names no usable database.
    struct Refusal: Error {
        let error: Wire.OperationError
    }

    /// The database an operation addresses.
    static func database(for open: Wire.Open, caller: ClientIdentity) throws(Refusal) -> DatabaseKey {
        guard !open.containerIdentifier.isEmpty else {
            throw Refusal(error: Wire.OperationError(code: .badContainer, message: "Open names no container"))
        }
        switch open.databaseScope {
        case .private:
            return DatabaseKey.private(container: open.containerIdentifier, user: caller.userRecordName)
        case .public:
            return DatabaseKey.public(container: open.containerIdentifier)
        case .shared:
            return DatabaseKey.shared(container: open.containerIdentifier, user: caller.userRecordName)
        case .unspecified, .unrecognized:
            throw Refusal(error: Wire.OperationError(code: .badDatabase, message: "Open names no database scope"))
        }
    }

    /// `partialFailure` carrying every item's error, or success when there is none.
    static func completion(partialErrors: [Wire.ItemError], items: String) -> OperationCompletion {
        guard !partialErrors.isEmpty else { return .success() }
        return OperationCompletion(
            error: Wire.OperationError(
                code: .partialFailure,
                message: "\(partialErrors.count) \(items) failed",
                partialErrors: partialErrors
            )
        )
    }

    static func tooManyItems(_ count: Int) -> OperationCompletion? {
        guard count > Self.maximumItems else { return nil }
        return .failure(.limitExceeded, "\(count) items in one operation; at most \(Self.maximumItems)")
    }

    /// Whether `request` is container-level: its `Open.database_scope` is UNSPECIFIED (the
    /// protos say so for notifications, sharing, user identities and the `CKContainer` methods).
    static func isContainerLevel(_ request: Wire.Open.Request) -> Bool {
        switch request {
        case .fetchNotificationChanges, .markNotificationsRead, .modifyBadge, .watchNotifications,
            .fetchShareMetadata, .fetchShareParticipants, .acceptShares,
            .discoverUserIdentities, .discoverAllUserIdentities,
            .fetchLongLivedOperationIDs, .fetchLongLivedOperation, .fetchUserRecordID, .accountStatus,
            .applicationPermission:
            return true
        case .modifyRecords, .fetchRecords, .query, .modifyRecordZones, .fetchRecordZones, .fetchRecordZoneChanges,
            .fetchDatabaseChanges, .modifySubscriptions, .fetchSubscriptions, .fetchWebAuthToken, .uploadAsset,
            .downloadAsset:
            return false
        }
    }

    static func kindName(_ request: Wire.Open.Request) -> String {
        let description = String(describing: request)
        return String(description.prefix { $0 != "(" })
    }
}
