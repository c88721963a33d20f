import CirrusModel
import CirrusWire
import Foundation

/// Finds users by email address, phone number or user record ID (CloudKit's
/// `CKDiscoverUserIdentitiesOperation`). Container-level: add it to the container.
///
/// Only users who granted `userDiscoverability` in the container are found, each reported as
/// the server finds it; a lookup that finds nobody discoverable is simply absent, never an
/// error.
///
/// For example:
/// ```swift
/// let infos = CKUserIdentity.LookupInfo.lookupInfos(withEmails: ["bob@example.com"])
/// let operation = CKDiscoverUserIdentitiesOperation(userIdentityLookupInfos: infos)
/// operation.userIdentityDiscoveredBlock = { identity, lookupInfo in print(lookupInfo, identity) }
/// operation.discoverUserIdentitiesResultBlock = { result in print(result) }
/// container.add(operation)
/// ```
open class CKDiscoverUserIdentitiesOperation: CKOperation, @unchecked Sendable {
    // @unchecked Sendable: as CKOperation — properties are set before start, blocks run on the
    // serial callback queue.

    /// Who to look for (at most 400).
    open var userIdentityLookupInfos: [CKUserIdentity.LookupInfo] = []
    /// One user found, with the lookup info that found them.
    open var userIdentityDiscoveredBlock: ((CKUserIdentity, CKUserIdentity.LookupInfo) -> Void)?
    /// The whole operation's outcome (`invalidArguments` for a malformed lookup info).
    open var discoverUserIdentitiesResultBlock: ((Result<Void, any Error>) -> Void)?
    /// Deprecated in CloudKit (use `discoverUserIdentitiesResultBlock`).
    open var discoverUserIdentitiesCompletionBlock: (((any Error)?) -> Void)?

    public override init() {
        super.init()
    }

    public convenience init(userIdentityLookupInfos: [CKUserIdentity.LookupInfo]) {
        self.init()
        self.userIdentityLookupInfos = userIdentityLookupInfos
    }

    override func makeRequest(maximumItems: Int) throws -> Wire.Open.Request {
        let infos = self.userIdentityLookupInfos
        guard infos.count <= maximumItems else {
            throw CKError(.limitExceeded, message: "\(infos.count) lookup infos in one operation; at most \(maximumItems)")
        }
        return .discoverUserIdentities(
            Wire.DiscoverUserIdentitiesRequest(userIdentityLookupInfos: infos.map(\.wireLookupInfo)))
    }

    override func handle(event: Wire.Event) {
        guard case .discoverUserIdentities(let payload) = event.payload,
            case .userIdentityDiscovered(let discovered)? = payload.callback, let wire = discovered.identity
        else { return }
        let identity = CKUserIdentity(wire: wire)
        guard let lookupInfo = discovered.lookupInfo.flatMap(CKUserIdentity.LookupInfo.init(wire:)) ?? identity.lookupInfo
        else { return }
        self.userIdentityDiscoveredBlock?(identity, lookupInfo)
    }

    override func deliverResult(_ error: (any Error)?, complete: Wire.Complete?) {
        self.discoverUserIdentitiesResultBlock?(error.map { .failure($0) } ?? .success(()))
        self.discoverUserIdentitiesCompletionBlock?(error)
    }
}

/// Finds every user who granted `userDiscoverability` in the container, except the current
/// user (CloudKit's `CKDiscoverAllUserIdentitiesOperation`; on Apple platforms the user's
/// contacts). Container-level: add it to the container.
///
/// For example:
/// ```swift
/// let operation = CKDiscoverAllUserIdentitiesOperation()
/// operation.userIdentityDiscoveredBlock = { identity in print(identity) }
/// container.add(operation)
/// ```
open class CKDiscoverAllUserIdentitiesOperation: CKOperation, @unchecked Sendable {
    // @unchecked Sendable: as CKOperation.

    /// One user found.
    open var userIdentityDiscoveredBlock: ((CKUserIdentity) -> Void)?
    /// The whole operation's outcome.
    open var discoverAllUserIdentitiesResultBlock: ((Result<Void, any Error>) -> Void)?
    /// Deprecated in CloudKit (use `discoverAllUserIdentitiesResultBlock`).
    open var discoverAllUserIdentitiesCompletionBlock: (((any Error)?) -> Void)?

    public override init() {
        super.init()
    }

    override func makeRequest(maximumItems: Int) throws -> Wire.Open.Request {
        .discoverAllUserIdentities(Wire.DiscoverAllUserIdentitiesRequest())
    }

    override func handle(event: Wire.Event) {
        guard case .discoverAllUserIdentities(let payload) = event.payload,
            case .userIdentityDiscovered(let wire)? = payload.callback
        else { return }
        self.userIdentityDiscoveredBlock?(CKUserIdentity(wire: wire))
    }

    override func deliverResult(_ error: (any Error)?, complete: Wire.Complete?) {
        self.discoverAllUserIdentitiesResultBlock?(error.map { .failure($0) } ?? .success(()))
        self.discoverAllUserIdentitiesCompletionBlock?(error)
    }
}
