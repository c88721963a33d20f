import CirrusModel
import CirrusWire
import Foundation

/// Finds people to add to a share by email address, phone number or user record ID (CloudKit's
/// `CKFetchShareParticipantsOperation`). Container-level: add it to the container.
///
/// Unlike discovery, anyone can be invited: a person the server has no account for by that
/// email address or phone number still gets a participant (with `hasiCloudAccount` false) who
/// can accept once they have one. An unknown user record ID is `unknownItem`.
///
/// For example:
/// ```swift
/// let operation = CKFetchShareParticipantsOperation(
///     userIdentityLookupInfos: CKUserIdentity.LookupInfo.lookupInfos(withEmails: ["bob@example.com"]))
/// operation.perShareParticipantResultBlock = { _, result in
///     if case .success(let participant) = result {
///         participant.permission = .readWrite
///         share.addParticipant(participant)
///     }
/// }
/// container.add(operation)
/// ```
open class CKFetchShareParticipantsOperation: CKOperation, @unchecked Sendable {
    // @unchecked Sendable: as CKOperation.

    /// Who to look for (at most 400).
    open var userIdentityLookupInfos: [CKUserIdentity.LookupInfo] = []
    /// One lookup's participant or error.
    open var perShareParticipantResultBlock: ((CKUserIdentity.LookupInfo, Result<CKShare.Participant, any Error>) -> Void)?
    /// The whole operation's outcome (`partialFailure` when a lookup failed).
    open var fetchShareParticipantsResultBlock: ((Result<Void, any Error>) -> Void)?
    /// Deprecated in CloudKit (use `perShareParticipantResultBlock`).
    open var shareParticipantFetchedBlock: ((CKShare.Participant) -> Void)?
    /// Deprecated in CloudKit (use `fetchShareParticipantsResultBlock`).
    open var fetchShareParticipantsCompletionBlock: (((any Error)?) -> Void)?

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
        return .fetchShareParticipants(
            Wire.FetchShareParticipantsRequest(userIdentityLookupInfos: infos.map(\.wireLookupInfo)))
    }

    override func handle(event: Wire.Event) {
        guard case .fetchShareParticipants(let payload) = event.payload,
            case .perShareParticipantResult(let outcome)? = payload.callback,
            let info = outcome.lookupInfo.flatMap(CKUserIdentity.LookupInfo.init(wire:))
        else { return }
        switch outcome.outcome {
        case .participant(let wire)?:
            let participant = CKShare.Participant(wire: wire)
            self.perShareParticipantResultBlock?(info, .success(participant))
            self.shareParticipantFetchedBlock?(participant)
        case .error(let error)?:
            self.perShareParticipantResultBlock?(info, .failure(CKError(wire: error)))
        case nil:
            self.perShareParticipantResultBlock?(
                info, .failure(CKError(.internalError, message: "the server sent no participant for \(info)")))
        }
    }

    override func deliverResult(_ error: (any Error)?, complete: Wire.Complete?) {
        self.fetchShareParticipantsResultBlock?(error.map { .failure($0) } ?? .success(()))
        self.fetchShareParticipantsCompletionBlock?(error)
    }
}
