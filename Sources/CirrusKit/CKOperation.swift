import CirrusModel
import CirrusWire
import Dispatch
import Foundation
import NIOConcurrencyHelpers
import Synchronization

/// The base class of every CloudKit operation: an asynchronous `Foundation.Operation` that runs
/// as one stream on its container's connection.
///
/// Add it to a database (`database.add(_:)`), a container, an `OperationQueue`, or call
/// `start()`. Its callback blocks run serially, in the order the server produced them, on the
/// operation's own callback queue; `completionBlock` runs after the result block.
/// Dependencies, `cancel()` (which tells the server), `waitUntilFinished()` and
/// `qualityOfService` behave as Foundation documents.
open class CKOperation: Operation, @unchecked Sendable {
    // @unchecked Sendable: the run state (`run`) is lock-protected; the callback blocks and
    // request properties follow CloudKit's contract: set before the operation starts, read only
    // after (`start()`'s caller, e.g. an OperationQueue, provides the ordering), then used only
    // on the serial `callbackQueue`.

    /// The type of `operationID`.
    public typealias ID = String

    private enum Phase: Sendable {
        case ready
        case executing
        case finished
    }

    private struct RunState {
        var phase = Phase.ready
        var stream: ClientStream?
        var resultDelivered = false
        /// `longLivedOperationWasPersistedBlock` ran (it runs once, however often the operation
        /// is resumed).
        var persistedDelivered = false
        var lastProgress = DispatchTime.now()
        var startedAt = DispatchTime.now()
        /// Registered with ``OperationTimeouts``.
        var isWatched = false
        /// The owner acknowledges the completion itself (`acknowledgeCompletion()`), once it
        /// has recorded the result; until then the stream waits here.
        var defersAcknowledgement = false
        var unacknowledged: ClientStream?
        /// Callbacks may run on the connection's event loop (``runsCallbacksInPlace()``).
        var callbacksInPlace = false
    }

    /// A unique identifier; for long-lived operations the ID the server lists them by.
    public var operationID: ID { self.identity.withLock { $0.operationID } }
    /// The operation's ID and, for an operation rebuilt by `CKContainer.fetchLongLivedOperation`,
    /// the `Open` the server runs it from (set once, before the operation is handed out).
    private let identity: Mutex<(operationID: ID, resumedOpen: Wire.Open?)>
    private let configurationBox: Mutex<Configuration>
    private let run = Mutex(RunState())
    /// The serial queue every callback block of this operation runs on.
    let callbackQueue: DispatchQueue

    /// The operation's group, whose `defaultConfiguration` fills in values not set here.
    open var group: CKOperationGroup?

    /// Runs when the server has stored a long-lived operation and will keep its callbacks.
    open var longLivedOperationWasPersistedBlock: (() -> Void)?

    public override init() {
        let id = RandomUUID.string()
        self.identity = Mutex((id, nil))
        self.configurationBox = Mutex(Configuration())
        self.callbackQueue = DispatchQueue(label: "CKOperation.callbacks.\(id)")
        super.init()
    }

    /// The operation's own configuration (explicit values win over the group's). Assigning copies.
    open var configuration: Configuration! {
        get { self.configurationBox.withLock { $0 } }
        set {
            let copy = newValue?.copy() ?? Configuration()
            self.configurationBox.withLock { $0 = copy }
        }
    }

    /// The configuration the operation runs with after the merge rule.
    var resolvedConfiguration: ResolvedConfiguration {
        ResolvedConfiguration(operation: self.configuration.explicit, group: self.group?.defaultConfiguration.explicit)
    }

    /// Mirrors `configuration.qualityOfService` (merged with the group's), as CloudKit does.
    open override var qualityOfService: QualityOfService {
        get { self.resolvedConfiguration.qualityOfService }
        set {
            self.configuration.qualityOfService = newValue
            super.qualityOfService = newValue
        }
    }

    // MARK: - Configuration shortcuts (deprecated in CloudKit, kept so older code compiles)

    /// `configuration.allowsCellularAccess`.
    open var allowsCellularAccess: Bool {
        get { self.configuration.allowsCellularAccess }
        set { self.configuration.allowsCellularAccess = newValue }
    }

    /// `configuration.isLongLived`.
    open var isLongLived: Bool {
        get { self.configuration.isLongLived }
        set { self.configuration.isLongLived = newValue }
    }

    /// `configuration.timeoutIntervalForRequest`.
    open var timeoutIntervalForRequest: TimeInterval {
        get { self.configuration.timeoutIntervalForRequest }
        set { self.configuration.timeoutIntervalForRequest = newValue }
    }

    /// `configuration.timeoutIntervalForResource`.
    open var timeoutIntervalForResource: TimeInterval {
        get { self.configuration.timeoutIntervalForResource }
        set { self.configuration.timeoutIntervalForResource = newValue }
    }

    // MARK: - Foundation.Operation

    open override var isAsynchronous: Bool { true }

    open override var isExecuting: Bool {
        self.run.withLock { $0.phase == .executing }
    }

    open override var isFinished: Bool {
        self.run.withLock { $0.phase == .finished }
    }

    open override func start() {
        let started = self.run.withLock { state -> Bool in
            guard state.phase == .ready else { return false }
            return true
        }
        guard started else { return }
        self.willChangeValue(forKey: "isExecuting")
        self.run.withLock {
            $0.phase = .executing
            $0.startedAt = .now()
            $0.lastProgress = .now()
        }
        self.didChangeValue(forKey: "isExecuting")
        if self.isCancelled {
            self.callbackQueue.async { self.finishOnQueue(CKError(.operationCancelled, message: "the operation was cancelled")) }
            return
        }
        self.begin()
    }

    open override func main() {}

    open override func cancel() {
        super.cancel()
        let stream = self.run.withLock { state -> ClientStream? in
            guard state.phase == .executing else { return nil }
            return state.stream
        }
        guard self.isExecuting else { return }
        stream?.cancel(reason: "cancelled by the client")
        self.callbackQueue.async { self.finishOnQueue(CKError(.operationCancelled, message: "the operation was cancelled")) }
    }

    // MARK: - Running

    /// Makes this operation the client side of the long-lived operation the server runs from
    /// `open`: it takes the operation's ID, and starting it sends `Resume` instead of `Open`.
    func adoptLongLivedOperation(_ open: Wire.Open) {
        self.identity.withLock { $0 = (open.operationID, open) }
    }

    /// The `Open` of the server's long-lived operation this operation resumes, if it was fetched.
    var resumedOpen: Wire.Open? { self.identity.withLock { $0.resumedOpen } }

    /// Resolves where the operation runs: the container and the database scope.
    func target() -> (container: CKContainer, scope: Wire.DatabaseScope) {
        (self.resolvedConfiguration.container ?? CKContainer.default(), .unspecified)
    }

    /// The typed request; throws a `CKError` when the request is invalid (checked before
    /// anything is sent). Subclasses override.
    func makeRequest(maximumItems: Int) throws -> Wire.Open.Request {
        throw CKError(.internalError, message: "\(type(of: self)) has no request")
    }

    /// The request as the stream sends it: ``makeRequest(maximumItems:)``'s, or a modify-records
    /// request whose records to save are already written (`recordsToSave`, which go before the
    /// request's own: see `FrameEncoder.encode(_:appendingRecordsToSave:into:maximumFrameBytes:)`).
    /// Subclasses that write records override.
    func makeRequestToSend(maximumItems: Int) throws -> (request: Wire.Open.Request, recordsToSave: Wire.EncodedRecords?) {
        (try self.makeRequest(maximumItems: maximumItems), nil)
    }

    /// One event of the operation, on the callback queue. Subclasses override.
    func handle(event: Wire.Event) {}

    /// The final result, on the callback queue, exactly once: nil error = success. Subclasses
    /// call their result block.
    func deliverResult(_ error: (any Error)?, complete: Wire.Complete?) {}

    /// Items per operation accepted by the server (CloudKit's 400).
    static let maximumItemsPerOperation = 400

    /// Work before the request is built, off the caller's thread (the asset uploads of a
    /// modify); calls `done` once, with the error that ends the operation, if any. A fetched
    /// long-lived operation skips it. Subclasses override.
    func prepareToStart(_ done: @escaping @Sendable ((any Error)?) -> Void) {
        done(nil)
    }

    /// Marks progress for the request timeout (a long upload or download is progress).
    func noteProgress() {
        self.run.withLock { $0.lastProgress = .now() }
    }

    private func begin() {
        guard self.resumedOpen == nil else {
            self.openStream()
            return
        }
        self.prepareToStart { error in
            if let error {
                self.callbackQueue.async { self.finishOnQueue(error) }
                return
            }
            self.openStream()
        }
    }

    private func openStream() {
        let (container, scope) = self.target()
        let resumedOpen = self.resumedOpen
        let open: Wire.Open
        var recordsToSave: Wire.EncodedRecords?
        if let resumedOpen {
            // A fetched operation resumes the request already running on the server; building
            // the request again only prepares what the callbacks use (records by ID …).
            _ = try? self.makeRequest(maximumItems: Self.maximumItemsPerOperation)
            open = resumedOpen
        } else {
            let request: Wire.Open.Request
            do {
                (request, recordsToSave) = try self.makeRequestToSend(maximumItems: Self.maximumItemsPerOperation)
            } catch {
                self.callbackQueue.async { self.finishOnQueue(error) }
                return
            }
            open = Wire.Open(
                operationID: self.operationID,
                databaseScope: scope,
                containerIdentifier: container.containerIdentifier ?? "",
                configuration: self.configuration.explicit.wire,
                group: self.group?.wire,
                request: request
            )
        }
        let resolved = self.resolvedConfiguration
        let manager = container.connectionManager
        // The stream keeps the operation alive while it runs (as CloudKit does for operations
        // started without a queue); the cycle ends when the stream ends.
        var deliversInPlace: (@Sendable ([StreamDelivery]) -> Bool)?
        if self.run.withLock({ $0.callbacksInPlace }), !resolved.isLongLived, resumedOpen == nil {
            deliversInPlace = { deliveries in self.canDeliverInPlace(deliveries) }
        }
        let stream = ClientStream(
            open: open,
            recordsToSave: recordsToSave,
            window: manager.configuration.streamWindow,
            queue: self.callbackQueue,
            isLongLived: resolved.isLongLived,
            resuming: resumedOpen != nil,
            deliversInPlace: deliversInPlace
        ) { delivery in
            self.receive(delivery)
        }
        self.run.withLock { $0.stream = stream }
        if self.isCancelled {
            // cancel() ran between start() and here, before it could see the stream.
            stream.cancel(reason: "cancelled by the client")
            self.callbackQueue.async { self.finishOnQueue(CKError(.operationCancelled, message: "the operation was cancelled")) }
            return
        }
        self.startTimer(resolved)
        manager.open(stream)
    }

    private func receive(_ delivery: StreamDelivery) {
        let delivered = self.run.withLock { state -> Bool in
            if !state.resultDelivered { state.lastProgress = .now() }
            return state.resultDelivered
        }
        guard !delivered else { return }
        switch delivery {
        case .persisted:
            let first = self.run.withLock { state -> Bool in
                defer { state.persistedDelivered = true }
                return !state.persistedDelivered
            }
            if first {
                self.longLivedOperationWasPersistedBlock?()
            }
        case .event(let event):
            self.handle(event: event)
        case .complete(let complete):
            // A deferred acknowledgement is parked before the result block runs, so the owner
            // finds the stream whenever it acknowledges.
            let (stream, deferred) = self.run.withLock { state -> (ClientStream?, Bool) in
                guard let stream = state.stream, stream.isLongLived, complete.error?.code != .unknownOperation else {
                    return (nil, false)
                }
                if state.defersAcknowledgement { state.unacknowledged = stream }
                return (stream, state.defersAcknowledgement)
            }
            self.finishOnQueue(complete.error.map { CKError(wire: $0) }, complete: complete)
            if let stream, !deferred {
                // The result reached the app: the server may forget the operation.
                stream.acknowledgeCompletion()
            }
        case .failed(let failure):
            self.finishOnQueue(CKError(failure))
        }
    }

    /// Lets the operation's callbacks run on the connection's event loop that read them, on
    /// the callback queue but without a hand-off to another thread, for the deliveries
    /// ``canDeliverInPlace(_:)`` accepts. Only for an operation whose blocks are the library's
    /// own and return at once (an async convenience call's): app code must never run on the
    /// event loop. Set before start.
    func runsCallbacksInPlace() {
        self.run.withLock { $0.callbacksInPlace = true }
    }

    /// Whether `deliveries` (events and the `Complete` of one read burst) may be handled on
    /// the connection's event loop: their handling must never wait for it (an asset download
    /// does). Subclasses that allow it override; none by default.
    func canDeliverInPlace(_ deliveries: [StreamDelivery]) -> Bool {
        false
    }

    /// Whether `deliveries` are only events that `accepts` and a `Complete` (the common part of
    /// the ``canDeliverInPlace(_:)`` overrides).
    static func onlyEvents(_ deliveries: [StreamDelivery], accepting accepts: (Wire.Event) -> Bool) -> Bool {
        deliveries.allSatisfy { delivery in
            switch delivery {
            case .complete: true
            case .event(let event): accepts(event)
            case .persisted, .failed: false
            }
        }
    }

    /// Makes a long-lived operation leave the acknowledgement of its completion to
    /// `acknowledgeCompletion()` (the sync engine calls it once the app has persisted the
    /// outcome, so a process killed in between finds the operation again). Set before start.
    func defersCompletionAcknowledgement() {
        self.run.withLock { $0.defersAcknowledgement = true }
    }

    /// Lets the server forget a completed long-lived operation whose acknowledgement was
    /// deferred (best effort: if its connection is gone, the server's retention ends it).
    func acknowledgeCompletion() {
        let stream = self.run.withLock { state -> ClientStream? in
            defer { state.unacknowledged = nil }
            return state.unacknowledged
        }
        stream?.acknowledgeCompletion()
    }

    /// Delivers the result (once) and finishes. Callback queue only.
    func finishOnQueue(_ error: (any Error)?, complete: Wire.Complete? = nil) {
        let (first, watched) = self.run.withLock { state -> (Bool, Bool) in
            guard !state.resultDelivered else { return (false, false) }
            state.resultDelivered = true
            return (true, state.isWatched)
        }
        guard first else { return }
        if watched {
            OperationTimeouts.shared.unregister(self)
        }
        self.deliverResult(error, complete: complete)
        self.markFinished()
    }

    private func markFinished() {
        self.willChangeValue(forKey: "isExecuting")
        self.willChangeValue(forKey: "isFinished")
        self.run.withLock {
            $0.phase = .finished
            $0.stream = nil
        }
        self.didChangeValue(forKey: "isExecuting")
        self.didChangeValue(forKey: "isFinished")
    }

    /// Ends the operation with a timeout when no progress came for `timeoutIntervalForRequest`
    /// or it ran longer than `timeoutIntervalForResource`.
    private func startTimer(_ resolved: ResolvedConfiguration) {
        let request = resolved.timeoutIntervalForRequest
        let resource = resolved.timeoutIntervalForResource
        let limit = [request, resource].filter { $0 > 0 && $0.isFinite }.min() ?? 0
        guard limit > 0 else { return }
        let watched = self.run.withLock { state -> Bool in
            // Not when the result is in already (a refusal can beat this call).
            guard !state.resultDelivered else { return false }
            state.isWatched = true
            return true
        }
        guard watched else { return }
        let interval = max(0.01, min(1.0, limit / 4))
        OperationTimeouts.shared.register(
            .init(operation: self, request: request, resource: resource, interval: interval))
        if self.run.withLock({ $0.resultDelivered }) {
            // The result may have been delivered before the watch existed (a cancel racing
            // the start): it could not end a watch that was not there yet.
            OperationTimeouts.shared.unregister(self)
        }
    }

    /// Whether `request` or `resource` may have run out at `now` (uptime nanoseconds): read
    /// by ``OperationTimeouts`` off the callback queue, confirmed on it by ``checkTimeouts``.
    func mayHaveTimedOut(now: UInt64, request: TimeInterval, resource: TimeInterval) -> Bool {
        let (lastProgress, startedAt) = self.run.withLock { ($0.lastProgress, $0.startedAt) }
        let idle = Double(now - min(now, lastProgress.uptimeNanoseconds)) / 1e9
        let total = Double(now - min(now, startedAt.uptimeNanoseconds)) / 1e9
        return (resource > 0 && total >= resource) || (request > 0 && idle >= request)
    }

    /// Ends the operation with a timeout if one ran out. Callback queue only.
    func checkTimeouts(request: TimeInterval, resource: TimeInterval) {
        let (lastProgress, startedAt, stream) = self.run.withLock { ($0.lastProgress, $0.startedAt, $0.stream) }
        let now = DispatchTime.now().uptimeNanoseconds
        let idle = Double(now - min(now, lastProgress.uptimeNanoseconds)) / 1e9
        let total = Double(now - min(now, startedAt.uptimeNanoseconds)) / 1e9
        let message: String
        if resource > 0, total >= resource {
            message = "the operation did not finish within timeoutIntervalForResource (\(resource) s)"
        } else if request > 0, idle >= request {
            message = "no response within timeoutIntervalForRequest (\(request) s)"
        } else {
            return
        }
        // A long-lived operation keeps running on the server (it can be fetched and resumed);
        // any other is cancelled.
        let isLongLived = stream?.isLongLived ?? false
        stream?.cancel(reason: "timed out", detach: isLongLived)
        let detail = isLongLived ? "; the long-lived operation keeps running on the server" : ""
        self.finishOnQueue(CKError(.networkFailure, message: message + detail))
    }
}

/// The base class of operations that act on one database.
open class CKDatabaseOperation: CKOperation, @unchecked Sendable {
    // @unchecked Sendable: as CKOperation; `database` is set before the operation starts.

    /// The database the operation runs against; nil = the private database of the
    /// configuration's container (or the default container).
    open var database: CKDatabase?

    override func target() -> (container: CKContainer, scope: Wire.DatabaseScope) {
        if let database = self.database {
            return (database.container, database.databaseScope.wireScope)
        }
        let container = self.resolvedConfiguration.container ?? CKContainer.default()
        return (container, .private)
    }
}
